//! Exactly one outcome per (agent, run, tool call id) (SPEC §4, §8): the first request claims
//! the call in the store under a lease and runs it; a duplicate gets the stored outcome, or
//! waits for the attempt in flight (in this process through a channel, elsewhere by reading
//! the store, at most five times a second). A claim whose lease ran out lost its holder: the
//! waiter gives it the uncertain outcome. A tool call id reused for another call is refused.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::route::{Arguments, Parsed};
use super::{Outcome, Resolved, Router};
use crate::admission::CallContext;
use crate::call::{ModelFault, ToolCall};
use crate::error::{Error, Result};
use crate::store::{CallKey, Claim, ClaimRequest};

/// First and longest pause between two reads of a call another process runs: at most five
/// reads a second once it settles.
const POLL_FIRST: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_millis(200);

/// How long an outcome write is retried before the outcome is given up to the lease.
const STORE_RETRIES: u32 = 6;

impl Router {
    /// Runs a call once per (agent, run, tool call id); duplicates get the first outcome.
    pub(super) async fn exactly_once(self: &Arc<Self>, cx: &CallContext, r: &Resolved, call: &ToolCall, parsed: Parsed) -> Result<Outcome> {
        let key = CallKey::new(&cx.tenant, &cx.agent_id, &cx.run.run_id, &call.tool_call_id);
        let fingerprint = fingerprint(call, &parsed.arguments);
        let parsed = Arc::new(parsed);
        loop {
            // The claim and, if it is new, the call and its outcome run to their end even if
            // this request is cancelled (the host's deadline passed, it disconnected): a claim
            // once written must get its outcome, or the host's retry would find it orphaned.
            // The retry waits for the first attempt instead. The context's copy keeps the
            // work counted in flight for the drain.
            let attempt = {
                let this = self.clone();
                let (key, cx, r, call, parsed, fingerprint) = (key.clone(), cx.clone(), r.clone(), call.clone(), parsed.clone(), fingerprint.clone());
                async move {
                    let store = this.registry.store();
                    let now = this.now();
                    let req = ClaimRequest { fingerprint, owner: this.leases.owner().to_string(), now, lease_until: this.leases.from(now).until };
                    let _held = this.leases.hold_call(key.clone());
                    match store.claim_call(&key, &req).await? {
                        Claim::New => {}
                        other => return Ok(Attempt::Found(other)),
                    }
                    let (tx, rx) = watch::channel(None);
                    this.inflight.lock().expect("inflight lock").insert(key.clone(), rx.clone());
                    let _unlist = Unlist { router: &this, key: key.clone(), rx };
                    let outcome = this.route(&cx, &r, &call, &parsed).await;
                    let _ = tx.send(outcome.as_ref().ok().cloned());
                    match &outcome {
                        Ok(o) => this.store_outcome(&key, o).await,
                        // A protocol fault is not an outcome: let a retry run it again.
                        Err(_) => Box::pin(store.release_call(&key)).await?,
                    }
                    outcome.map(Attempt::Ran)
                }
            };
            let found = match RunToEnd::new(crate::telemetry::in_span(attempt, &tracing::Span::current())).await? {
                Attempt::Ran(outcome) => return Ok(outcome),
                Attempt::Found(found) => found,
            };
            let stored_fingerprint = match &found {
                Claim::Done { fingerprint, .. } | Claim::Running { fingerprint, .. } => fingerprint.as_deref(),
                Claim::New => None,
            };
            if stored_fingerprint.is_some_and(|f| f != fingerprint) {
                return Ok(Outcome::Fault(ModelFault::ToolCallIdReused { tool_call_id: call.tool_call_id.clone() }));
            }
            match found {
                Claim::Done { outcome, .. } => return decode(&outcome),
                Claim::Running { lease_until, .. } => {
                    let local = self.inflight.lock().expect("inflight lock").get(&key).cloned();
                    if let Some(mut rx) = local {
                        let outcome = rx.wait_for(|o| o.is_some()).await.ok().and_then(|o| o.clone());
                        if let Some(o) = outcome {
                            return Ok(o);
                        }
                        continue;
                    }
                    if let Some(outcome) = Box::pin(self.await_elsewhere(&key, &call.tool_name, lease_until)).await? {
                        return Ok(outcome);
                    }
                }
                Claim::New => unreachable!("a new claim runs above"),
            }
        }
    }

