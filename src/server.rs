//! Starts the gRPC and HTTP listeners and stops them cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admission::{Admission, Gate, RunQuota};
use crate::auth::{Authenticator, GrpcAuth};
use crate::config::ServerConfig;
use crate::invoke::Router;
use crate::listen::Places;
use crate::registry::Registry;
use crate::store::Store;
use crate::telemetry::{self, metrics::Metrics};
use crate::upstream::Upstream;

/// A running server. Dropping it stops it at once; [`RunningServer::shutdown`] drains it.
pub struct RunningServer {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// The admin listener (probes and metrics), when configured.
    pub admin_addr: Option<SocketAddr>,
    pub router: Arc<Router>,
    /// Authenticates requests (also for HTTP endpoints that need a caller).
    pub auth: Authenticator,
    gate: Arc<Gate>,
    health: tonic_health::server::HealthReporter,
    grace: Duration,
    /// Stops the gRPC listener (graceful: connections close once their calls end).
    grpc_stop: CancellationToken,
    grpc_task: Option<JoinHandle<()>>,
    /// Stops the HTTP listener (graceful: it waits for responses in progress).
    http_stop: CancellationToken,
    http_task: Option<JoinHandle<()>>,
    /// Stops everything else: MCP endpoint sessions, background tasks.
    cancel: CancellationToken,
    /// Stops renewing leases (last, after the uncertain outcomes of cut-off calls are written).
    lease_stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

/// HTTP/2 streams (calls) one gRPC connection may have open at once.
const GRPC_MAX_STREAMS: u32 = 1024;

/// How often the pending-deferred gauge is refreshed from the store (also after changes).
const GAUGE_REFRESH: Duration = Duration::from_secs(15);
/// After the last admitted request of a drain, how long connections may take to close.
const DRAIN_TAIL: Duration = Duration::from_secs(2);

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
    // One copy for registration checks and header resolution; unscoped secrets depend on
    // whether callers authenticate.
    let secrets = Arc::new(cfg.secrets.clone().for_server(auth.enabled()).context("operator secrets")?);
    let secrets_for_consent = secrets.clone();
    let upstream = Arc::new(Upstream::new(cfg.upstream.clone(), &outbound, secrets.clone()));
    let embeddings = match &cfg.embedding_model {
        Some(dir) => {
            let dir = dir.clone();
            let started = std::time::Instant::now();
            let embedder = tokio::task::spawn_blocking(move || crate::search::embed::Embedder::load(&dir)).await??;
            tracing::info!(model = %embedder.id(), dims = embedder.dims(), ms = started.elapsed().as_millis() as u64, "embedding model loaded: natural-language search is hybrid");
            Some(crate::registry::embeddings::Embeddings::start(Arc::new(embedder), store.clone(), cfg.clock.clone(), cfg.embedding_cpu_share))
        }
        None => None,
    };
    let mut registry = Registry::new(store.clone(), cfg.clock.clone(), cfg.max_definition_bytes);
    if let Some(e) = embeddings {
        registry = registry.with_embeddings(e);
    }
    let registry = Arc::new(
        registry
            .with_lister(upstream.clone())
            .with_outbound(outbound.policy.clone())
            .with_secrets(secrets)
            .with_listed_tools_ttl(cfg.tool_list_ttl)
            .with_listing_failure_ttl(cfg.tool_list_failure_ttl)
            .with_catalog_cache_bytes(cfg.catalog_cache_bytes)
            .with_cache_refresh(cfg.cache_refresh),
    );
    let gate = Arc::new(Gate::default());
    let runs = RunQuota::new(store.clone(), cfg.limits.max_runs_per_tenant, cfg.router.run_idle, cfg.clock.clone());
    let admission = Arc::new(Admission::new(gate.clone(), runs));
    let router = Arc::new(Router::new(registry.clone(), upstream.clone(), admission.clone(), cfg.router.clone()));
    let metrics = Metrics::get();

    let grpc = tokio::net::TcpListener::bind(cfg.grpc_addr).await.with_context(|| format!("binding gRPC {}", cfg.grpc_addr))?;
    let http = tokio::net::TcpListener::bind(cfg.http_addr).await.with_context(|| format!("binding HTTP {}", cfg.http_addr))?;
    let admin = match cfg.admin_addr {
        Some(a) => Some(tokio::net::TcpListener::bind(a).await.with_context(|| format!("binding the admin listener {a}"))?),
        None => None,
    };
    let grpc_addr = grpc.local_addr()?;
    let http_addr = http.local_addr()?;
    // Per-user OAuth for MCP sources: browsers come back to <public url>/oauth/callback.
    let public_url = public_url(cfg.oauth.public_url.as_deref(), http_addr, tls.is_some())?;
    let sealer = match &cfg.oauth.key_file {
        Some(path) => Some(crate::upstream::oauth::Sealer::from_file(path).map_err(anyhow::Error::msg).context("--token-encryption-key-file")?),
        None => None,
    };
    let consent_config = crate::upstream::consent::ConsentConfig {
        redirect_uri: format!("{public_url}/oauth/callback"),
        consent_ttl: cfg.oauth.consent_ttl,
        token_ttl: cfg.oauth.token_ttl,
    };
    let oauth_http = crate::upstream::oauth::OAuthHttp::new(&outbound);
    upstream.set_consents(Arc::new(crate::upstream::consent::Consents::new(store.clone(), sealer, oauth_http, secrets_for_consent, consent_config)));
    let admin_addr = admin.as_ref().map(|a| a.local_addr()).transpose()?;

