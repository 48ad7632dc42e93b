//! Generated protobuf and gRPC code, and the conversions of the messages that both the
//! server API (`api`) and the executor client (`upstream::function`) speak. Generated types
//! stay in the gRPC edges (`api`, `upstream::function`, `demo`) and these conversions.
#![allow(clippy::all, missing_docs)]

pub mod convert;

tonic::include_proto!("toolrouter.v1");

/// Encoded descriptor set of the toolrouter protos, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toolrouter_descriptor");
