//! The ledger of what the harness got back, and the detectors: double executions, lost
//! records (a deferred record the store no longer knows or lists with another result; a
//! resent id answering differently), stuck claims (answered later than lease + 5 s of
//! retries on live replicas, or never), calls in flight at SIGTERM left unanswered, panics.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use toolrouter::pb;

use crate::Soak;
use crate::executors::Executions;
use crate::nodes::Store;
use crate::traffic;

/// What one request got back for a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Result {
        content: String,
        is_error: bool,
    },
    Deferred {
        id: String,
        kind: i32,
    },
    /// A definitive refusal (status code name): the harness never retries those.
    Refused(String),
}

impl Answer {
    pub fn from_outcome(o: Option<pb::handle_tool_call_response::Outcome>) -> Answer {
        use pb::handle_tool_call_response::Outcome;
        match o {
            Some(Outcome::Result(r)) => Answer::Result { content: r.content_json, is_error: r.is_error },
            Some(Outcome::Deferred(d)) => Answer::Deferred { id: d.deferred_id, kind: d.kind },
            None => Answer::Refused("empty outcome".into()),
        }
    }

    /// The outcome kind for the report: result, an error code, deferred_*.
    pub fn kind(&self) -> String {
        match self {
            Answer::Result { is_error: false, .. } => "result".into(),
            Answer::Result { content, is_error: true } => serde_json::from_str::<serde_json::Value>(content)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| "tool_error".into()),
            Answer::Deferred { kind, .. } if *kind == pb::DeferredKind::Approval as i32 => "deferred_approval".into(),
            Answer::Deferred { .. } => "deferred_client".into(),
            Answer::Refused(code) => format!("refused:{code}"),
        }
    }
}

/// One call of the ledger.
#[derive(Clone, Debug)]
pub struct CallRec {
    pub store: Store,
    pub run: String,
    pub id: String,
    pub tool: String,
    pub args: String,
    pub answer: Option<Answer>,
    /// Needed more than one attempt.
    pub retried: bool,
    /// The longest retry time (live replicas only) any request for it took.
    pub live: Duration,
    /// A request for it gave up unanswered.
    pub unanswered: bool,
}

/// One deferred record the harness got back.
#[derive(Clone, Debug, Default)]
pub struct DeferredRec {
    pub store: Option<Store>,
    pub kind: i32,
    pub run: String,
    /// The resolution sent ("approved", "denied", "client_result"), if any.
    pub resolution: Option<String>,
    /// The result ResolveDeferred answered.
    pub result: Option<(String, bool)>,
    /// A resolution request gave up unanswered (its effect unknown).
    pub unsure: bool,
    pub live: Duration,
}

#[derive(Default)]
pub struct Findings {
    pub lost: Vec<String>,
    pub stuck: Vec<String>,
    pub unanswered_at_sigterm: Vec<String>,
    pub exited_by_itself: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Default)]
pub struct Ledger {
    pub calls: Mutex<HashMap<(Store, String, String), CallRec>>,
    pub deferred: Mutex<HashMap<String, DeferredRec>>,
    pub findings: Mutex<Findings>,
    /// Attempts in flight on a replica when it was sent SIGTERM: id → (replica, what).
    pub term_watch: Mutex<HashMap<u64, String>>,
    pub stats: Mutex<crate::report::Stats>,
}

impl Ledger {
    /// Records an answer for a call; a different answer than an earlier one is a lost record.
    #[allow(clippy::too_many_arguments)]
    pub fn answered(&self, store: Store, run: &str, id: &str, tool: &str, args: &str, answer: &Answer, retried: bool, live: Duration) {
        let mut calls = self.calls.lock().unwrap();
        let rec = calls.entry((store, run.to_string(), id.to_string())).or_insert_with(|| CallRec {
            store,
            run: run.into(),
            id: id.into(),
            tool: tool.into(),
            args: args.into(),
            answer: None,
            retried: false,
            live: Duration::ZERO,
            unanswered: false,
        });
        rec.retried |= retried;
        rec.live = rec.live.max(live);
        match &rec.answer {
            Some(first) if first != answer => {
                let line = format!("{} run {} call {} ({tool}) answered {first:?} first, then {answer:?}", store.label(), run, id);
                self.findings.lock().unwrap().lost.push(line);
            }
            Some(_) => {}
            None => rec.answer = Some(answer.clone()),
        }
        if let Answer::Deferred { id: did, kind } = answer {
            let mut d = self.deferred.lock().unwrap();
            let e = d.entry(did.clone()).or_default();
            e.store = Some(store);
            e.kind = *kind;
            e.run = run.into();
        }
    }

    pub fn unanswered(&self, store: Store, run: &str, id: &str, tool: &str, args: &str, live: Duration) {
        let mut calls = self.calls.lock().unwrap();
        let rec = calls.entry((store, run.to_string(), id.to_string())).or_insert_with(|| CallRec {
            store,
            run: run.into(),
            id: id.into(),
            tool: tool.into(),
            args: args.into(),
            answer: None,
            retried: true,
            live,
            unanswered: true,
        });
        rec.unanswered = true;
        rec.retried = true;
        rec.live = rec.live.max(live);
    }

    /// Records ResolveDeferred's answer; a different one than before is a lost record.
    pub fn resolved(&self, deferred_id: &str, resolution: &str, result: Option<(String, bool)>, live: Duration) {
        let mut d = self.deferred.lock().unwrap();
        let e = d.entry(deferred_id.to_string()).or_default();
        e.resolution = Some(resolution.to_string());
        e.live = e.live.max(live);
        match (result, &e.result) {
            (None, _) => e.unsure = true,
            (Some(r), Some(first)) if &r != first => {
                self.findings.lock().unwrap().lost.push(format!("deferred {deferred_id}: resolved to {first:?} first, then {r:?}"));
            }
            (Some(_), Some(_)) => {}
            (Some(r), None) => e.result = Some(r),
        }
    }
}