    /// Waits for a call another process holds: its outcome once stored, `None` when the claim
    /// is gone (released: claim it again). A holder whose lease ran out is gone (killed, or
    /// cut off by its shutdown): the call gets the uncertain outcome, never a second run.
    async fn await_elsewhere(&self, key: &CallKey, tool: &str, mut lease_until: i64) -> Result<Option<Outcome>> {
        let store = self.registry.store();
        let mut pause = POLL_FIRST;
        loop {
            let now = self.now();
            if now > lease_until {
                let lost = Outcome::Fault(ModelFault::uncertain(tool, "the replica that ran it stopped before it reported its end"));
                store.expire_call(key, &encode(&lost), now, Some(now)).await?;
            } else {
                let wait = Duration::from_millis((lease_until - now + 1) as u64).min(pause);
                tokio::time::sleep(wait).await;
                pause = (pause * 2).min(POLL_MAX);
            }
            match store.call_state(key).await? {
                None => return Ok(None),
                Some(Claim::Done { outcome, .. }) => return decode(&outcome).map(Some),
                Some(Claim::Running { lease_until: renewed, .. }) => lease_until = renewed,
                Some(Claim::New) => return Ok(None),
            }
        }
    }

    /// Stores a call's outcome, retrying with backoff. If the store stays out of reach the
    /// caller still gets the outcome; the claim's lease then runs out and a retry gets the
    /// uncertain outcome.
    async fn store_outcome(&self, key: &CallKey, outcome: &Outcome) {
        let text = encode(outcome);
        let mut pause = Duration::from_millis(50);
        for attempt in 1..=STORE_RETRIES {
            match self.registry.store().finish_call(key, &text, self.now()).await {
                Ok(()) => return,
                Err(e) if attempt == STORE_RETRIES => {
                    tracing::warn!(error = %e, attempts = attempt, "the outcome of a tool call could not be stored; a retry will get an uncertain outcome");
                }
                Err(e) => {
                    tracing::debug!(error = %e, attempt, "storing a tool call's outcome failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
            }
        }
    }
}

/// Polls `F` in the caller's task (no hand-off to another task in the common case), and if the
/// caller is dropped before `F` is done (the request was cancelled) spawns the rest, so the
/// work still runs to its end and records its outcome.
pub(super) struct RunToEnd<F: Future<Output: Send + 'static> + Send + 'static>(Option<Pin<Box<F>>>);

impl<F: Future<Output: Send + 'static> + Send + 'static> RunToEnd<F> {
    pub(super) fn new(work: F) -> Self {
        Self(Some(Box::pin(work)))
    }
}

impl<F: Future<Output: Send + 'static> + Send + 'static> Future for RunToEnd<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let work = self.0.as_mut().expect("RunToEnd polled after it finished");
        let out = std::task::ready!(work.as_mut().poll(cx));
        self.0 = None;
        std::task::Poll::Ready(out)
    }
}

impl<F: Future<Output: Send + 'static> + Send + 'static> Drop for RunToEnd<F> {
    fn drop(&mut self) {
        if let Some(rest) = self.0.take() {
            tokio::spawn(rest);
        }
    }
}

/// What a claim attempt found: the call was new and ran here, or another attempt has its
/// outcome already or is running it.
#[allow(clippy::large_enum_variant)] // returned once per call; boxing the common case would allocate
enum Attempt {
    Ran(Outcome),
    Found(Claim),
}

/// Takes a finished (or abandoned) call off the in-process list, unless a newer claim of the
/// same call id has replaced it.
struct Unlist<'a> {
    router: &'a Router,
    key: CallKey,
    rx: watch::Receiver<Option<Outcome>>,
}

impl Drop for Unlist<'_> {
    fn drop(&mut self) {
        let mut inflight = self.router.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.get(&self.key).is_some_and(|rx| rx.same_channel(&self.rx)) {
            inflight.remove(&self.key);
        }
    }
}

/// What a call is: its tool and its arguments (compared with object keys sorted), so a retry
/// is told apart from another call under the same id.
fn fingerprint(call: &ToolCall, arguments: &Arguments) -> String {
    let mut text = Vec::with_capacity(call.tool_name.len() + call.arguments_json.len() + 1);
    text.extend_from_slice(call.tool_name.as_bytes());
    text.push(0);
    match arguments {
        Ok(v) => canonical(v, &mut text),
        Err(_) => text.extend_from_slice(call.arguments_json.as_bytes()),
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Sha256::digest(&text).iter().flat_map(|b| [HEX[(b >> 4) as usize] as char, HEX[(b & 15) as usize] as char]).collect()
}

/// JSON with every object's keys in byte order (keys and scalars written as serde_json
/// writes them).
fn canonical(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    // Writing a string or a JSON value into memory cannot fail.
    fn write(out: &mut Vec<u8>, v: &impl serde::Serialize) {
        serde_json::to_writer(out, v).expect("JSON is written into memory");
    }
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, k);
                out.push(b':');
                canonical(&m[k], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => write(out, other),
    }
}

pub(super) fn encode(o: &Outcome) -> String {
    serde_json::to_string(o).unwrap_or_default()
}

