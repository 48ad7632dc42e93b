//! TLS on toolrouter's own listeners (SPEC §9): gRPC and HTTP over rustls, ALPN, the
//! certificate swapped without a restart when its files change, broken files refused, mutual
//! TLS with a client CA. Certificates are made at test time with rcgen.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, SerialNumber};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
use toolrouter::config::ServerConfig;
use toolrouter::pb;
use toolrouter::tls::TlsConfig;

// ----- certificates -----

/// A test CA that issues server and client certificates.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A certificate with its key, PEM.
#[derive(Clone)]
struct Leaf {
    cert: String,
    key: String,
    der: CertificateDer<'static>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A server certificate for localhost and 127.0.0.1.
    fn server(&self, cn: &str, serial: u64) -> Leaf {
        let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    fn client(&self, cn: &str) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf { cert: cert.pem(), key: key.serialize_pem(), der: cert.der().clone() }
    }
}

/// The certificate and key files the server reads, replaced the way an operator would.
struct Files {
    dir: TempDir,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

impl Files {
    fn new(leaf: &Leaf) -> Self {
        let dir = TempDir::new("tls");
        let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
        let f = Files { dir, cert, key };
        f.write(&leaf.cert, &leaf.key);
        f
    }

    /// Replaces both files (each atomically, one after the other).
    fn write(&self, cert: &str, key: &str) {
        for (path, text) in [(&self.cert, cert), (&self.key, key)] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
    }

    fn config(&self) -> TlsConfig {
        TlsConfig { reload_interval: Duration::from_millis(20), ..TlsConfig::new(self.cert.clone(), self.key.clone()) }
    }
}

fn tls_server_config(files: &Files) -> ServerConfig {
    let mut cfg = ServerConfig::for_tests();
    cfg.tls = Some(files.config());
    cfg
}

// ----- clients -----

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A client that trusts `ca_pem`, offers `alpn`, and presents `identity` if given.
fn client_config(ca_pem: &str, alpn: &[&[u8]], identity: Option<&Leaf>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(leaf) => {
            let chain = vec![leaf.der.clone()];
            let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

async fn handshake(addr: SocketAddr, config: rustls::ClientConfig) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(Arc::new(config)).connect(ServerName::try_from("localhost").unwrap(), tcp).await
}

/// The leaf certificate a new connection to `addr` is shown.
async fn presented(addr: SocketAddr, ca: &Ca) -> CertificateDer<'static> {
    let tls = handshake(addr, client_config(&ca.pem, &[b"h2"], None)).await.expect("handshake");
    tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone().into_owned()
}

/// A gRPC channel over TLS, made with our own connector (the main crate has no tonic TLS
/// feature, so it gains no second crypto provider).
async fn grpc_channel(addr: SocketAddr, config: rustls::ClientConfig) -> Result<Channel, tonic::transport::Error> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    Endpoint::from_shared(format!("http://localhost:{}", addr.port()))
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let connector = connector.clone();
            async move {
                let tcp = TcpStream::connect(addr).await?;
                let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
            }
        }))
        .await
}

async fn serving(channel: Channel) -> Result<ServingStatus, tonic::Status> {
    let r = HealthClient::new(channel).check(HealthCheckRequest { service: String::new() }).await?;
    Ok(r.into_inner().status())
}

/// GET over HTTP/1.1 and TLS with reqwest: (status, body).
async fn https_get(addr: SocketAddr, path: &str, config: rustls::ClientConfig) -> Result<(u16, String), reqwest::Error> {
    let client = reqwest::Client::builder().use_preconfigured_tls(config).build()?;
    let r = client.get(format!("https://localhost:{}{path}", addr.port())).send().await?;
    let status = r.status().as_u16();
    Ok((status, r.text().await?))
}

/// One process-wide log capture (thread-local subscribers race over tracing's cached callsite
/// interest when tests run in parallel).
fn logs() -> &'static EventLog {
    static LOGS: std::sync::OnceLock<EventLog> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let log = EventLog::default();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(log.clone())).expect("one subscriber");
        log
    })
}

/// How many times the certificate files under `dir` were rejected.
fn rejections(dir: &TempDir) -> usize {
    let dir = dir.0.display().to_string();
    logs()
        .events()
        .iter()
        .filter(|e| e.get("message").map(String::as_str) == Some("TLS certificate file rejected; keeping the version in force"))
        .filter(|e| e.get("path").is_some_and(|p| p.contains(&dir)))
        .count()
}

