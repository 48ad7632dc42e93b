//! Chaos: one event every N s in a fixed rotating order (executor crash, kill -9 of a
//! replica, SIGTERM of a replica, PostgreSQL restart), each after slow calls are in flight;
//! and the watchdog that samples memory and restarts a replica that exited by itself.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::Soak;
use crate::nodes::Node;

#[derive(Clone, Copy, Debug)]
enum Event {
    ExecutorCrash,
    Kill,
    Term,
    PgRestart,
}

const ORDER: [Event; 4] = [Event::ExecutorCrash, Event::Kill, Event::Term, Event::PgRestart];
const KILL_TARGETS: [&str; 3] = ["A", "C", "B"];
const TERM_TARGETS: [&str; 3] = ["B", "A", "C"];

pub async fn run(soak: Arc<Soak>, until: Duration) {
    if soak.args.chaos_every == 0 {
        return;
    }
    let every = Duration::from_secs(soak.args.chaos_every);
    let can_restart_pg = soak.args.pg_stop_cmd.is_some() && soak.args.pg_start_cmd.is_some();
    if !can_restart_pg {
        soak.ledger.findings.lock().unwrap().notes.push("no --pg-stop-cmd/--pg-start-cmd: PostgreSQL restarts skipped".into());
    }
    let (mut i, mut kills, mut terms, mut crashes) = (0usize, 0usize, 0usize, 0usize);
    loop {
        let next = every * (i as u32 + 1);
        if next >= until {
            return;
        }
        tokio::time::sleep(next.saturating_sub(soak.start.elapsed())).await;
        if soak.stop.is_cancelled() {
            return;
        }
        let event = ORDER[i % ORDER.len()];
        i += 1;
        let line = match event {
            Event::ExecutorCrash => {
                let e = soak.executors.list[crashes % soak.executors.list.len()].clone();
                crashes += 1;
                let inflight = wait_for(|| e.in_flight()).await;
                e.crash();
                tokio::time::sleep(Duration::from_secs(1)).await;
                let r = e.restart().await;
                format!(
                    "executor {} crashed with {inflight} calls in flight; {}",
                    e.addr,
                    if r.is_ok() { "serving again after 1 s".to_string() } else { format!("restart FAILED: {r:?}") }
                )
            }
            Event::Kill => {
                let n = soak.node(KILL_TARGETS[kills % 3]).clone();
                kills += 1;
                let slow = wait_for(|| n.slow_in_flight()).await;
                n.managed.store(true, Ordering::SeqCst);
                let pid = n.pid().unwrap_or(0);
                n.kill_now();
                let ready = restart(&soak, &n).await;
                format!("kill -9 {} (pid {pid}) with {slow} slow calls in flight; {ready}", n.name)
            }
            Event::Term => {
                let n = soak.node(TERM_TARGETS[terms % 3]).clone();
                terms += 1;
                let slow = wait_for(|| n.slow_in_flight()).await;
                n.managed.store(true, Ordering::SeqCst);
                let pid = n.pid().unwrap_or(0);
                // Attempts surely in the replica's hands must all be answered.
                let watched = n.in_flight_older_than(Duration::from_millis(300));
                {
                    let mut w = soak.ledger.term_watch.lock().unwrap();
                    for id in &watched {
                        w.insert(*id, format!("a call in flight on {} at SIGTERM", n.name));
                    }
                }
                let slow_clients = n.slow_clients.load(Ordering::SeqCst);
                n.sigterm();
                let (took, by_itself) = n.wait_exit(Duration::from_secs(30)).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let unanswered = soak
                    .ledger
                    .findings
                    .lock()
                    .unwrap()
                    .unanswered_at_sigterm
                    .iter()
                    .filter(|l| l.contains(&format!(" on {} at SIGTERM", n.name)))
                    .count();
                let ready = restart(&soak, &n).await;
                format!(
                    "SIGTERM {} (pid {pid}) with {slow} slow calls in flight ({} watched) and {} slow clients connected; {} in {:.1} s, {unanswered} unanswered so far; {ready}",
                    n.name,
                    watched.len(),
                    slow_clients,
                    if by_itself { "exited" } else { "killed after the grace" },
                    took.as_secs_f64()
                )
            }
            Event::PgRestart if can_restart_pg => {
                let a = soak.node("A").clone();
                let slow = wait_for(|| a.slow_in_flight() + soak.node("B").slow_in_flight()).await;
                let started = Instant::now();
                let stop = shell(soak.args.pg_stop_cmd.as_deref().unwrap_or_default()).await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                let start = shell(soak.args.pg_start_cmd.as_deref().unwrap_or_default()).await;
                format!(
                    "PostgreSQL restart with {slow} slow calls in flight on A and B: stop {}, start {}; down {:.1} s",
                    if stop { "ok" } else { "FAILED" },
                    if start { "ok" } else { "FAILED" },
                    started.elapsed().as_secs_f64()
                )
            }
            Event::PgRestart => continue,
        };
        soak.log(&line);
        soak.ledger.stats.lock().unwrap().chaos.push(format!("[{:.1}s] {line}", soak.t()));
    }
}

/// Waits (at most 5 s) until `count` is at least 1; returns the count.
async fn wait_for(count: impl Fn() -> usize) -> usize {
    let started = Instant::now();
    while count() == 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    count()
}

async fn restart(soak: &Soak, n: &Node) -> String {
    let r = match n.spawn() {
        Ok(_) => match n.wait_ready(Duration::from_secs(60)).await {
            Ok(took) => format!("ready again in {:.1} s", took.as_secs_f64()),
            Err(e) => format!("NOT READY again: {e}"),
        },
        Err(e) => format!("restart FAILED: {e}"),
    };
    n.managed.store(false, Ordering::SeqCst);
    if r.contains("FAILED") || r.contains("NOT READY") {
        soak.ledger.findings.lock().unwrap().notes.push(format!("{}: {r}", n.name));
    }
    r
}

async fn shell(cmd: &str) -> bool {
    let cmd = cmd.to_string();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh").args(["-c", &cmd]).stdout(std::process::Stdio::null()).status().is_ok_and(|s| s.success())
    })
    .await
    .unwrap_or(false)
}

/// Every 500 ms: peak RSS of each replica; one that exited without being asked is recorded
/// and restarted.
pub async fn watchdog(soak: Arc<Soak>) {
    for n in &soak.nodes {
        n.managed.store(false, Ordering::SeqCst);
    }
    loop {
        for n in &soak.nodes {
            n.sample_rss();
            if n.managed.load(Ordering::SeqCst) {
                continue;
            }
            // `managed` read again after the exit: chaos sets it before it kills.
            if let Some(status) = n.exited().filter(|_| !n.managed.load(Ordering::SeqCst)) {
                n.set_up(false);
                soak.log(format!("replica {} EXITED BY ITSELF ({status}); restarting", n.name));
                soak.ledger.findings.lock().unwrap().exited_by_itself.push(format!("{} at {:.1} s: {status}", n.name, soak.t()));
                n.managed.store(true, Ordering::SeqCst);
                let r = restart(&soak, n).await;
                soak.log(format!("replica {} {r}", n.name));
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
