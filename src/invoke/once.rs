//! Exactly one outcome per (agent, run, tool call id) (SPEC §4): the first request claims the
//! call in the store and runs it; a duplicate gets the stored outcome, or waits for the
//! attempt in flight (in this process through a channel, elsewhere through the store).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

use super::route::Arguments;
use super::{Outcome, Resolved, Router};
use crate::admission::CallContext;
use crate::call::{ModelFault, ToolCall};
use crate::error::{Error, Result};
use crate::store::Claim;

/// (tenant, agent, run id, tool call id).
pub(super) type CallKey = (String, String, String, String);

impl Router {
    /// Runs a call once per (agent, run, tool call id); duplicates get the first outcome.
    pub(super) async fn exactly_once(self: &Arc<Self>, cx: &CallContext, r: &Resolved, call: &ToolCall, arguments: Arguments) -> Result<Outcome> {
        let key: CallKey = (cx.tenant.clone(), cx.agent_id.clone(), cx.run.run_id.clone(), call.tool_call_id.clone());
        let store = self.registry.store();
        let arguments = Arc::new(arguments);
        loop {
            // The claim and, if it is new, the call and its outcome run to their end even if
            // this request is cancelled (the host's deadline passed, it disconnected): a claim
            // once written must get its outcome, or the host's retry would find it orphaned.
            // The retry waits for the first attempt instead. The context's copy keeps the
            // work counted in flight for the drain.
            let attempt = {
                let this = self.clone();
                let (key, cx, r, call, arguments) = (key.clone(), cx.clone(), r.clone(), call.clone(), arguments.clone());
                async move {
                    let store = this.registry.store();
                    match store.claim_call(&cx.tenant, &cx.agent_id, &cx.run.run_id, &call.tool_call_id, this.now()).await? {
                        Claim::New => {}
                        Claim::Done(text) => return Ok(Attempt::Done(text)),
                        Claim::Running { since } => return Ok(Attempt::Running { since }),
                    }
                    let (tx, rx) = watch::channel(None);
                    this.inflight.lock().expect("inflight lock").insert(key.clone(), rx.clone());
                    let _unlist = Unlist { router: &this, key, rx };
                    let outcome = this.route(&cx, &r, &call, &arguments).await;
                    let stored = match &outcome {
                        Ok(o) => store.finish_call(&cx.tenant, &cx.agent_id, &cx.run.run_id, &call.tool_call_id, &encode(o), this.now()).await,
                        // A protocol fault is not an outcome: let a retry run it again.
                        Err(_) => store.release_call(&cx.tenant, &cx.agent_id, &cx.run.run_id, &call.tool_call_id).await,
                    };
                    let _ = tx.send(outcome.as_ref().ok().cloned());
                    stored?;
                    outcome.map(Attempt::Ran)
                }
            };
            match RunToEnd::new(attempt.instrument(tracing::Span::current())).await? {
                Attempt::Ran(outcome) => return Ok(outcome),
                Attempt::Done(text) => return decode(&text),
                Attempt::Running { since } => {
                    let local = self.inflight.lock().expect("inflight lock").get(&key).cloned();
                    if let Some(mut rx) = local {
                        let outcome = rx.wait_for(|o| o.is_some()).await.ok().and_then(|o| o.clone());
                        if let Some(o) = outcome {
                            return Ok(o);
                        }
                        continue;
                    }
                    if self.now() - since > self.config.claim_timeout.as_millis() as i64 {
                        let lost = Outcome::Fault(ModelFault::uncertain(&call.tool_name, "the first attempt with this tool call id never finished"));
                        store.finish_call(&cx.tenant, &cx.agent_id, &cx.run.run_id, &call.tool_call_id, &encode(&lost), self.now()).await?;
                        continue;
                    }
                    // Executing elsewhere (another replica, or a process that restarted).
                    tokio::time::sleep(Duration::from_millis(20)).await;
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
    Done(String),
    Running { since: i64 },
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

fn encode(o: &Outcome) -> String {
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

    #[tokio::test]
    async fn a_call_cancelled_while_its_claim_is_queued_still_runs_and_its_retry_gets_the_outcome() {
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
