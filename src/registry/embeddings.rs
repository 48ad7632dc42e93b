//! Embeddings of catalogs and queries for hybrid search (`serve --embedding-model DIR`).
//!
//! A tool's embedding is computed once per distinct text (SHA-256 of the text, with the
//! model's identity) and kept in the store, so new versions, restarts and other replicas
//! reuse it. Catalogs are embedded in the background, one at a time, in batches, with the
//! CPU share the operator gave: after a batch that took `t`, the worker rests
//! `t·(1 − share)/share`. Until all of a catalog's tools have vectors its search stays
//! lexical. Query vectors are kept in a bounded cache (least recently used out).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::search::embed::Embedder;
use crate::search::hybrid::{self, Vectors};
use crate::store::Store;

/// Catalogs waiting for the worker. A catalog that finds the queue full is queued again by
/// a later lookup.
const QUEUE: usize = 1024;
/// Query vectors kept (a 384-dimension vector and its text: about 2 KB each).
pub const QUERY_CACHE_ENTRIES: usize = 4096;
/// Rest after a failed catalog (a store outage), before the next.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

pub struct Embeddings {
    embedder: Arc<Embedder>,
    tx: mpsc::Sender<Weak<Catalog>>,
    queries: Mutex<QueryCache>,
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embeddings").field("model", &self.embedder.id()).finish_non_exhaustive()
    }
}

struct Worker {
    embedder: Arc<Embedder>,
    store: Store,
    clock: Arc<dyn Clock>,
    cpu_share: f64,
}

impl Embeddings {
    /// Starts the background worker (a task that ends when this is dropped). `cpu_share` is
    /// clamped to 0.05..=1.
    pub fn start(embedder: Arc<Embedder>, store: Store, clock: Arc<dyn Clock>, cpu_share: f64) -> Arc<Embeddings> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let worker = Worker { embedder: embedder.clone(), store, clock, cpu_share: cpu_share.clamp(0.05, 1.0) };
        tokio::spawn(worker.run(rx));
        Arc::new(Embeddings { embedder, tx, queries: Mutex::new(QueryCache::default()) })
    }

    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// Queues `catalog` for embedding unless it has its vectors or is queued already.
    pub fn ensure(&self, catalog: &Arc<Catalog>) {
        if catalog.vectors().is_some() {
            return;
        }
        if catalog.grouped.is_empty() {
            // Nothing to embed: ready at once.
            catalog.set_vectors(Vectors::new(self.embedder.dims(), []));
            return;
        }
        if !catalog.queue_embedding() {
            return;
        }
        if self.tx.try_send(Arc::downgrade(catalog)).is_err() {
            catalog.unqueue_embedding();
        }
    }

    /// The query's unit vector (cached). `None` if embedding it failed (search then stays
    /// lexical; the failure is logged).
    pub async fn query(&self, text: &str) -> Option<Arc<[f32]>> {
        let text = text.trim();
        if let Some(v) = self.queries.lock().unwrap_or_else(|e| e.into_inner()).get(text) {
            return Some(v);
        }
        let embedder = self.embedder.clone();
        let owned = text.to_owned();
        let embedded = tokio::task::spawn_blocking(move || embedder.embed(&[&owned])).await.map_err(|e| e.to_string());
        let v: Arc<[f32]> = match embedded.and_then(|r| r.map_err(|e| e.to_string())) {
            Ok(mut v) => v.pop()?.into(),
            Err(e) => {
                tracing::warn!(error = %e, "embedding a query failed; searching lexically");
                return None;
            }
        };
        self.queries.lock().unwrap_or_else(|e| e.into_inner()).put(text.to_owned(), v.clone());
        Some(v)
    }
}

