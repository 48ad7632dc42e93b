//! TLS to upstream executors and MCP servers: the system's trusted roots plus the operator's
//! CA bundle (`--upstream-ca`), and optionally a client certificate for mutual TLS. One
//! certificate verifier serves both clients; the crypto provider is aws-lc-rs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

#[derive(Debug, Clone, Default)]
pub struct UpstreamTlsConfig {
    /// PEM bundle of CA certificates trusted in addition to the system's.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain and key (PEM) presented to upstreams that ask for one.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{what} {path} holds no PEM {expected}")]
    Empty { what: &'static str, path: PathBuf, expected: &'static str },
    #[error("{what} {path} is not valid PEM: {detail}")]
    Pem { what: &'static str, path: PathBuf, detail: String },
    #[error("the CA certificates of {path} are not usable: {source}")]
    Ca { path: PathBuf, source: rustls::Error },
    #[error("the upstream client certificate and key do not form a usable identity: {0}")]
    Identity(rustls::Error),
    #[error("--upstream-client-cert and --upstream-client-key go together")]
    HalfIdentity,
}

struct ClientIdentity {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

pub struct UpstreamTls {
    provider: Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
    identity: Option<ClientIdentity>,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls").field("client_identity", &self.identity.is_some()).finish_non_exhaustive()
    }
}

impl UpstreamTls {
    pub fn load(cfg: &UpstreamTlsConfig) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let extra = match &cfg.ca_file {
            Some(path) => certificates(path, "CA bundle")?,
            None => Vec::new(),
        };
        let verifier: Arc<dyn ServerCertVerifier> =
            match rustls_platform_verifier::Verifier::new_with_extra_roots(extra.iter().cloned(), provider.clone()) {
                Ok(v) => Arc::new(v),
                // No usable system roots and no bundle: https upstreams fail their handshake
                // with a message that says what to do; http ones are unaffected.
                Err(_) if extra.is_empty() => {
                    tracing::warn!(
                        "no trusted CA certificates found on this system: https:// upstreams will fail until --upstream-ca names a bundle"
                    );
                    Arc::new(NoRoots(provider.clone()))
                }
                Err(source) => return Err(TlsError::Ca { path: cfg.ca_file.clone().unwrap_or_default(), source }),
            };
        let identity = match (&cfg.client_cert, &cfg.client_key) {
            (Some(cert), Some(key)) => Some(identity(cert, key, &provider)?),
            (None, None) => None,
            _ => return Err(TlsError::HalfIdentity),
        };
        Ok(Self { provider, verifier, identity })
    }

    pub fn verifier(&self) -> Arc<dyn ServerCertVerifier> {
        self.verifier.clone()
    }

    /// The client certificate chain and key as PEM, for clients that take PEM.
    pub fn client_identity_pem(&self) -> Option<(&[u8], &[u8])> {
        self.identity.as_ref().map(|i| (i.cert_pem.as_slice(), i.key_pem.as_slice()))
    }

    /// A rustls client configuration with this verifier and identity, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        let builder = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .expect("aws-lc-rs supports the default protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(self.verifier.clone());
        let mut config = match &self.identity {
            Some(i) => builder.with_client_auth_cert(i.chain.clone(), i.key.clone_key()).expect("the identity was checked when it was loaded"),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_path_buf(), source })
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(TlsError::Empty { what, path: path.to_path_buf(), expected: "CERTIFICATE" });
    }
    Ok(certs)
}

fn identity(cert: &Path, key: &Path, provider: &Arc<CryptoProvider>) -> Result<ClientIdentity, TlsError> {
    let chain = certificates(cert, "client certificate")?;
    let cert_pem = read(cert, "client certificate")?;
    let key_pem = read(key, "client key")?;
    // The key's text is never put into an error.
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::Empty {
        what: "client key",
        path: key.to_path_buf(),
        expected: "PRIVATE KEY",
    })?;
    // Builds a configuration once so a mismatched or unsupported key stops start-up.
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Identity)?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain.clone(), key_der.clone_key())
        .map_err(TlsError::Identity)?;
    Ok(ClientIdentity { cert_pem, key_pem, chain, key: key_der })
}

/// The verifier when no root is trusted at all: every handshake fails, saying why.
#[derive(Debug)]
struct NoRoots(Arc<CryptoProvider>);

impl ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General("no trusted CA certificates: give toolrouter --upstream-ca".into()))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