    let (health, health_service) = tonic_health::server::health_reporter();
    crate::api::set_health(&health, true).await;

    let grpc_stop = CancellationToken::new();
    let mut tasks = Vec::new();
    // ----- security (issue 6): limits and the authentication layer -----
    let limits = Arc::new(cfg.limits.clone());
    let rate = Arc::new(crate::auth::limits::RateLimiter::new(cfg.limits.rate));
    let mcp_sessions = Arc::new(crate::http::mcp::sessions::Sessions::new(cfg.mcp_endpoint.sessions));
    let mcp_guard = crate::http::mcp::EndpointGuard { auth: auth.clone(), rate: rate.clone(), limits: limits.clone(), admission: admission.clone() };
    // Against hostile clients: HTTP/2 keep-alive pings (a dead peer is noticed and closed),
    // a bound on streams per connection and on the size of a header list.
    let grpc_server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(GRPC_MAX_STREAMS))
        .http2_max_header_list_size(Some(64 * 1024))
        .layer(crate::api::edge::EdgeLayer::new(GrpcAuth::sharing(auth.clone(), rate.clone()), crate::api::rpc_paths)?)
        .add_service(health_service);
    let parts = crate::api::Parts { registry: registry.clone(), router: router.clone(), admission, limits };
    let grpc_server = crate::api::add_services(grpc_server, parts)?;
    // ----- end security -----
    let stop = grpc_stop.clone();
    let grpc_tls = tls.clone();
    let grpc_places = Places::new(cfg.listen).with_opening(crate::listen::HTTP2_PREFACE_BYTES);
    let grpc_task = tokio::spawn(async move {
        let served = match grpc_tls {
            None => {
                let incoming = crate::listen::tcp_incoming(grpc, grpc_places);
                grpc_server.serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned()).await
            }
            Some(tls) => {
                // Handshakes are bounded by the TLS handshake timeout; then the connection
                // takes its place under the listener's cap.
                let incoming = tls
                    .grpc_incoming(grpc, stop.clone())
                    .filter_map(move |c| std::future::ready(c.ok().and_then(|c| grpc_places.admit(c)).map(Ok::<_, std::io::Error>)));
                grpc_server.serve_with_incoming_shutdown(incoming, stop.cancelled_owned()).await
            }
        };
        if let Err(e) = served {
            tracing::error!(error = %e, "gRPC server failed");
        }
    });

    // /metrics moves to the admin listener when there is one.
    let http_state = crate::http::HttpState { store: store.clone(), gate: gate.clone(), metrics: metrics.clone(), metrics_token: cfg.metrics_token };
    let app = crate::http::router(http_state.clone(), admin.is_none())
        .merge(crate::http::mcp::routes(router.clone(), &cfg.mcp_endpoint, cancel.child_token(), mcp_guard, mcp_sessions.clone()))
        .merge(crate::http::oauth::routes(router.clone()));
    let http_stop = CancellationToken::new();
    let http_task = tokio::spawn(serve_http(http, tls.clone(), app, Places::new(cfg.listen), http_stop.clone(), cancel.clone()));
    if let Some(admin) = admin {
        // Probes and metrics only: no TLS (operators reach it from inside the cluster).
        let incoming = crate::listen::tcp_incoming(admin, Places::new(cfg.listen)).filter_map(|c| std::future::ready(c.ok()));
        let places = Places::new(cfg.listen);
        tasks.push(tokio::spawn(crate::http::serve::serve(incoming, crate::http::router(http_state, true), places, http_stop.clone())));
    }

    let stop = cancel.clone();
    let every = (cfg.upstream.session_idle.min(cfg.mcp_endpoint.sessions.idle) / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    upstream.expire_idle();
                    mcp_sessions.forget_idle();
                }
            }
        }
    }));

    let stop = cancel.clone();
    let sweeper = router.clone();
    let (retention, sweep_every) = (cfg.retention, cfg.sweep_every);
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(sweep_every);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => match sweeper.sweep(retention).await {
                    Ok(swept) => tracing::debug!(?swept, "retention pass"),
                    Err(e) => tracing::warn!(error = %e, "retention pass failed"),
                },
            }
        }
    }));

    // Leases of held calls and resolutions are renewed until the very end: the shutdown's
    // last step gives what is still held its outcome, then this stops with the process.
    let renewer = router.clone();
    let lease_stop = CancellationToken::new();
    let stop = lease_stop.clone();
    tasks.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(renewer.leases().renew_every());
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => if let Err(e) = renewer.renew_leases().await {
                    tracing::warn!(error = %e, "renewing leases failed");
                },
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
    Ok(RunningServer {
        grpc_addr,
        http_addr,
        admin_addr,
        router,
        auth,
        gate,
        health,
        grace: cfg.grace,
        grpc_stop,
        grpc_task: Some(grpc_task),
        http_stop,
        http_task: Some(http_task),
        cancel,
        lease_stop,
        tasks,
    })
}