// ----- tests -----

#[tokio::test]
async fn grpc_over_tls_serves_the_generated_client_with_alpn_h2() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let s = start_server(tls_server_config(&files)).await;
    let channel = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.expect("TLS channel");
    assert_eq!(serving(channel.clone()).await.unwrap(), ServingStatus::Serving);
    let created = pb::agent_registry_client::AgentRegistryClient::new(channel)
        .create_agent_version(pb::CreateAgentVersionRequest {
            agent_id: "crm".into(),
            definition: Some(crm_definition("http://127.0.0.1:7000")),
            make_default: true,
        })
        .await
        .expect("a call over TLS")
        .into_inner();
    assert_eq!(created.version, 1);

    let tls = handshake(s.grpc_addr, client_config(&ca.pem, &[b"h2", b"http/1.1"], None)).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "gRPC is HTTP/2");
    assert!(handshake(s.grpc_addr, client_config(&ca.pem, &[b"http/1.1"], None)).await.is_err(), "the gRPC listener offers h2 only");
    drop(tls);
    tokio::time::timeout(Duration::from_secs(30), s.inner.shutdown()).await.expect("a TLS server shuts down gracefully");
}

#[tokio::test]
async fn the_http_listener_serves_health_readiness_and_metrics_over_tls_with_h2_and_http1() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let s = start_server(tls_server_config(&files)).await;
    let http1 = || client_config(&ca.pem, &[b"http/1.1"], None);
    assert_eq!(https_get(s.http_addr, "/healthz", http1()).await.unwrap(), (200, "ok".to_string()));
    assert_eq!(https_get(s.http_addr, "/readyz", http1()).await.unwrap(), (200, "ready".to_string()));
    let (status, metrics) = https_get(s.http_addr, "/metrics", http1()).await.unwrap();
    assert_eq!(status, 200);
    assert!(metrics.contains("# TYPE"), "Prometheus text");

    let tls = handshake(s.http_addr, http1()).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    // HTTP/2 negotiated by ALPN, then a real request on it.
    let tls = handshake(s.http_addr, client_config(&ca.pem, &[b"h2", b"http/1.1"], None)).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut h2, conn) = h2::client::handshake(tls).await.expect("HTTP/2 over TLS");
    tokio::spawn(conn);
    let req = http::Request::get(format!("https://localhost:{}/healthz", s.http_addr.port())).body(()).unwrap();
    let (resp, _) = h2.send_request(req, true).unwrap();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(text, b"ok");
}

#[tokio::test]
async fn plaintext_clients_are_refused_by_tls_listeners() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let s = start_server(tls_server_config(&files)).await;
    let plain = match Channel::from_shared(format!("http://{}", s.grpc_addr)).unwrap().connect().await {
        Err(_) => None,
        Ok(channel) => Some(serving(channel).await),
    };
    assert!(!matches!(plain, Some(Ok(_))), "a plaintext gRPC client gets no answer: {plain:?}");

    let mut tcp = TcpStream::connect(s.http_addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await.expect("the server closes the connection");
    assert!(!answer.starts_with(b"HTTP/"), "no HTTP answer in plaintext: {:?}", String::from_utf8_lossy(&answer));

    // A client that does not trust the server's CA refuses the handshake.
    let other = Ca::new("another CA");
    assert!(handshake(s.grpc_addr, client_config(&other.pem, &[b"h2"], None)).await.is_err());
    // The server still serves TLS clients.
    let channel = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.unwrap();
    assert_eq!(serving(channel).await.unwrap(), ServingStatus::Serving);
}

#[tokio::test]
async fn a_replaced_certificate_is_presented_on_the_next_handshake_without_restart() {
    let ca = Ca::new("test CA");
    let (a, b) = (ca.server("toolrouter A", 1), ca.server("toolrouter B", 2));
    let files = Files::new(&a);
    let s = start_server(tls_server_config(&files)).await;
    let before = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.unwrap();
    assert_eq!(presented(s.grpc_addr, &ca).await, a.der);
    assert_eq!(presented(s.http_addr, &ca).await, a.der);

    files.write(&b.cert, &b.key);
    eventually("the new certificate is presented", || async { presented(s.grpc_addr, &ca).await == b.der }).await;
    assert_eq!(presented(s.http_addr, &ca).await, b.der, "both listeners");
    let after = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.unwrap();
    assert_eq!(serving(after).await.unwrap(), ServingStatus::Serving);
    assert_eq!(serving(before).await.unwrap(), ServingStatus::Serving, "open connections go on");
}

