//! TLS on toolrouter's own listeners (SPEC §9): rustls on the aws-lc-rs provider (the one
//! provider of the build), the certificate and key re-read when their files change, and
//! handshakes completed off the accept loop.
//!
//! Both listeners share one [`ServerTls`]: the gRPC listener offers ALPN `h2`, the HTTP
//! listener `h2` and `http/1.1`. The certificate in force lives in a [`ResolvesServerCert`]
//! that the file watcher ([`crate::auth::reload::watch_files`]) swaps; a new pair that does
//! not load keeps the old one. With a client CA, clients must present a certificate it
//! issued (mutual TLS); the CA file is re-read with the pair.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{InconsistentKeys, RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Where the certificate, key and (for mutual TLS) client CA are, all PEM.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key of the leaf (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates that client certificates must chain to; `None` = no client certificates.
    pub client_ca: Option<PathBuf>,
    /// How often the files are checked for changes.
    pub reload_interval: Duration,
    /// A connection whose handshake takes longer is closed.
    pub handshake_timeout: Duration,
}

impl TlsConfig {
    pub fn new(cert: PathBuf, key: PathBuf) -> Self {
        Self { cert, key, client_ca: None, reload_interval: Duration::from_secs(1), handshake_timeout: Duration::from_secs(10) }
    }
}

/// Why a certificate, key or client CA was refused. Never quotes the files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS {file} file {path}: {kind}")]
    Read { file: &'static str, path: String, kind: io::ErrorKind },
    #[error("the TLS {0} file is not valid PEM")]
    Pem(&'static str),
    #[error("the TLS certificate file holds no PEM certificate (BEGIN CERTIFICATE)")]
    NoCertificate,
    #[error("the TLS key file holds no PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)")]
    NoKey,
    #[error("the TLS key is not usable: {0}")]
    Key(String),
    #[error("the TLS certificate is not usable: {0}")]
    Certificate(String),
    #[error("the TLS certificate does not belong to the key")]
    Mismatch,
    #[error("the TLS client CA file: {0}")]
    ClientCa(String),
    #[error("the TLS configuration: {0}")]
    Config(String),
}

/// Which listener a connection arrives on: it decides the ALPN protocols offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// gRPC: HTTP/2 only.
    Grpc,
    /// Health, metrics and the MCP endpoint: HTTP/2 and HTTP/1.1.
    Http,
}

impl Role {
    fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Role::Grpc => vec![b"h2".to_vec()],
            Role::Http => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

/// Hands every handshake the certificate in force.
#[derive(Debug)]
struct CertResolver(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The server side of TLS for both listeners. Cheap to share.
pub struct ServerTls {
    provider: Arc<CryptoProvider>,
    resolver: Arc<CertResolver>,
    /// Rebuilt only when the client CA changes; the certificate changes in the resolver.
    configs: RwLock<Configs>,
    handshake_timeout: Duration,
}

#[derive(Clone)]
struct Configs {
    grpc: Arc<ServerConfig>,
    http: Arc<ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("certificate_sha256", &self.fingerprint()).finish()
    }
}

/// Reads the certificate chain and key and checks that they belong together.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().map_err(|_| TlsError::Pem("certificate"))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    // pem errors are not displayed: one of them quotes a line of the file.
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey,
        _ => TlsError::Pem("key"),
    })?;
    let signer = provider.key_provider.load_private_key(key).map_err(|e| TlsError::Key(e.to_string()))?;
    let key = CertifiedKey::new(chain, signer);
    match key.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(key),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => Err(TlsError::Mismatch),
        Err(e) => Err(TlsError::Certificate(e.to_string())),
    }
}

/// A verifier that accepts client certificates issued by the CAs of `ca_pem`.
fn client_verifier(ca_pem: &[u8], provider: &Arc<CryptoProvider>) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|_| TlsError::Pem("client CA"))?;
        roots.add(cert).map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::ClientCa("no PEM certificate (BEGIN CERTIFICATE)".into()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().map_err(|e| TlsError::ClientCa(e.to_string()))
}

/// SHA-256 of the leaf certificate, hex: names the certificate in logs (it is public).
fn fingerprint(key: &CertifiedKey) -> String {
    key.cert.first().map(|c| Sha256::digest(c.as_ref()).iter().map(|b| format!("{b:02x}")).collect()).unwrap_or_default()
}

async fn read(file: &'static str, path: &PathBuf) -> Result<Vec<u8>, TlsError> {
    tokio::fs::read(path).await.map_err(|e| TlsError::Read { file, path: path.display().to_string(), kind: e.kind() })
}