/// Serves the HTTP listener (plain or TLS) until `stop`.
async fn serve_http(
    listener: TcpListener,
    tls: Option<Arc<crate::tls::ServerTls>>,
    app: axum::Router,
    places: Places,
    stop: CancellationToken,
    cancel: CancellationToken,
) {
    match tls {
        None => {
            let incoming = crate::listen::tcp_incoming(listener, places.clone()).filter_map(|c| std::future::ready(c.ok()));
            crate::http::serve::serve(incoming, app, places, stop).await;
        }
        Some(tls) => {
            let mut accepted = tls.accept(listener, crate::tls::Role::Http, cancel);
            let admit = places.clone();
            let incoming =
                futures::stream::poll_fn(move |cx| accepted.poll_recv(cx)).filter_map(move |(stream, _)| std::future::ready(admit.admit(stream)));
            crate::http::serve::serve(incoming, app, places, stop).await;
        }
    }
}

impl RunningServer {
    /// Drains and stops: health NOT_SERVING and readiness false first, then new requests
    /// are refused (gRPC UNAVAILABLE, HTTP 503) while calls in flight — gRPC and MCP alike,
    /// counted by admission — finish within the grace period; then the listeners close, each
    /// letting responses in progress finish. Deferred records are already in the store:
    /// nothing pending is lost.
    /// Requests admitted and still running.
    pub fn in_flight(&self) -> usize {
        self.gate.in_flight()
    }

    pub async fn shutdown(mut self) {
        let started = tokio::time::Instant::now();
        crate::api::set_health(&self.health, false).await;
        self.gate.start_draining();
        if tokio::time::timeout(self.grace, self.gate.wait_idle()).await.is_err() {
            // Their retries must not wait for the leases to run out: they get the uncertain
            // outcome now (first outcome wins, so a call finishing later changes nothing).
            let (calls, resolutions) = self.router.abandon_held().await;
            tracing::warn!(
                in_flight = self.gate.in_flight(),
                calls,
                resolutions,
                "grace period over; calls still in flight get an uncertain outcome"
            );
        }
        // Nothing admitted is running now: connections get a short tail (within what is left
        // of the grace, at least a second) to write the last responses, then are cut. A client
        // that never finished a request (a stalled gRPC stream) does not hold the exit.
        let rest = || self.grace.saturating_sub(started.elapsed()).clamp(Duration::from_secs(1), DRAIN_TAIL);
        self.grpc_stop.cancel();
        self.http_stop.cancel();
        if let Some(mut grpc) = self.grpc_task.take()
            && tokio::time::timeout(rest(), &mut grpc).await.is_err()
        {
            grpc.abort();
        }
        if let Some(mut http) = self.http_task.take() {
            // The last MCP responses are written before the endpoint's sessions are closed.
            if tokio::time::timeout(Duration::from_secs(1).min(rest()), &mut http).await.is_err() {
                self.cancel.cancel();
                if tokio::time::timeout(rest(), &mut http).await.is_err() {
                    http.abort();
                }
            }
        }
        self.cancel.cancel();
        self.lease_stop.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.grpc_stop.cancel();
        self.http_stop.cancel();
        if let Some(t) = &self.grpc_task {
            t.abort();
        }
        if let Some(t) = &self.http_task {
            t.abort();
        }
        self.cancel.cancel();
        self.lease_stop.cancel();
    }
}

/// The base URL users' browsers reach the HTTP listener at: `--public-url` (an http(s) URL
/// without query or fragment), else the listener's own address.
fn public_url(configured: Option<&str>, http_addr: std::net::SocketAddr, tls: bool) -> anyhow::Result<String> {
    let Some(u) = configured else {
        let scheme = if tls { "https" } else { "http" };
        return Ok(format!("{scheme}://{http_addr}"));
    };
    let parsed = url::Url::parse(u).map_err(|e| anyhow::anyhow!("--public-url {u:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() || parsed.query().is_some() || parsed.fragment().is_some() {
        anyhow::bail!("--public-url {u:?} must be an http(s) URL with a host and no query or fragment");
    }
    Ok(u.trim_end_matches('/').to_string())
}
