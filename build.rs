//! Compiles the protos with protox (pure Rust, no system protoc) and keeps the descriptor set
//! for server reflection.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/toolrouter/v1/definition.proto",
        "proto/toolrouter/v1/registry.proto",
        "proto/toolrouter/v1/discovery.proto",
        "proto/toolrouter/v1/router.proto",
        "proto/toolrouter/v1/executor.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("toolrouter_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(fds)?;
    Ok(())
}
