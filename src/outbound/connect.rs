//! Connecting under the policy: resolve once, check every address, connect only to one that
//! passed (the checked address is the one dialled, so a second lookup cannot swap it).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Host, Policy, Refusal, Target};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("resolving {host}: {source}")]
    Lookup { host: String, source: std::io::Error },
    #[error("connecting to {target}: {source}")]
    Connect { target: String, source: std::io::Error },
}

impl ConnectError {
    /// The refusal, when the policy refused (rather than the network failing).
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ConnectError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

/// Finds a policy refusal in an error's source chain (a refused connection surfaces wrapped
/// in the HTTP and gRPC clients' own errors).
pub fn find_refusal<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<ConnectError>().and_then(ConnectError::refusal) {
            return Some(r);
        }
        if let Some(r) = e.downcast_ref::<Refusal>() {
            return Some(r);
        }
        next = e.source();
    }
    None
}

/// Resolves a name (or takes an address as is) and keeps the addresses the policy allows;
/// none allowed: the first address's refusal. `port` 0 leaves the port to the caller.
pub async fn resolve(policy: &Policy, host: &Host, port: u16) -> Result<Vec<SocketAddr>, ConnectError> {
    let name = match host {
        // The address itself was checked with its target.
        Host::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, port)]),
        Host::Name(name) => name,
    };
    let found: Vec<SocketAddr> =
        tokio::net::lookup_host((name.as_str(), port)).await.map_err(|source| ConnectError::Lookup { host: name.clone(), source })?.collect();
    let label = if port == 0 { name.clone() } else { format!("{name}:{port}") };
    let mut first_refusal = None;
    let mut allowed = Vec::with_capacity(found.len());
    for addr in found {
        match policy.check_address(&label, addr.ip()) {
            Ok(()) => allowed.push(addr),
            Err(r) => {
                first_refusal.get_or_insert(r);
            }
        }
    }
    match (allowed.is_empty(), first_refusal) {
        (false, _) => Ok(allowed),
        (true, Some(r)) => Err(r.into()),
        (true, None) => Err(ConnectError::Lookup { host: name.clone(), source: std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses") }),
    }
}

/// Checks a target, resolves it and opens a TCP connection to an allowed address.
pub async fn connect(policy: &Policy, target: &Target) -> Result<TcpStream, ConnectError> {
    policy.check_target(target)?;
    let mut last = None;
    for addr in resolve(policy, &target.host, target.port).await? {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // Small gRPC frames must not wait for delayed ACKs.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(ConnectError::Connect {
        target: target.to_string(),
        source: last.unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses")),
    })
}

/// The connector for gRPC channels to executors: every (re)connection checks the policy.
/// TLS, when the URI is `https`, is layered on top by the channel.
#[derive(Clone)]
pub struct Connector {
    policy: Arc<Policy>,
}

impl Connector {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self { policy }
    }
}

impl tower::Service<http::Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let policy = self.policy.clone();
        Box::pin(async move {
            let target = Target::from_uri(&uri)?;
            connect(&policy, &target).await.map(TokioIo::new)
        })
    }
}

/// The DNS resolver of the HTTP client for MCP servers: only allowed addresses come back.
/// (URLs with an address skip resolution; they are checked before each session opens.)
pub struct Resolver {
    policy: Arc<Policy>,
}

impl Resolver {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self { policy }
    }
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = Host::Name(super::normalize_name(name.as_str()));
        Box::pin(async move {
            match resolve(&policy, &host, 0).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs),
                Err(e) => {
                    if let Some(r) = e.refusal() {
                        tracing::warn!(rule = r.rule.code(), refusal = %r, "outbound connection refused");
                    }
                    Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                }
            }
        })
    }
}