#[tokio::test]
async fn broken_new_certificate_files_keep_the_certificate_in_force() {
    let ca = Ca::new("test CA");
    let (a, b, c) = (ca.server("toolrouter A", 1), ca.server("toolrouter B", 2), ca.server("toolrouter C", 3));
    let files = Files::new(&a);
    logs();
    let s = start_server(tls_server_config(&files)).await;

    let broken = [
        ("not PEM", "garbage".to_string(), a.key.clone()),
        ("a certificate with another certificate's key", b.cert.clone(), c.key.clone()),
        ("no key", a.cert.clone(), String::new()),
    ];
    for (what, cert, key) in broken {
        let seen = rejections(&files.dir);
        files.write(&cert, &key);
        eventually(what, || async { rejections(&files.dir) > seen }).await;
        assert_eq!(presented(s.grpc_addr, &ca).await, a.der, "{what}: the old certificate stays");
        assert_eq!(presented(s.http_addr, &ca).await, a.der, "{what}");
    }
    let rejected: Vec<_> =
        logs().events().into_iter().filter(|e| e.get("path").is_some_and(|p| p.contains(&files.dir.0.display().to_string()))).collect();
    assert!(rejected.iter().any(|e| e.get("error").is_some_and(|m| m.contains("does not belong to the key"))), "{rejected:?}");
    let key_body = c.key.lines().nth(1).unwrap();
    assert!(rejected.iter().all(|e| e.values().all(|v| !v.contains(key_body))), "no key material in the logs");

    files.write(&b.cert, &b.key);
    eventually("a good pair is applied again", || async { presented(s.grpc_addr, &ca).await == b.der }).await;
}

#[tokio::test]
async fn broken_certificate_files_at_start_up_stop_the_server_with_a_clear_message() {
    let ca = Ca::new("test CA");
    let (a, b) = (ca.server("toolrouter A", 1), ca.server("toolrouter B", 2));
    let start_error = |files: &Files| {
        let cfg = tls_server_config(files);
        async move {
            match toolrouter::server::start(cfg).await {
                Ok(_) => panic!("the server started"),
                Err(e) => format!("{e:#}"),
            }
        }
    };
    let files = Files::new(&a);
    files.write(&a.cert, &b.key);
    let e = start_error(&files).await;
    assert!(e.contains("the TLS certificate does not belong to the key"), "{e}");
    files.write("garbage", &a.key);
    let e = start_error(&files).await;
    assert!(e.contains("the TLS certificate file holds no PEM certificate"), "{e}");
    files.write(&a.cert, &a.cert);
    let e = start_error(&files).await;
    assert!(e.contains("the TLS key file holds no PEM private key"), "{e}");
    std::fs::remove_file(&files.key).unwrap();
    let e = start_error(&files).await;
    assert!(e.contains("cannot read the TLS key file"), "{e}");
    assert!(!e.contains(a.key.lines().nth(1).unwrap()));
}

#[tokio::test]
async fn the_binary_refuses_to_start_with_a_broken_certificate() {
    let ca = Ca::new("test CA");
    let (a, b) = (ca.server("toolrouter A", 1), ca.server("toolrouter B", 2));
    let files = Files::new(&a);
    files.write(&a.cert, &b.key);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolrouter"))
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", "sqlite::memory:"])
        .arg("--tls-cert")
        .arg(&files.cert)
        .arg("--tls-key")
        .arg(&files.key)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut exited = false;
    for _ in 0..300 {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(exited, "the binary exits");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loading the TLS certificate") && stderr.contains("does not belong to the key"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("toolrouter listening"));
}

#[tokio::test]
async fn with_a_client_ca_only_clients_with_a_certificate_it_issued_are_served() {
    let ca = Ca::new("test CA");
    let clients = Ca::new("client CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let ca_file = files.dir.0.join("clients.pem");
    std::fs::write(&ca_file, &clients.pem).unwrap();
    let mut cfg = tls_server_config(&files);
    cfg.tls.as_mut().unwrap().client_ca = Some(ca_file);
    let s = start_server(cfg).await;

    let good = clients.client("host-1");
    let channel = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], Some(&good))).await.expect("mutual TLS");
    assert_eq!(serving(channel).await.unwrap(), ServingStatus::Serving);
    let http1 = |id: Option<&Leaf>| client_config(&ca.pem, &[b"http/1.1"], id);
    assert_eq!(https_get(s.http_addr, "/healthz", http1(Some(&good))).await.unwrap(), (200, "ok".to_string()));

    // TLS 1.3 reports a refused client certificate after the handshake: the call fails.
    let refused = async |id: Option<&Leaf>| match grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], id)).await {
        Err(_) => true,
        Ok(channel) => serving(channel).await.is_err(),
    };
    assert!(refused(None).await, "no client certificate");
    let stranger = Ca::new("another CA").client("host-2");
    assert!(refused(Some(&stranger)).await, "a certificate from another CA");
    assert!(https_get(s.http_addr, "/healthz", http1(None)).await.is_err());
}