/// (run_id, tool_call_id) executed more than once.
pub fn double_executions(executions: &Executions) -> Vec<String> {
    let mut v: Vec<String> = executions
        .iter()
        .filter(|(_, (_, n))| *n > 1)
        .map(|((run, id), (tool, n))| format!("{tool} run {run} call {id} executed {n} times"))
        .collect();
    v.sort();
    v
}

/// Calls and resolutions answered after more than `limit` of retries on live replicas, or never.
pub fn stuck_claims(calls: &[CallRec], deferred: &HashMap<String, DeferredRec>, limit: Duration) -> Vec<String> {
    let mut v = Vec::new();
    for c in calls {
        if c.unanswered && c.answer.is_none() {
            v.push(format!("{} run {} call {} ({}) never answered ({:.1} s of retries)", c.store.label(), c.run, c.id, c.tool, c.live.as_secs_f64()));
        } else if c.live > limit {
            v.push(format!("{} run {} call {} ({}) answered after {:.1} s of retries", c.store.label(), c.run, c.id, c.tool, c.live.as_secs_f64()));
        }
    }
    for (id, d) in deferred {
        if d.unsure && d.result.is_none() {
            v.push(format!("deferred {id}: resolution never answered ({:.1} s of retries)", d.live.as_secs_f64()));
        } else if d.live > limit {
            v.push(format!("deferred {id}: resolution answered after {:.1} s of retries", d.live.as_secs_f64()));
        }
    }
    v.sort();
    v
}

/// A deferred record as the store lists it: state name, resolution and result.
#[derive(Clone, Debug)]
pub struct Listed {
    pub state: i32,
    pub result: Option<(String, bool)>,
}

/// Deferred records of `store` the harness got back that the store lost or lists otherwise.
pub fn lost_records(store: Store, mine: &HashMap<String, DeferredRec>, listed: &HashMap<String, Listed>) -> Vec<String> {
    let mut v = Vec::new();
    for (id, d) in mine.iter().filter(|(_, d)| d.store == Some(store)) {
        let Some(l) = listed.get(id) else {
            v.push(format!("{} deferred {id} (run {}) is not listed", store.label(), d.run));
            continue;
        };
        match (&d.result, d.unsure, d.resolution.is_some()) {
            (Some(r), _, _) if l.state != pb::DeferredState::Resolved as i32 || l.result.as_ref() != Some(r) => {
                v.push(format!("{} deferred {id}: resolved to {r:?}, listed in state {} with {:?}", store.label(), l.state, l.result));
            }
            (Some(_), _, _) => {}
            // Resolution sent but its answer unknown: any state will do.
            (None, true, _) => {}
            (None, false, false) if l.state != pb::DeferredState::Pending as i32 => {
                v.push(format!("{} deferred {id}: never resolved, listed in state {}", store.label(), l.state));
            }
            _ => {}
        }
    }
    v.sort();
    v
}

/// Lines of the replicas' logs with `panicked at`.
pub fn scan_panics(soak: &Soak) -> Vec<String> {
    let mut v = Vec::new();
    for n in &soak.nodes {
        for path in [n.log_path(), n.err_path()] {
            let text = std::fs::read(&path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            v.extend(text.lines().filter(|l| l.contains("panicked at")).map(|l| format!("{}: {}", n.name, l.chars().take(300).collect::<String>())));
        }
    }
    v
}

/// What the end-of-run checks found.
#[derive(Default)]
pub struct EndChecks {
    pub resent: usize,
    pub listed: BTreeMap<&'static str, usize>,
    pub executions: Executions,
}

/// Resends retried calls and a sample, lists every deferred record, collects executions.
pub async fn final_checks(soak: &Soak) -> EndChecks {
    let mut end = EndChecks::default();
    let calls: Vec<CallRec> = soak.ledger.calls.lock().unwrap().values().cloned().collect();
    let mut sample: Vec<&CallRec> = calls.iter().filter(|c| c.answer.is_some() && (c.retried || fnv(&c.id).is_multiple_of(25))).collect();
    sample.truncate(1500);
    soak.log(format!("end checks: resending {} calls (every retried one and a sample)", sample.len()));
    for chunk in sample.chunks(24) {
        let sends = chunk.iter().map(|c| traffic::resend(soak, c));
        end.resent += futures::future::join_all(sends).await.into_iter().filter(|ok| *ok).count();
    }
    for store in [Store::Pg, Store::Lite] {
        match traffic::list_all_deferred(soak, store).await {
            Ok(listed) => {
                end.listed.insert(store.label(), listed.len());
                let mine = soak.ledger.deferred.lock().unwrap().clone();
                let lost = lost_records(store, &mine, &listed);
                soak.ledger.findings.lock().unwrap().lost.extend(lost);
            }
            Err(e) => soak.ledger.findings.lock().unwrap().lost.push(format!("ListDeferred on the {} store failed: {e}", store.label())),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    end.executions = soak.executors.executions();
    end
}

/// A stable hash, for sampling.
pub fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Takes attempt `id` off the SIGTERM watch list: what it was, if it was watched.
pub fn watched_at_sigterm(soak: &Soak, id: u64) -> Option<String> {
    soak.ledger.term_watch.lock().unwrap().remove(&id)
}

/// The deferred ids the harness has seen resolved (for the ListDeferred checker).
pub fn resolved_ids(soak: &Soak) -> HashSet<String> {
    soak.ledger.deferred.lock().unwrap().iter().filter(|(_, d)| d.result.is_some()).map(|(id, _)| id.clone()).collect()
}
