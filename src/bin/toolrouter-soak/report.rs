//! Counters, the latency histogram, and the end report (text, then one JSON line).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::Soak;
use crate::checks::{EndChecks, double_executions, stuck_claims};

/// Fixed-size latency histogram: 1 ms buckets up to 30 s, then one overflow bucket.
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: Duration,
}

const BUCKETS: usize = 30_000;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; BUCKETS + 1], count: 0, max: Duration::ZERO }
    }
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        self.buckets[(d.as_millis() as usize).min(BUCKETS)] += 1;
        self.count += 1;
        self.max = self.max.max(d);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The upper bound (ms) of the bucket holding quantile `q`.
    pub fn quantile_ms(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return i as u64 + 1;
            }
        }
        BUCKETS as u64
    }

    pub fn max_ms(&self) -> f64 {
        self.max.as_secs_f64() * 1000.0
    }
}

#[derive(Default)]
pub struct Stats {
    /// Named counters: calls, batches, duplicate sends, MCP requests, attempt errors …
    pub counts: BTreeMap<String, u64>,
    /// Answers by kind (result, outcome_unknown, deferred_approval …).
    pub outcomes: BTreeMap<String, u64>,
    /// Normal calls: `lookup`, single, answered by the first attempt.
    pub latency: Histogram,
    /// Slow clients: seconds until the server cut them off, by kind.
    pub holds: BTreeMap<String, Vec<f64>>,
    /// Malformed requests: what each got back.
    pub malformed: BTreeMap<String, u64>,
    pub chaos: Vec<String>,
}

impl Soak {
    pub fn count(&self, name: impl Into<String>, n: u64) {
        *self.ledger.stats.lock().unwrap().counts.entry(name.into()).or_default() += n;
    }

    pub fn outcome(&self, kind: String) {
        *self.ledger.stats.lock().unwrap().outcomes.entry(kind).or_default() += 1;
    }
}

pub struct Summary {
    pub failed: bool,
    pub lines: Vec<String>,
    pub json: String,
}

