//! `toolrouter-soak`: a chaos soak of real `toolrouter serve` processes (issue 15 item 11).
//!
//! Replicas A and B share one PostgreSQL store, C has an embedded (SQLite) one. Fake
//! executors (real gRPC servers in this process, each on its own runtime) record every
//! execution. Clients mix single and batched gRPC calls, resends of the same tool_call_id
//! (also raced on A and B), MCP sessions, and deferred-record resolutions, while chaos crashes
//! executors, kills (-9) and stops (SIGTERM) replicas and restarts PostgreSQL, and abusers
//! send slow and malformed requests. At the end the ledger is checked: double executions,
//! lost records, stuck claims, panics. `scripts/soak.sh` builds, provides PostgreSQL and runs
//! it. Exit 1 on any failure.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use tokio_util::sync::CancellationToken;

mod abuse;
mod chaos;
mod checks;
mod executors;
mod nodes;
mod report;
#[cfg(test)]
mod tests;
mod traffic;

use checks::Ledger;
use executors::Executors;
use nodes::{Node, Store};

#[derive(Parser, Clone)]
#[command(about = "Chaos soak of toolrouter replicas: double executions, lost records, stuck claims, panics")]
pub struct Args {
    /// Seconds of traffic.
    #[arg(long, default_value_t = 150)]
    duration: u64,
    /// Seed of every random choice (clients, chaos targets).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent clients (about one in six is an MCP client).
    #[arg(long, default_value_t = 24)]
    concurrency: usize,
    /// Seconds between two chaos events (0 = no chaos).
    #[arg(long, default_value_t = 12)]
    chaos_every: u64,
    /// Also write the JSON summary to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The `toolrouter` binary.
    #[arg(long, default_value = "target/ci/toolrouter")]
    toolrouter: PathBuf,
    /// Directory for the replicas' logs, pid files and the SQLite store.
    #[arg(long)]
    work: PathBuf,
    /// PostgreSQL store URL shared by replicas A and B.
    #[arg(long, env = "SOAK_POSTGRES_URL")]
    pg_url: String,
    /// Shell command that stops PostgreSQL (with --pg-start-cmd: PostgreSQL restarts are part of the chaos).
    #[arg(long)]
    pg_stop_cmd: Option<String>,
    /// Shell command that starts PostgreSQL again.
    #[arg(long)]
    pg_start_cmd: Option<String>,
    /// First of the loopback ports used (replicas: +0..+5, executors: +20, +21). Below
    /// Linux's ephemeral range (32768-60999), so no outbound connection holds one of them.
    #[arg(long, default_value_t = 21100)]
    base_port: u16,
    /// The replicas' --claim-lease-secs.
    #[arg(long, default_value_t = 15)]
    lease_secs: u64,
}

/// Everything the tasks share.
pub struct Soak {
    pub args: Args,
    pub start: Instant,
    pub nodes: Vec<Arc<Node>>,
    pub executors: Executors,
    pub ledger: Ledger,
    /// Set when the traffic stops; clients finish the operation they are in.
    pub stop: CancellationToken,
    /// Set when the drain is over: retries give up, slow clients let go.
    pub halt: CancellationToken,
    pub agent: String,
}

impl Soak {
    /// Seconds since the start, for the event log.
    pub fn t(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    pub fn log(&self, line: impl AsRef<str>) {
        println!("[{:>6.1}s] {}", self.t(), line.as_ref());
    }

    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.args.lease_secs)
    }

    /// A call or resolution answered later than this (retry time on live replicas) is a stuck claim.
    pub fn stuck_after(&self) -> Duration {
        self.lease() + Duration::from_secs(5)
    }

    pub fn of_store(&self, store: Store) -> impl Iterator<Item = &Arc<Node>> {
        self.nodes.iter().filter(move |n| n.store == store)
    }

    pub fn node(&self, name: &str) -> &Arc<Node> {
        self.nodes.iter().find(|n| n.name == name).expect("a node of that name")
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let failed = rt.block_on(run(args))?;
    rt.shutdown_timeout(Duration::from_secs(2));
    std::process::exit(if failed { 1 } else { 0 });
}

