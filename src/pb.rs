//! Generated protobuf and gRPC code. Only `api` and the tests use it.
#![allow(clippy::all, missing_docs)]

tonic::include_proto!("toolrouter.v1");

/// Encoded descriptor set of the toolrouter protos, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("toolrouter_descriptor");