/// Hex SHA-256 of a text: the store key of its embedding.
pub fn text_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Worker {
    async fn run(self, mut rx: mpsc::Receiver<Weak<Catalog>>) {
        while let Some(weak) = rx.recv().await {
            // Evicted meanwhile: whoever compiles it again queues it again.
            let Some(catalog) = weak.upgrade() else { continue };
            let start = Instant::now();
            match self.fill(&catalog).await {
                Ok(computed) => {
                    tracing::debug!(tools = catalog.grouped.len(), computed, ms = start.elapsed().as_millis() as u64, "catalog embeddings ready")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedding a catalog failed; its search stays lexical until it is tried again");
                    catalog.unqueue_embedding();
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }

    /// Gives `catalog` its vectors: reads what the store has, computes the rest in batches,
    /// stores them, and reads all back (so every replica uses the same stored vectors).
    /// Returns how many texts were computed here.
    async fn fill(&self, catalog: &Catalog) -> Result<usize, String> {
        let model = self.embedder.id();
        let texts: Vec<String> = catalog.search_docs().iter().map(hybrid::tool_text).collect();
        let hashes: Vec<String> = texts.iter().map(|t| text_hash(t)).collect();
        let mut seen = HashSet::new();
        let distinct: Vec<usize> = (0..texts.len()).filter(|&i| seen.insert(hashes[i].as_str())).collect();
        let keys: Vec<String> = distinct.iter().map(|&i| hashes[i].clone()).collect();
        let found = self.store.get_embeddings(model, &keys, self.clock.now_ms()).await.map_err(|e| e.to_string())?;
        let missing: Vec<usize> = distinct.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(&i, _)| i).collect();
        for batch in missing.chunks(crate::search::embed::BATCH) {
            let started = Instant::now();
            let embedder = self.embedder.clone();
            let batch_texts: Vec<String> = batch.iter().map(|&i| texts[i].clone()).collect();
            let vectors = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = batch_texts.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
            let rows: Vec<(String, Vec<f32>)> = batch.iter().map(|&i| hashes[i].clone()).zip(vectors).collect();
            self.store.put_embeddings(model, &rows, self.clock.now_ms()).await.map_err(|e| e.to_string())?;
            let busy = started.elapsed();
            if self.cpu_share < 1.0 {
                tokio::time::sleep(busy.mul_f64((1.0 - self.cpu_share) / self.cpu_share)).await;
            }
        }
        let stored =
            if missing.is_empty() { found } else { self.store.get_embeddings(model, &keys, self.clock.now_ms()).await.map_err(|e| e.to_string())? };
        let mut by_hash: HashMap<&str, Vec<f32>> = HashMap::with_capacity(keys.len());
        for (k, v) in keys.iter().zip(stored) {
            match v {
                Some(v) if v.len() == self.embedder.dims() => {
                    by_hash.insert(k.as_str(), v);
                }
                _ => return Err(format!("the store lost or mangled the embedding of text {k}")),
            }
        }
        let rows = hashes.iter().map(|h| by_hash[h.as_str()].clone());
        catalog.set_vectors(Vectors::new(self.embedder.dims(), rows));
        Ok(missing.len())
    }
}

/// Query text → vector, bounded to [`QUERY_CACHE_ENTRIES`]; when full, the least recently
/// used half goes (amortized: one sort per half a cache of inserts).
#[derive(Default)]
struct QueryCache {
    entries: HashMap<String, (Arc<[f32]>, u64)>,
    tick: u64,
}

impl QueryCache {
    fn get(&mut self, text: &str) -> Option<Arc<[f32]>> {
        self.tick += 1;
        let e = self.entries.get_mut(text)?;
        e.1 = self.tick;
        Some(e.0.clone())
    }

    fn put(&mut self, text: String, v: Arc<[f32]>) {
        if self.entries.len() >= QUERY_CACHE_ENTRIES {
            let mut ticks: Vec<u64> = self.entries.values().map(|e| e.1).collect();
            let mid = ticks.len() / 2;
            let (_, cut, _) = ticks.select_nth_unstable(mid);
            let cut = *cut;
            self.entries.retain(|_, e| e.1 > cut);
        }
        self.tick += 1;
        self.entries.insert(text, (v, self.tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_cache_keeps_the_recently_used_within_its_bound() {
        let mut c = QueryCache::default();
        let v: Arc<[f32]> = vec![1.0].into();
        c.put("keep".into(), v.clone());
        for i in 0..QUERY_CACHE_ENTRIES * 3 {
            c.put(format!("q{i}"), v.clone());
            assert!(c.get("keep").is_some(), "a text used all along stays");
            assert!(c.entries.len() <= QUERY_CACHE_ENTRIES);
        }
        assert!(c.get("q0").is_none(), "an old text unused since went");
    }

    #[test]
    fn text_hashes_are_sha256_hex() {
        assert_eq!(text_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
