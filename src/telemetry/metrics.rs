//! Prometheus metrics, served as text on the HTTP listener's `/metrics`.
//!
//! One recorder for the process, installed on first use. The names are fixed (a dashboard
//! uses them):
//! - `toolrouter_grpc_requests_total{method,code}`, `toolrouter_grpc_request_duration_seconds{method}`
//! - `toolrouter_tool_calls_total{outcome}`, `toolrouter_tool_call_duration_seconds{outcome}`
//!   (outcome = result | error | deferred | uncertain)
//! - `toolrouter_executor_duration_seconds{kind}` (kind = function | mcp)
//!
//! Label values are bounded whatever tenants register: no tenant-defined string (source ids,
//! tool or agent names) is ever a label.
//! - `toolrouter_search_duration_seconds`, `toolrouter_search_zero_results_total`
//! - `toolrouter_deferred_pending`
//! - `toolrouter_store_duration_seconds{op}`

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::thread::LocalKey;
use std::time::{Duration, Instant};

use metrics::{Counter, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::sync::watch;

pub const GRPC_REQUESTS: &str = "toolrouter_grpc_requests_total";
pub const GRPC_DURATION: &str = "toolrouter_grpc_request_duration_seconds";
pub const TOOL_CALLS: &str = "toolrouter_tool_calls_total";
pub const TOOL_CALL_DURATION: &str = "toolrouter_tool_call_duration_seconds";
pub const EXECUTOR_DURATION: &str = "toolrouter_executor_duration_seconds";
pub const SEARCH_DURATION: &str = "toolrouter_search_duration_seconds";
pub const SEARCH_ZERO_RESULTS: &str = "toolrouter_search_zero_results_total";
pub const DEFERRED_PENDING: &str = "toolrouter_deferred_pending";
pub const STORE_DURATION: &str = "toolrouter_store_duration_seconds";

/// Histogram buckets (seconds): from sub-millisecond searches to slow executors.
const BUCKETS: [f64; 16] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The process's Prometheus recorder (installed on first call).
#[derive(Clone)]
pub struct Metrics(PrometheusHandle);

impl Metrics {
    pub fn get() -> Metrics {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        Metrics(HANDLE.get_or_init(install).clone())
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.0.render()
    }

    /// Drains histogram samples into their buckets; run periodically.
    pub fn upkeep(&self) {
        self.0.run_upkeep();
    }
}

fn install() -> PrometheusHandle {
    let recorder = PrometheusBuilder::new().set_buckets(&BUCKETS).expect("buckets are not empty").build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        tracing::warn!("another metrics recorder is installed; /metrics will stay empty");
    }
    describe();
    handle
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(GRPC_REQUESTS, "gRPC requests handled, by method and status code");
    describe_histogram!(GRPC_DURATION, Unit::Seconds, "gRPC request duration, by method");
    describe_counter!(TOOL_CALLS, "Model tool calls handled, by outcome (result, error, deferred, uncertain)");
    describe_histogram!(TOOL_CALL_DURATION, Unit::Seconds, "Tool call handling duration, by outcome");
    describe_histogram!(EXECUTOR_DURATION, Unit::Seconds, "Executor and MCP server call duration, by kind of source");
    describe_histogram!(SEARCH_DURATION, Unit::Seconds, "Tool search duration");
    describe_counter!(SEARCH_ZERO_RESULTS, "Tool searches that found nothing");
    describe_gauge!(DEFERRED_PENDING, "Deferred records awaiting resolution");
    describe_histogram!(STORE_DURATION, Unit::Seconds, "Store operation duration, by operation");
}

/// A series: its name and label values.
type Key = (ByAddress, ByAddress, ByAddress);

/// A `'static` name or label value, told apart by its address, not its text: no text is
/// hashed or compared per call. The same text at two addresses makes two handles of one
/// series, both counting into it.
#[derive(Clone, Copy)]
struct ByAddress(&'static str);

impl PartialEq for ByAddress {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for ByAddress {}

impl std::hash::Hash for ByAddress {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.0.as_ptr() as usize);
    }
}

/// The keys are our own constants' addresses: a fixed fast hash is safe.
type Handles<T> = RefCell<HashMap<Key, T, foldhash::fast::FixedState>>;

thread_local! {
    static COUNTERS: Handles<Counter> = Default::default();
    static HISTOGRAMS: Handles<Histogram> = Default::default();
}

