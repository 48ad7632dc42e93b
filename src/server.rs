//! Starts the gRPC and HTTP listeners and stops them cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::api::services::{DiscoveryService, RegistryService, RouterService};
use crate::config::ServerConfig;
use crate::invoke::Router;
use crate::invoke::executor::Executors;
use crate::pb;
use crate::registry::Registry;
use crate::store::Store;

/// A running server. Dropping it stops it.
pub struct RunningServer {
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub router: Arc<Router>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

pub async fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
    let store = Store::open(&cfg.store).await.with_context(|| format!("opening store {}", crate::store::redact_url(&cfg.store)))?;
    let executors = Arc::new(Executors::new(cfg.executor.clone()));
    let registry = Arc::new(Registry::new(store.clone(), cfg.clock.clone(), cfg.max_definition_bytes).with_lister(executors.clone()));
    let router = Arc::new(Router::new(registry.clone(), executors, cfg.router.clone()));

    let grpc = tokio::net::TcpListener::bind(cfg.grpc_addr).await.with_context(|| format!("binding gRPC {}", cfg.grpc_addr))?;
    let http = tokio::net::TcpListener::bind(cfg.http_addr).await.with_context(|| format!("binding HTTP {}", cfg.http_addr))?;
    let grpc_addr = grpc.local_addr()?;
    let http_addr = http.local_addr()?;

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<pb::agent_registry_server::AgentRegistryServer<RegistryService>>().await;
    health.set_serving::<pb::discovery_server::DiscoveryServer<DiscoveryService>>().await;
    health.set_serving::<pb::router_server::RouterServer<RouterService>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;

    let cancel = CancellationToken::new();
    let mut tasks = Vec::new();
    let grpc_server = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(pb::agent_registry_server::AgentRegistryServer::new(RegistryService { registry: registry.clone() }))
        .add_service(pb::discovery_server::DiscoveryServer::new(DiscoveryService { router: router.clone() }))
        .add_service(pb::router_server::RouterServer::new(RouterService { router: router.clone() }));
    let stop = cancel.clone();
    let grace = cfg.grace;
    let health_on_stop = health.clone();
    let stop_grace = cancel.clone();
    tasks.push(tokio::spawn(async move {
        let shutdown = async move {
            stop.cancelled().await;
            health_on_stop.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        };
        let serve = grpc_server.serve_with_incoming_shutdown(TcpListenerStream::new(grpc), shutdown);
        tokio::pin!(serve);
        // Calls in flight get the grace period; then the server is dropped.
        let grace_over = async {
            stop_grace.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            r = &mut serve => if let Err(e) = r { tracing::error!(error = %e, "gRPC server failed") },
            _ = grace_over => tracing::warn!("grace period over; dropping calls still in flight"),
        }
    }));

    let app = crate::http::router(store.clone());
    let stop = cancel.clone();
    tasks.push(tokio::spawn(async move {
        let serve = axum::serve(http, app).with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = serve.into_future().await {
            tracing::error!(error = %e, "HTTP server failed");
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

    Ok(RunningServer { grpc_addr, http_addr, router, cancel, tasks })
}

impl RunningServer {
    /// Stops accepting, lets calls in flight finish, and waits for the listeners to close.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
