//! Exactly-once bookkeeping under load (SPEC §4), PostgreSQL: the claims and outcomes of tool
//! calls made by concurrent requests are written by one task, a batch at a time: one
//! multi-row statement for the batch's outcomes and one for its claims, instead of a round trip
//! per call. A lone call is a batch of one, so nothing waits for company.

use std::collections::HashSet;

use tokio::sync::{mpsc, oneshot};

use super::postgres::PgStore;
use super::{CallKey, Claim, ClaimRequest, StoreError};

/// Most calls written by one statement (SQLite and PostgreSQL both take the parameters).
pub(super) const MAX_BATCH: usize = 128;

enum Op {
    Claim { key: CallKey, req: ClaimRequest, reply: oneshot::Sender<Result<Claim, StoreError>> },
    Finish { key: CallKey, outcome: String, now: i64, reply: oneshot::Sender<Result<(), StoreError>> },
}

/// The handle of the writer task; the task ends when the last handle is dropped.
#[derive(Clone, Debug)]
pub(super) struct CallWriter {
    tx: mpsc::UnboundedSender<Op>,
}

impl CallWriter {
    pub fn start(backend: PgStore) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(backend, rx));
        Self { tx }
    }

    pub async fn claim(&self, key: CallKey, req: ClaimRequest) -> Result<Claim, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Op::Claim { key, req, reply }).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub async fn finish(&self, key: CallKey, outcome: String, now: i64) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Op::Finish { key, outcome, now, reply }).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(backend: PgStore, mut rx: mpsc::UnboundedReceiver<Op>) {
    let mut ops = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut ops, MAX_BATCH).await > 0 {
        let mut claims = Vec::new();
        let mut finishes = Vec::new();
        for op in ops.drain(..) {
            match op {
                Op::Claim { key, req, reply } => claims.push((key, req, reply)),
                Op::Finish { key, outcome, now, reply } => finishes.push((key, outcome, now, reply)),
            }
        }
        // Outcomes first: a retry claimed in the same batch then finds the outcome.
        if !finishes.is_empty() {
            write_finishes(&backend, finishes).await;
        }
        if !claims.is_empty() {
            write_claims(&backend, claims).await;
        }
    }
}

type Finish = (CallKey, String, i64, oneshot::Sender<Result<(), StoreError>>);

async fn write_finishes(backend: &PgStore, finishes: Vec<Finish>) {
    // The first outcome of a call wins (as with one statement each): later ones in the same
    // batch are dropped before the statement, which could otherwise pick either.
    let mut seen = HashSet::new();
    let rows: Vec<(&CallKey, &str, i64)> = finishes.iter().filter(|f| seen.insert(&f.0)).map(|(k, o, now, _)| (k, o.as_str(), *now)).collect();
    let written = backend.finish_calls(&rows).await;
    drop(rows);
    match written {
        Ok(()) => {
            for (_, _, _, reply) in finishes {
                let _ = reply.send(Ok(()));
            }
        }
        // One statement each, so every call gets its own answer (and its own error).
        Err(_) => {
            for (k, outcome, now, reply) in finishes {
                let r = backend.finish_call(&k, &outcome, now).await;
                let _ = reply.send(r);
            }
        }
    }
}

type ClaimOp = (CallKey, ClaimRequest, oneshot::Sender<Result<Claim, StoreError>>);

async fn write_claims(backend: &PgStore, claims: Vec<ClaimOp>) {
    let rows: Vec<(&CallKey, &ClaimRequest)> = claims.iter().map(|(k, req, _)| (k, req)).collect();
    let inserted = backend.insert_claims(&rows).await;
    drop(rows);
    let mut inserted: HashSet<CallKey> = match inserted {
        Ok(keys) => keys.into_iter().collect(),
        Err(_) => HashSet::new(),
    };
    for (key, req, reply) in claims {
        // The first request for a key that was inserted holds the claim; any other asks
        // for the state (a duplicate in the same batch finds it running).
        let claim = if inserted.remove(&key) { Ok(Claim::New) } else { backend.claim_call(&key, &req).await };
        let _ = reply.send(claim);
    }
}
