//! Memory bounded by configuration (the endurance issue's item 2): whatever tenants register,
//! the process stays under `--catalog-cache-bytes` + 256 MiB.
//!
//! `cargo bench --bench catalog_memory`. Runs the real binary (its own allocator, as deployed)
//! with the default cache (512 MiB; BENCH_CACHE_MIB to change it) and API keys for
//! BENCH_TENANTS (3) tenants. Each tenant registers BENCH_VERSIONS (4) versions of an agent
//! with BENCH_TOOLS (100000) tools in 100 groups, and each version is used at once
//! (`GetModelTools`, then `discover_tools`, which compiles its catalog and search index);
//! then every version of every tenant is used again, in turn, so catalogs are evicted and
//! compiled again. Unbounded, this is ~12 catalogs of a few hundred MiB each. Prints the
//! process's RSS after each step, its peak (VmHWM) against the bound, and one JSON line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use sha2::Digest;
use tonic::metadata::MetadataValue;
use toolrouter::pb;

const WORDS: &[&str] = &[
    "invoice",
    "customer",
    "order",
    "refund",
    "ticket",
    "shipment",
    "payment",
    "account",
    "report",
    "calendar",
    "meeting",
    "document",
    "contract",
    "employee",
    "inventory",
    "warehouse",
    "lead",
    "campaign",
    "subscription",
    "quote",
    "project",
    "task",
    "incident",
    "alert",
];

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// (VmRSS, VmHWM) of a process, in MiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|kb| kb.parse::<u64>().ok()).unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn definition(tools: usize, seed: usize) -> pb::AgentDefinition {
    let groups = 100;
    let mut sources = Vec::new();
    let mut group_map = std::collections::HashMap::new();
    for g in 0..groups {
        let decls = (g..tools)
            .step_by(groups)
            .map(|i| {
                let w = |k: usize| WORDS[(i * 7 + k * 13 + seed) % WORDS.len()];
                pb::ToolDeclaration {
                    name: format!("{}_{}_{i}", w(0), w(1)),
                    description: format!("Find {} {} records for a {} by id {i}.", w(0), w(1), w(2)),
                    input_schema_json: r#"{"type":"object","properties":{"id":{"type":"string"}}}"#.into(),
                    ..Default::default()
                }
            })
            .collect();
        let id = format!("s{g}");
        sources.push(pb::ToolSource {
            id: id.clone(),
            kind: Some(pb::tool_source::Kind::Client(pb::ClientSource { tools: decls })),
            ..Default::default()
        });
        group_map
            .insert(format!("g{g}"), pb::ToolGroup { description: format!("Group {g}: {} tools.", WORDS[g % WORDS.len()]), source_ids: vec![id] });
    }
    pb::AgentDefinition { sources, groups: group_map, ..Default::default() }
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let tenants = knob("BENCH_TENANTS", 3) as usize;
    let versions = knob("BENCH_VERSIONS", 4) as u32;
    let tools = knob("BENCH_TOOLS", 100_000) as usize;
    let cache_mib = knob("BENCH_CACHE_MIB", 512);
    let dir = std::env::temp_dir().join(format!("toolrouter-bench-catalog-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let keys: Vec<serde_json::Value> = (0..tenants)
        .map(|t| serde_json::json!({"tenant": format!("tenant{t}"), "sha256": hex(&sha2::Sha256::digest(format!("key-{t}"))), "identity": {"sub": format!("bench{t}")}}))
        .collect();
    std::fs::write(dir.join("keys.json"), serde_json::Value::from(keys).to_string()).expect("key file");

    let mut child = Command::new(env!("CARGO_BIN_EXE_toolrouter"))
        .args(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .arg("--store")
        .arg(format!("sqlite://{}", dir.join("store.db").display()))
        .arg("--api-keys")
        .arg(dir.join("keys.json"))
        .arg("--catalog-cache-bytes")
        .arg((cache_mib << 20).to_string())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("toolrouter starts");
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the listening line");
    let server = Server(child);
    let grpc = line.split_whitespace().find_map(|w| w.strip_prefix("grpc=")).expect("grpc address").to_string();
    println!(
        "toolrouter {pid}: --catalog-cache-bytes {cache_mib} MiB; {tenants} tenants × {versions} versions × {tools} tools; at start RSS {} MiB",
        memory(pid).0
    );

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (mut used, mut refused, mut samples) = (0u32, 0u32, Vec::new());
    let started = Instant::now();
    rt.block_on(async {
        let channel = tonic::transport::Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.expect("connect");
        let auth = |t: usize| -> MetadataValue<_> { format!("Bearer key-{t}").parse().unwrap() };
        let use_version = |t: usize, v: u32, pass: u32| {
            let (channel, auth) = (channel.clone(), auth(t));
            async move {
                let mut router = pb::router_client::RouterClient::new(channel);
                let agent = Some(pb::AgentRef { agent_id: "big".into(), version: v });
                let run = Some(pb::RunContext { run_id: format!("p{pass}-v{v}"), ..Default::default() });
                let mut req = tonic::Request::new(pb::GetModelToolsRequest { agent: agent.clone(), run: run.clone(), ..Default::default() });
                req.metadata_mut().insert("authorization", auth.clone());
                router.get_model_tools(req).await?;
                let call = pb::ToolCall {
                    tool_call_id: "d1".into(),
                    tool_name: "discover_tools".into(),
                    arguments_json: r#"{"query":"refund invoice for a customer"}"#.into(),
                };
                let mut req = tonic::Request::new(pb::HandleToolCallRequest { agent, run, call: Some(call), ..Default::default() });
                req.metadata_mut().insert("authorization", auth);
                router.handle_tool_call(req).await.map(|_| ())
            }
        };
        for v in 1..=versions {
            for t in 0..tenants {
                let mut registry = pb::agent_registry_client::AgentRegistryClient::new(channel.clone())
                    .max_encoding_message_size(64 << 20)
                    .max_decoding_message_size(64 << 20);
                let mut req = tonic::Request::new(pb::CreateAgentVersionRequest {
                    agent_id: "big".into(),
                    definition: Some(definition(tools, t * 31 + v as usize)),
                    make_default: true,
                });
                req.metadata_mut().insert("authorization", auth(t));
                registry.create_agent_version(req).await.expect("version registered");
                match use_version(t, v, 0).await {
                    Ok(()) => used += 1,
                    Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                        refused += 1;
                        println!("  tenant{t} version {v} refused: {}", e.message());
                    }
                    Err(e) => panic!("using version {v} of tenant{t}: {e:?}"),
                }
                let (rss, hwm) = memory(pid);
                samples.push(rss);
                println!("[{:6.1}s] tenant{t} version {v} registered and used: RSS {rss} MiB, peak {hwm} MiB", started.elapsed().as_secs_f64());
            }
        }
        for v in 1..=versions {
            for t in 0..tenants {
                match use_version(t, v, 1).await {
                    Ok(()) => used += 1,
                    Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                        refused += 1;
                        println!("  tenant{t} version {v} refused again: {}", e.message());
                    }
                    Err(e) => panic!("using version {v} of tenant{t} again: {e:?}"),
                }
                samples.push(memory(pid).0);
            }
        }
    });
    let (rss, hwm) = memory(pid);
    let bound = cache_mib + 256;
    println!("used {used} times, refused {refused} (RESOURCE_EXHAUSTED) in {:.1} s", started.elapsed().as_secs_f64());
    println!(
        "RSS now {rss} MiB, largest sample {} MiB, peak (VmHWM) {hwm} MiB; bound cache + 256 = {bound} MiB {}",
        samples.iter().max().unwrap_or(&0),
        if hwm <= bound { "PASS" } else { "MISS" }
    );
    println!(
        "{}",
        serde_json::json!({"bench": "catalog_memory", "cache_mib": cache_mib, "tenants": tenants, "versions": versions, "tools": tools,
            "used": used, "refused": refused, "rss_mib": rss, "peak_rss_mib": hwm, "bound_mib": bound})
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