fn spread(v: &[f64]) -> String {
    if v.is_empty() {
        return "none cut".into();
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    format!("{} cut, {:.1}/{:.1}/{:.1} s (min/median/max)", s.len(), s[0], s[s.len() / 2], s[s.len() - 1])
}

pub fn summarize(soak: &Soak, end: EndChecks, panics: Vec<String>) -> Summary {
    let calls: Vec<_> = soak.ledger.calls.lock().unwrap().values().cloned().collect();
    let deferred = soak.ledger.deferred.lock().unwrap().clone();
    let doubles = double_executions(&end.executions);
    let stuck = stuck_claims(&calls, &deferred, soak.stuck_after());
    let f = soak.ledger.findings.lock().unwrap();
    let st = soak.ledger.stats.lock().unwrap();
    let max_retry = calls.iter().filter(|c| c.retried).map(|c| c.live).max().unwrap_or_default();
    let executions: u64 = end.executions.values().map(|(_, n)| *n as u64).sum();
    let failed = !doubles.is_empty()
        || !f.lost.is_empty()
        || !stuck.is_empty()
        || !panics.is_empty()
        || !f.exited_by_itself.is_empty()
        || !f.unanswered_at_sigterm.is_empty();
    let mut lines = vec![String::new(), "==== soak report ====".to_string()];
    let c = |k: &str| st.counts.get(k).copied().unwrap_or(0);
    lines.push(format!(
        "duration {} s, seed {}, {} clients, chaos every {} s ({} events)",
        soak.args.duration,
        soak.args.seed,
        soak.args.concurrency,
        soak.args.chaos_every,
        st.chaos.len()
    ));
    lines.push(format!(
        "calls: {} distinct tool_call_ids ({} gRPC requests: {} single, {} batches; {} MCP tools/call), {} retried after a failed attempt (longest: answered after {:.1} s)",
        calls.len(),
        c("grpc requests"),
        c("single calls"),
        c("batches"),
        c("mcp tools/call"),
        calls.iter().filter(|c| c.retried).count(),
        max_retry.as_secs_f64()
    ));
    lines.push(format!(
        "duplicate sends: {} resends, {} raced on two replicas, {} resent at the end; resolutions: {} ({} twice)",
        c("duplicate sends"),
        c("raced"),
        end.resent,
        c("resolutions"),
        c("resolved twice")
    ));
    lines.push(format!("outcomes: {}", st.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")));
    let errs: Vec<String> = st.counts.iter().filter(|(k, _)| k.starts_with("attempt ")).map(|(k, v)| format!("{} {v}", &k[8..])).collect();
    lines.push(format!("failed attempts (retried): {}", if errs.is_empty() { "none".into() } else { errs.join(", ") }));
    let mcp: Vec<String> = st.counts.iter().filter(|(k, _)| k.starts_with("mcp ")).map(|(k, v)| format!("{} {v}", &k[4..])).collect();
    lines.push(format!("mcp: {}", mcp.join(", ")));
    lines.push(format!(
        "executions: {executions} ({} distinct calls), executor crashes {}",
        end.executions.len(),
        soak.executors.list.iter().map(|e| e.crashes.load(Ordering::SeqCst)).sum::<usize>()
    ));
    lines.push(format!("deferred records: {} got back, listed at the end: {:?}", deferred.len(), end.listed));
    let h = &st.latency;
    lines.push(format!(
        "latency of normal calls ({}): p50 {} ms, p99 {} ms, max {:.1} ms",
        h.count(),
        h.quantile_ms(0.5),
        h.quantile_ms(0.99),
        h.max_ms()
    ));
    let rss: Vec<String> = soak
        .nodes
        .iter()
        .map(|n| format!("{} {:.1} MiB ({} starts)", n.name, n.peak_rss_kib.load(Ordering::SeqCst) as f64 / 1024.0, n.starts.load(Ordering::SeqCst)))
        .collect();
    lines.push(format!("peak RSS: {}", rss.join(", ")));
    for (k, v) in &st.holds {
        lines.push(format!("slow client {k}: {}", spread(v)));
    }
    for (k, v) in st.counts.iter().filter(|(k, _)| k.starts_with("slow client")) {
        lines.push(format!("{k}: {v}"));
    }
    lines.push(format!(
        "malformed requests: {} — {}",
        st.malformed.values().sum::<u64>(),
        st.malformed.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("; ")
    ));
    let show = |lines: &mut Vec<String>, what: &str, v: &[String]| {
        for l in v.iter().take(20) {
            lines.push(format!("{what}: {l}"));
        }
        if v.len() > 20 {
            lines.push(format!("{what}: … and {} more", v.len() - 20));
        }
    };
    show(&mut lines, "DOUBLE EXECUTION", &doubles);
    show(&mut lines, "LOST RECORD", &f.lost);
    show(&mut lines, "STUCK CLAIM", &stuck);
    show(&mut lines, "PANIC", &panics);
    show(&mut lines, "REPLICA EXITED BY ITSELF", &f.exited_by_itself);
    show(&mut lines, "UNANSWERED AT SIGTERM", &f.unanswered_at_sigterm);
    show(&mut lines, "note", &f.notes);
    lines.push(format!(
        "DOUBLE EXECUTIONS: {}   LOST RECORDS: {}   STUCK CLAIMS: {}   PANICS: {}   RESULT: {}",
        doubles.len(),
        f.lost.len(),
        stuck.len(),
        panics.len(),
        if failed { "FAIL" } else { "PASS" }
    ));
    let json = json!({
        "soak": "toolrouter",
        "duration_secs": soak.args.duration,
        "seed": soak.args.seed,
        "calls": calls.len(),
        "grpc_requests": c("grpc requests"),
        "mcp_calls": c("mcp tools/call"),
        "duplicate_sends": c("duplicate sends") + c("raced") + end.resent as u64,
        "executions": executions,
        "chaos_events": st.chaos.len(),
        "malformed_requests": st.malformed.values().sum::<u64>(),
        "outcomes": st.outcomes,
        "longest_retry_secs": max_retry.as_secs_f64(),
        "p50_ms": h.quantile_ms(0.5),
        "p99_ms": h.quantile_ms(0.99),
        "max_ms": h.max_ms(),
        "peak_rss_mib": soak.nodes.iter().map(|n| (n.name, n.peak_rss_kib.load(Ordering::SeqCst) as f64 / 1024.0)).collect::<BTreeMap<_, _>>(),
        "double_executions": doubles.len(),
        "lost_records": f.lost.len(),
        "stuck_claims": stuck.len(),
        "panics": panics.len(),
        "exited_by_itself": f.exited_by_itself.len(),
        "unanswered_at_sigterm": f.unanswered_at_sigterm.len(),
        "result": if failed { "FAIL" } else { "PASS" },
    })
    .to_string();
    Summary { failed, lines, json }
}

pub fn print(soak: &Soak, s: &Summary) {
    for l in &s.lines {
        println!("{l}");
    }
    if s.failed {
        println!("replica logs kept in {}", soak.args.work.display());
    }
}