#[tokio::test]
async fn a_replaced_client_ca_applies_without_restart() {
    let ca = Ca::new("test CA");
    let (old_clients, new_clients) = (Ca::new("old client CA"), Ca::new("new client CA"));
    let files = Files::new(&ca.server("toolrouter", 1));
    let ca_file = files.dir.0.join("clients.pem");
    std::fs::write(&ca_file, &old_clients.pem).unwrap();
    let mut cfg = tls_server_config(&files);
    cfg.tls.as_mut().unwrap().client_ca = Some(ca_file.clone());
    let s = start_server(cfg).await;
    let (old_host, new_host) = (old_clients.client("old-host"), new_clients.client("new-host"));
    let served = async |id: &Leaf| match grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], Some(id))).await {
        Err(_) => false,
        Ok(channel) => serving(channel).await.is_ok(),
    };
    assert!(served(&old_host).await);
    assert!(!served(&new_host).await);
    std::fs::write(ca_file.with_extension("tmp"), &new_clients.pem).unwrap();
    std::fs::rename(ca_file.with_extension("tmp"), &ca_file).unwrap();
    eventually("the new client CA is in force", || served(&new_host)).await;
    assert!(!served(&old_host).await, "the old CA's clients are refused");
}

/// Opens a connection that sends nothing and one that stops inside its ClientHello.
async fn stalled_clients(s: &toolrouter::server::RunningServer) -> [TcpStream; 2] {
    let silent = TcpStream::connect(s.grpc_addr).await.unwrap();
    let mut half = TcpStream::connect(s.http_addr).await.unwrap();
    half.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    [silent, half]
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_holds_up_no_one() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let mut cfg = tls_server_config(&files);
    cfg.tls.as_mut().unwrap().handshake_timeout = Duration::from_secs(600);
    let s = start_server(cfg).await;
    let _stalled = stalled_clients(&s).await;
    // Were handshakes done in the accept loop, these would wait for the stalled ones (600 s).
    for addr in [s.grpc_addr, s.http_addr] {
        let done = tokio::time::timeout(Duration::from_secs(20), handshake(addr, client_config(&ca.pem, &[b"h2"], None))).await;
        assert!(matches!(done, Ok(Ok(_))), "served while another handshake hangs");
    }
    let channel = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.unwrap();
    assert_eq!(serving(channel).await.unwrap(), ServingStatus::Serving);
}

#[tokio::test]
async fn a_handshake_that_does_not_finish_in_time_is_cut_off() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let mut cfg = tls_server_config(&files);
    cfg.tls.as_mut().unwrap().handshake_timeout = Duration::from_millis(200);
    let s = start_server(cfg).await;
    for mut conn in stalled_clients(&s).await {
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf)).await.expect("closed by the server");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
}

#[tokio::test]
async fn authentication_still_applies_over_tls() {
    let ca = Ca::new("test CA");
    let files = Files::new(&ca.server("toolrouter", 1));
    let keys = KeyFile::with_keys(&[("tls-test-key-acme-5d2", "acme")]);
    let mut cfg = config_with_keys(&keys);
    cfg.tls = Some(files.config());
    let s = start_server(cfg).await;
    let channel = grpc_channel(s.grpc_addr, client_config(&ca.pem, &[b"h2"], None)).await.unwrap();
    let st = pb::agent_registry_client::AgentRegistryClient::new(channel.clone()).list_agents(pb::ListAgentsRequest::default()).await.unwrap_err();
    assert_eq!(st.code(), tonic::Code::Unauthenticated);
    let mut authed = pb::agent_registry_client::AgentRegistryClient::with_interceptor(channel, Bearer(Some("tls-test-key-acme-5d2".into())));
    assert!(authed.list_agents(pb::ListAgentsRequest::default()).await.is_ok());
}