impl ServerTls {
    /// Loads the files (they must be valid at start-up) and keeps re-reading them until `stop`.
    pub async fn load(cfg: &TlsConfig, stop: CancellationToken) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut paths = vec![cfg.cert.clone(), cfg.key.clone()];
        let mut texts = vec![read("certificate", &cfg.cert).await?, read("key", &cfg.key).await?];
        if let Some(ca) = &cfg.client_ca {
            texts.push(read("client CA", ca).await?);
            paths.push(ca.clone());
        }
        let key = certified_key(&texts[0], &texts[1], &provider)?;
        let verifier = texts.get(2).map(|ca| client_verifier(ca, &provider)).transpose()?;
        let resolver = Arc::new(CertResolver(RwLock::new(Arc::new(key))));
        let configs = build_configs(&provider, &resolver, verifier)?;
        let tls = Arc::new(Self { provider, resolver, configs: RwLock::new(configs), handshake_timeout: cfg.handshake_timeout });
        tracing::info!(certificate_sha256 = %tls.fingerprint(), client_certificates = cfg.client_ca.is_some(), "TLS on for the gRPC and HTTP listeners");
        let this = tls.clone();
        crate::auth::reload::watch_files("TLS certificate", paths, texts, cfg.reload_interval, stop, move |texts| {
            this.apply(texts).map_err(|e| e.to_string())
        });
        Ok(tls)
    }

    /// Installs a new certificate, key and client CA, all or nothing.
    fn apply(&self, texts: &[Vec<u8>]) -> Result<usize, TlsError> {
        let key = certified_key(&texts[0], &texts[1], &self.provider)?;
        if let Some(ca) = texts.get(2) {
            let configs = build_configs(&self.provider, &self.resolver, Some(client_verifier(ca, &self.provider)?))?;
            *self.configs.write().unwrap_or_else(|e| e.into_inner()) = configs;
        }
        let n = key.cert.len();
        tracing::info!(certificate_sha256 = %fingerprint(&key), "TLS certificate in force");
        *self.resolver.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        Ok(n)
    }

    /// SHA-256 of the leaf certificate in force.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.resolver.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn config(&self, role: Role) -> Arc<ServerConfig> {
        let configs = self.configs.read().unwrap_or_else(|e| e.into_inner());
        match role {
            Role::Grpc => configs.grpc.clone(),
            Role::Http => configs.http.clone(),
        }
    }

    /// Accepts connections and completes each handshake in its own task, within the
    /// handshake timeout, so a slow or silent client never holds up the next accept.
    /// Connections whose handshake succeeds come out of the channel; the loop ends with `stop`.
    pub fn accept(
        self: &Arc<Self>,
        listener: TcpListener,
        role: Role,
        stop: CancellationToken,
    ) -> mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)> {
        let (tx, rx) = mpsc::channel(64);
        let tls = self.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tx.closed() => break,
                    accepted = listener.accept() => match accepted {
                        Ok(c) => c,
                        Err(e) => {
                            accept_failed(e).await;
                            continue;
                        }
                    },
                };
                // Small responses would otherwise wait for delayed ACKs (~40 ms stalls).
                let _ = tcp.set_nodelay(true);
                let acceptor = tokio_rustls::TlsAcceptor::from(tls.config(role));
                let (tx, stop, limit) = (tx.clone(), stop.clone(), tls.handshake_timeout);
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(limit, acceptor.accept(tcp));
                    let stream = tokio::select! {
                        _ = stop.cancelled() => return,
                        done = handshake => match done {
                            Ok(Ok(s)) => s,
                            // Plaintext clients, scanners and probes end here: not worth more than debug.
                            Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                            Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                        },
                    };
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tx.send((stream, peer)) => {}
                    }
                });
            }
        });
        rx
    }

    /// The gRPC listener's connections, for `serve_with_incoming_shutdown`.
    pub fn grpc_incoming(self: &Arc<Self>, listener: TcpListener, stop: CancellationToken) -> impl Stream<Item = io::Result<TlsConn>> + use<> {
        let mut rx = self.accept(listener, Role::Grpc, stop);
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|c| c.map(|(stream, peer)| Ok(TlsConn { stream, peer }))))
    }

    /// The HTTP listener's connections, for `axum::serve`.
    pub fn http_listener(self: &Arc<Self>, listener: TcpListener, stop: CancellationToken) -> io::Result<HttpListener> {
        let local = listener.local_addr()?;
        Ok(HttpListener { rx: self.accept(listener, Role::Http, stop), local })
    }
}

fn build_configs(
    provider: &Arc<CryptoProvider>,
    resolver: &Arc<CertResolver>,
    verifier: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Configs, TlsError> {
    let build = |role: Role| -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match &verifier {
            Some(v) => builder.with_client_cert_verifier(v.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(resolver.clone());
        config.alpn_protocols = role.alpn();
        Ok(Arc::new(config))
    };
    Ok(Configs { grpc: build(Role::Grpc)?, http: build(Role::Http)? })
}

/// Errors of `accept` that concern one connection only are skipped; others (out of file
/// descriptors) are logged and retried after a pause instead of spinning.
async fn accept_failed(e: io::Error) {
    if matches!(e.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A TLS connection of the gRPC listener, with the peer address tonic reports.
pub struct TlsConn {
    stream: TlsStream<TcpStream>,
    peer: SocketAddr,
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo { local_addr: self.stream.get_ref().0.local_addr().ok(), remote_addr: Some(self.peer) }
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The HTTP listener's TLS connections, as `axum::serve` takes them.
pub struct HttpListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for HttpListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop has stopped (shutdown): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> CryptoProvider {
        rustls::crypto::aws_lc_rs::default_provider()
    }

    #[test]
    fn files_without_pem_sections_are_refused_with_a_message_that_quotes_nothing() {
        let secret = b"not-a-key-but-a-secret-value";
        assert!(matches!(certified_key(b"", b"", &provider()), Err(TlsError::NoCertificate)));
        let cert = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = certified_key(cert, secret, &provider()).unwrap_err();
        assert!(matches!(err, TlsError::NoKey), "{err}");
        assert!(!err.to_string().contains("secret-value"));
        let broken = b"-----BEGIN PRIVATE KEY-----\nnot-a-key-but-a-secret-value\n";
        let err = certified_key(cert, broken, &provider()).unwrap_err();
        assert!(!err.to_string().contains("secret-value"), "{err}");
    }
}