fn decode(text: &str) -> Result<Outcome> {
    serde_json::from_str(text).map_err(|e| Error::Internal(format!("stored outcome unreadable: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Addressed, Admission, Gate, Principal, RunQuota};
    use crate::call::RunContext;
    use crate::catalog::{AgentDefinition, ClientSource, SourceKind, ToolDeclaration, ToolSource};
    use crate::registry::Registry;
    use crate::settle;
    use crate::store::Store;
    use crate::upstream::Upstream;

    /// Stored fingerprints are compared by every replica and version: the text they hash
    /// must never change (sha-256 of the tool name, NUL, the arguments with sorted keys).
    #[test]
    fn fingerprints_are_the_same_in_every_version() {
        let call = ToolCall { tool_call_id: "x".into(), tool_name: "call_tool".into(), arguments_json: "{not json".into() };
        let args = serde_json::json!({"n": 1.5, "b": [1, {"z": true, "a": null}], "a": "he said \"hi\"\n"});
        assert_eq!(fingerprint(&call, &Ok(args)), "33d535ae0eb71f2030554c21e715e9aad8cbaea5843dc75415e06658f88bd6aa");
        assert_eq!(fingerprint(&call, &Err("bad".into())), "1f479ac1812294f004e4e823ef5f34e16b1d9a6b860508f4791a5a071516ca12");
    }

    /// A router over an in-memory store with one agent "ui" of one client tool "confirm", and
    /// the context of run "r1".
    async fn client_tool_router() -> (Store, Arc<Router>, CallContext) {
        let store = Store::open("sqlite::memory:").await.expect("store");
        let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock);
        let registry = Registry::new(store.clone(), clock.clone(), 1 << 20).with_cache_refresh(Duration::from_secs(60));
        let confirm = ToolDeclaration { name: "confirm".into(), description: "Ask the user to confirm.".into(), ..Default::default() };
        let def = AgentDefinition {
            sources: vec![ToolSource { id: "browser".into(), kind: SourceKind::Client(ClientSource { tools: vec![confirm] }), ..Default::default() }],
            ..Default::default()
        };
        registry.create_version("t", "ui", &def, true, 0).await.expect("definition");
        let outbound = crate::outbound::Outbound::from_config(&Default::default()).expect("outbound");
        let upstream = Arc::new(Upstream::new(Default::default(), &outbound, Default::default()));
        let admission = Arc::new(Admission::new(Arc::new(Gate::default()), RunQuota::new(store.clone(), 0, Duration::from_secs(60), clock)));
        let router = Arc::new(Router::new(Arc::new(registry), upstream, admission.clone(), Default::default()));
        let principal = Principal { tenant: "t".into(), identity: Default::default() };
        let addressed = Addressed { agent_id: "ui".into(), run: RunContext { run_id: "r1".into(), ..Default::default() }, ..Default::default() };
        let cx = admission.call(&principal, addressed).await.expect("admitted");
        (store, router, cx)
    }

    #[tokio::test]
    async fn a_tool_calls_future_stays_under_4_kib() {
        let (_store, router, cx) = client_tool_router().await;
        let call = ToolCall { tool_call_id: "c0".into(), tool_name: "confirm".into(), arguments_json: "{}".into() };
        // The client's future is boxed where it is made: else every future above it would
        // hold (and move, once per layer) a copy of its 6 KB.
        let size = std::mem::size_of_val(&router.handle(&cx, &call));
        assert!(size < 4096, "a call's future takes {size} bytes");
    }

    #[tokio::test]
    async fn a_call_cancelled_while_its_claim_is_queued_still_runs_and_its_retry_gets_the_outcome() {
        let (store, router, cx) = client_tool_router().await;
        let call = |id: &str| ToolCall { tool_call_id: id.into(), tool_name: "confirm".into(), arguments_json: "{}".into() };
        // A first call pins the run and loads the catalog, so the next one waits only for its claim.
        router.handle(&cx, &call("c0")).await.expect("first call");

        let held = store.hold_sqlite_writer().await;
        let first = {
            let (router, cx, call) = (router.clone(), cx.clone(), call("c1"));
            tokio::spawn(async move { router.handle(&cx, &call).await })
        };
        settle().await;
        first.abort(); // the host gave up while the claim was queued
        settle().await;
        drop(held);

        let retry = tokio::time::timeout(Duration::from_secs(5), router.handle(&cx, &call("c1")))
            .await
            .expect("the retry found an orphaned claim and waited for it")
            .expect("retry");
        let Outcome::Deferred(d) = retry else { panic!("expected the client execution record, got {retry:?}") };
        let query = super::super::ListDeferred { agent_id: "ui".into(), run_id: "r1".into(), ..Default::default() };
        let listed = router.list_deferred(&cx.request(), &query).await.expect("list").0;
        assert_eq!(listed.iter().filter(|r| r.call.original_call.tool_call_id == "c1").count(), 1, "{listed:?}");
        assert!(listed.iter().any(|r| r.call.deferred_id == d.deferred_id));
    }
}
