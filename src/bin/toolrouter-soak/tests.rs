//! The detectors fire: a double execution, a stuck claim, a lost record and an answer that
//! changed on resend are counted; clean data counts nothing.

use std::collections::HashMap;
use std::time::Duration;

use toolrouter::pb;

use crate::checks::{Answer, CallRec, DeferredRec, Ledger, Listed, double_executions, lost_records, stuck_claims};
use crate::executors::Executions;
use crate::nodes::Store;
use crate::report::Histogram;

fn call(id: &str, live: Duration, answered: bool) -> CallRec {
    CallRec {
        store: Store::Pg,
        run: "r1".into(),
        id: id.into(),
        tool: "ops__slow_write".into(),
        args: "{}".into(),
        answer: answered.then(|| Answer::Result { content: "{}".into(), is_error: false }),
        retried: true,
        live,
        unanswered: !answered,
    }
}

#[test]
fn a_call_executed_twice_is_a_double_execution() {
    let mut e = Executions::new();
    e.insert(("r1".into(), "c1".into()), ("slow_write".into(), 1));
    assert!(double_executions(&e).is_empty());
    e.insert(("r1".into(), "c2".into()), ("slow_write".into(), 2));
    let d = double_executions(&e);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains("c2") && d[0].contains("2 times"), "{d:?}");
}

#[test]
fn a_call_answered_late_or_never_is_a_stuck_claim() {
    let limit = Duration::from_secs(20);
    let calls =
        vec![call("fast", Duration::from_secs(2), true), call("late", Duration::from_secs(21), true), call("never", Duration::from_secs(45), false)];
    let mut deferred = HashMap::new();
    deferred.insert("d1".to_string(), DeferredRec { unsure: true, live: Duration::from_secs(45), ..Default::default() });
    deferred.insert("d2".to_string(), DeferredRec { result: Some(("{}".into(), false)), live: Duration::from_secs(1), ..Default::default() });
    let stuck = stuck_claims(&calls, &deferred, limit);
    assert_eq!(stuck.len(), 3, "{stuck:?}");
    assert!(stuck.iter().any(|s| s.contains("late")) && stuck.iter().any(|s| s.contains("never")) && stuck.iter().any(|s| s.contains("d1")));
}

#[test]
fn a_deferred_record_missing_or_listed_otherwise_is_lost() {
    let resolved =
        |r: &str| DeferredRec { store: Some(Store::Pg), resolution: Some("approved".into()), result: Some((r.into(), false)), ..Default::default() };
    let mut mine = HashMap::new();
    mine.insert("kept".to_string(), resolved("{\"ok\":1}"));
    mine.insert("gone".to_string(), resolved("{\"ok\":2}"));
    mine.insert("changed".to_string(), resolved("{\"ok\":3}"));
    mine.insert("pending".to_string(), DeferredRec { store: Some(Store::Pg), ..Default::default() });
    mine.insert("other-store".to_string(), DeferredRec { store: Some(Store::Lite), ..Default::default() });
    let done = pb::DeferredState::Resolved as i32;
    let mut listed = HashMap::new();
    listed.insert("kept".to_string(), Listed { state: done, result: Some(("{\"ok\":1}".into(), false)) });
    listed.insert("changed".to_string(), Listed { state: done, result: Some(("{\"ok\":4}".into(), false)) });
    listed.insert("pending".to_string(), Listed { state: pb::DeferredState::Pending as i32, result: None });
    let lost = lost_records(Store::Pg, &mine, &listed);
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert!(lost.iter().any(|l| l.contains("gone")) && lost.iter().any(|l| l.contains("changed")));
}

#[test]
fn a_resent_id_answering_differently_is_a_lost_record() {
    let ledger = Ledger::default();
    let a = Answer::Result { content: "{\"x\":1}".into(), is_error: false };
    let b = Answer::Result { content: "{\"error\":\"outcome_unknown\"}".into(), is_error: true };
    ledger.answered(Store::Pg, "r1", "c1", "t", "{}", &a, false, Duration::ZERO);
    ledger.answered(Store::Pg, "r1", "c1", "t", "{}", &a, true, Duration::ZERO);
    assert!(ledger.findings.lock().unwrap().lost.is_empty());
    ledger.answered(Store::Pg, "r1", "c1", "t", "{}", &b, true, Duration::ZERO);
    assert_eq!(ledger.findings.lock().unwrap().lost.len(), 1);
    ledger.resolved("d1", "approved", Some(("{}".into(), false)), Duration::ZERO);
    ledger.resolved("d1", "approved", Some(("{\"other\":1}".into(), false)), Duration::ZERO);
    assert_eq!(ledger.findings.lock().unwrap().lost.len(), 2);
}

#[test]
fn the_histogram_gives_quantiles_and_max() {
    let mut h = Histogram::default();
    for ms in 1..=100 {
        h.record(Duration::from_millis(ms));
    }
    assert_eq!(h.quantile_ms(0.5), 51);
    assert_eq!(h.quantile_ms(0.99), 100);
    assert!((h.max_ms() - 100.0).abs() < 0.01);
    assert_eq!(Answer::Result { content: "{\"error\":\"outcome_unknown\"}".into(), is_error: true }.kind(), "outcome_unknown");
}