async fn run(args: Args) -> Result<bool> {
    std::fs::create_dir_all(args.work.join("pids")).with_context(|| format!("creating {}", args.work.display()))?;
    let toolrouter = std::fs::canonicalize(&args.toolrouter).with_context(|| format!("no toolrouter binary at {}", args.toolrouter.display()))?;
    let p = args.base_port;
    let sqlite = format!("sqlite://{}", args.work.join("c.db").display());
    let common = vec!["--claim-lease-secs".to_string(), args.lease_secs.to_string()];
    let nodes = vec![
        Node::new("A", Store::Pg, p, &toolrouter, &args.pg_url, &common, &args.work),
        Node::new("B", Store::Pg, p + 2, &toolrouter, &args.pg_url, &common, &args.work),
        Node::new("C", Store::Lite, p + 4, &toolrouter, &sqlite, &common, &args.work),
    ];
    let executors = Executors::start(&[p + 20, p + 21])?;
    let soak = Arc::new(Soak {
        agent: format!("soak-{}", args.seed),
        args,
        start: Instant::now(),
        nodes,
        executors,
        ledger: Ledger::default(),
        stop: CancellationToken::new(),
        halt: CancellationToken::new(),
    });
    let outcome = drive(&soak).await;
    for n in &soak.nodes {
        n.kill_now();
    }
    soak.executors.shutdown();
    let failed = outcome?;
    if !failed {
        let _ = std::fs::remove_dir_all(soak.args.work.join("pids"));
    }
    Ok(failed)
}

async fn drive(soak: &Arc<Soak>) -> Result<bool> {
    // A first (it migrates the PostgreSQL schema), then B and C.
    for n in &soak.nodes {
        n.spawn()?;
        n.wait_ready(Duration::from_secs(60))
            .await
            .with_context(|| format!("replica {} did not become ready (log: {})", n.name, n.log_path().display()))?;
    }
    soak.log(format!(
        "replicas ready: A {} and B {} on PostgreSQL, C {} on SQLite; executors {}",
        soak.node("A").grpc,
        soak.node("B").grpc,
        soak.node("C").grpc,
        soak.executors.endpoints().join(", ")
    ));
    traffic::register(soak).await?;
    let duration = Duration::from_secs(soak.args.duration);
    let chaos_until = duration.saturating_sub(soak.lease() + Duration::from_secs(10));

    let watchdog = tokio::spawn(chaos::watchdog(soak.clone()));
    let chaos = tokio::spawn(chaos::run(soak.clone(), chaos_until));
    let abuse = abuse::spawn(soak.clone());
    let (clients, resolvers) = traffic::spawn(soak.clone());

    tokio::time::sleep(duration).await;
    soak.stop.cancel();
    soak.log("traffic stopped; waiting for calls in flight");
    let _ = chaos.await;
    // Operations in flight finish (a retry gives up after stuck_after + 25 s of live time).
    let drain = soak.stuck_after() + Duration::from_secs(30);
    let drained = tokio::time::timeout(drain, async {
        for c in clients {
            let _ = c.await;
        }
        for r in resolvers {
            let _ = r.await;
        }
    })
    .await
    .is_ok();
    if !drained {
        soak.log("some operations were still retrying at the end of the drain");
    }
    soak.halt.cancel();
    for a in abuse {
        let _ = a.await;
    }
    for n in &soak.nodes {
        n.wait_ready(Duration::from_secs(60)).await.with_context(|| format!("replica {} not ready for the final checks", n.name))?;
    }
    let end = checks::final_checks(soak).await;
    watchdog.abort();
    // Graceful stop; then the logs are complete.
    for n in &soak.nodes {
        n.stop_gracefully(Duration::from_secs(30)).await;
    }
    let panics = checks::scan_panics(soak);
    let summary = report::summarize(soak, end, panics);
    report::print(soak, &summary);
    if let Some(path) = &soak.args.json {
        std::fs::write(path, format!("{}\n", summary.json)).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("{}", summary.json);
    Ok(summary.failed)
}