/// Uses the handle of a series with fixed labels, made once per thread: a registry lookup
/// would build the key, hash it and take a shard lock on every call; a shared handle would
/// bounce its reference count between cores. Bounded: the keys are `'static` names and label
/// values, a few dozen in all.
fn with_handle<T: 'static>(
    cache: &'static LocalKey<Handles<T>>,
    key: (&'static str, &'static str, &'static str),
    make: impl FnOnce() -> T,
    f: impl FnOnce(&T),
) {
    let key = (ByAddress(key.0), ByAddress(key.1), ByAddress(key.2));
    cache.with(|c| {
        if let Some(h) = c.borrow().get(&key) {
            return f(h);
        }
        // A handle made before the recorder is installed would count nowhere, for good.
        Metrics::get();
        let h = make();
        f(&h);
        c.borrow_mut().insert(key, h);
    })
}

/// Counts and times one RPC: `method` is `Service/Method` as [`crate::telemetry::rpc`] names it
/// (a bounded set), `code` its status name.
pub fn grpc_request(method: &'static str, code: &'static str, elapsed: Duration) {
    with_handle(&COUNTERS, (GRPC_REQUESTS, method, code), || counter!(GRPC_REQUESTS, "method" => method, "code" => code), |c| c.increment(1));
    with_handle(&HISTOGRAMS, (GRPC_DURATION, method, ""), || histogram!(GRPC_DURATION, "method" => method), |h| h.record(elapsed));
}

/// Counts and times a model tool call by its outcome (`result`, `error`, `deferred`,
/// `uncertain`); protocol errors are not outcomes.
pub fn tool_call(outcome: &'static str, elapsed: Duration) {
    with_handle(&COUNTERS, (TOOL_CALLS, outcome, ""), || counter!(TOOL_CALLS, "outcome" => outcome), |c| c.increment(1));
    with_handle(&HISTOGRAMS, (TOOL_CALL_DURATION, outcome, ""), || histogram!(TOOL_CALL_DURATION, "outcome" => outcome), |h| h.record(elapsed));
}

/// Times one call that reached its executor or MCP server (`kind`: function or mcp; not busy
/// waits, not failed connects).
pub fn executor_call(kind: &'static str, elapsed: Duration) {
    with_handle(&HISTOGRAMS, (EXECUTOR_DURATION, kind, ""), || histogram!(EXECUTOR_DURATION, "kind" => kind), |h| h.record(elapsed));
}

pub fn search_duration(elapsed: Duration) {
    histogram!(SEARCH_DURATION).record(elapsed);
}

pub fn search_zero_results() {
    counter!(SEARCH_ZERO_RESULTS).increment(1);
}

pub fn set_deferred_pending(n: u64) {
    gauge!(DEFERRED_PENDING).set(n as f64);
}

fn deferred_changes() -> &'static watch::Sender<u64> {
    static CHANGES: OnceLock<watch::Sender<u64>> = OnceLock::new();
    CHANGES.get_or_init(|| watch::Sender::new(0))
}

/// A deferred record was created or resolved: the pending gauge is refreshed soon.
pub fn deferred_changed() {
    deferred_changes().send_modify(|n| *n = n.wrapping_add(1));
}

/// Wakes when [`deferred_changed`] is called.
pub fn watch_deferred() -> watch::Receiver<u64> {
    deferred_changes().subscribe()
}

/// Records the duration of a store operation when dropped: `let _t = store_timer("op");` as
/// the first line of a `Store` method times all of it, early returns and errors included.
#[must_use = "the timer records when dropped"]
pub struct StoreTimer {
    op: &'static str,
    started: Instant,
}

pub fn store_timer(op: &'static str) -> StoreTimer {
    StoreTimer { op, started: Instant::now() }
}

impl Drop for StoreTimer {
    fn drop(&mut self) {
        let (op, elapsed) = (self.op, self.started.elapsed());
        with_handle(&HISTOGRAMS, (STORE_DURATION, op, ""), || histogram!(STORE_DURATION, "op" => op), |h| h.record(elapsed));
    }
}

/// The same, around a future: `timed("op", fut).await`.
pub async fn timed<T>(op: &'static str, fut: impl Future<Output = T>) -> T {
    let _t = store_timer(op);
    fut.await
}
