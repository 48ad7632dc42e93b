//! The hybrid legs of the harness (`--embedding-model DIR`): tool and query embeddings of a
//! set, and the leave-one-set-out choice of the fusion (`toolrouter::search::hybrid`).
//!
//! Leave-one-set-out: for each set held out in turn, the fusion settings are the ones with the
//! best mean Recall@10 over the *other* sets (each set weighing the same), and the figure shown
//! is the held-out set's Recall@10 with them; what generalizes scores well here, what only wins
//! one set does not.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;
use serde::Serialize;

use toolrouter::search::embed::Embedder;
use toolrouter::search::hybrid::{self, Fusion, FusionMethod, Vectors};

use super::eval::{DataSet, EvalQuery, recall_at};

/// Texts embedded per call (progress is printed between calls).
const CHUNK: usize = 512;

/// A set's embeddings.
pub struct SetVectors {
    pub tools: Vectors,
    /// One per selected query, in order.
    pub queries: Vec<Vec<f32>>,
    pub tool_texts_per_s: f64,
    pub query_ms: f64,
}

fn embed_all(e: &Embedder, texts: &[String], what: &str) -> Result<(Vec<Vec<f32>>, f64)> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(texts.len());
    for (i, chunk) in texts.chunks(CHUNK).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        out.extend(e.embed(&refs)?);
        if texts.len() > CHUNK {
            eprintln!("  embedded {} of {} {what}", (i * CHUNK + chunk.len()), texts.len());
        }
    }
    Ok((out, start.elapsed().as_secs_f64()))
}

pub fn embed_set(e: &Embedder, set: &DataSet, queries: &[&EvalQuery]) -> Result<SetVectors> {
    let texts: Vec<String> = set.catalog.docs.iter().map(hybrid::tool_text).collect();
    let (tools, tool_secs) = embed_all(e, &texts, "tool texts")?;
    let qtexts: Vec<String> = queries.iter().map(|q| q.text.clone()).collect();
    let (qv, query_secs) = embed_all(e, &qtexts, "queries")?;
    Ok(SetVectors {
        tools: Vectors::new(e.dims(), tools),
        queries: qv,
        tool_texts_per_s: texts.len() as f64 / tool_secs.max(1e-9),
        query_ms: 1e3 * query_secs / qtexts.len().max(1) as f64,
    })
}

/// What fusion needs of one query: both candidate lists and the answer.
#[derive(Debug, Clone)]
pub struct FusionInput {
    pub lexical: Vec<(u32, f32)>,
    pub semantic: Vec<(u32, f32)>,
    pub relevant: Vec<u32>,
}

/// The settings tried: RRF over rank constants and weights, and score mixing over shares.
pub fn grid() -> Vec<Fusion> {
    let mut g = Vec::new();
    for k in [10.0, 30.0, 60.0, 100.0] {
        for weight in [0.5, 0.75, 1.0, 1.5, 2.0, 3.0] {
            g.push(Fusion { method: FusionMethod::Rrf, k, weight, ..Fusion::default() });
        }
    }
    for weight in [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8] {
        g.push(Fusion { method: FusionMethod::Mix, weight, ..Fusion::default() });
    }
    g
}

fn mean_recall(inputs: &[FusionInput], f: &Fusion, k: usize) -> f64 {
    let sum: f64 = inputs
        .iter()
        .map(|q| {
            let ranked: Vec<u32> = hybrid::fuse(&q.lexical[..q.lexical.len().min(f.depth)], &q.semantic[..q.semantic.len().min(f.depth)], f)
                .into_iter()
                .map(|x| x.0)
                .collect();
            recall_at(&ranked, &q.relevant, k)
        })
        .sum();
    100.0 * sum / inputs.len().max(1) as f64
}

/// One held-out set: the settings the other sets chose and what they give here.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub set: String,
    pub chosen: Fusion,
    pub recall_at_10: f64,
    pub recall_at_5: f64,
    /// The best any setting reaches on this set (what tuning on it would report).
    pub best_in_set_r10: f64,
    /// The shipped default's figure on this set.
    pub default_r10: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Loso {
    pub held_out: Vec<HeldOut>,
    /// The setting chosen on all sets together (mean of per-set Recall@10).
    pub all_sets_choice: Fusion,
}

/// Leave-one-set-out over `sets` (name, inputs).
pub fn loso(sets: &[(String, Vec<FusionInput>)]) -> Option<Loso> {
    if sets.len() < 2 {
        return None;
    }
    let grid = grid();
    // r10[setting][set]
    let r10: Vec<Vec<f64>> = grid.iter().map(|f| sets.iter().map(|(_, q)| mean_recall(q, f, 10)).collect()).collect();
    let best_over = |skip: Option<usize>| -> usize {
        let mean = |i: usize| {
            let v: Vec<f64> = r10[i].iter().enumerate().filter(|(s, _)| Some(*s) != skip).map(|(_, r)| *r).collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        // Ties go to the earlier setting of the grid.
        (0..grid.len()).fold(0, |best, i| if mean(i) > mean(best) + 1e-12 { i } else { best })
    };
    let held_out = sets
        .iter()
        .enumerate()
        .map(|(s, (name, inputs))| {
            let chosen = grid[best_over(Some(s))];
            HeldOut {
                set: name.clone(),
                chosen,
                recall_at_10: r10[best_over(Some(s))][s],
                recall_at_5: mean_recall(inputs, &chosen, 5),
                best_in_set_r10: r10.iter().map(|r| r[s]).fold(0.0, f64::max),
                default_r10: mean_recall(inputs, &Fusion::default(), 10),
            }
        })
        .collect();
    Some(Loso { held_out, all_sets_choice: grid[best_over(None)] })
}

/// Plain-text lines of the leave-one-set-out section.
pub fn render(l: &Loso, bm25_r10: &BTreeMap<String, f64>) -> String {
    use std::fmt::Write;
    let mut s = String::from("\nleave-one-set-out fusion (settings chosen on the other sets; R@10 of the held-out set):\n");
    for h in &l.held_out {
        let bm = bm25_r10.get(&h.set).copied().unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            "  {:<16} {:?} k={} w={}  R@10 {:.2} (bm25 {:.2}, {:+.2})  R@5 {:.2}  best in set {:.2}  default {:.2}",
            h.set,
            h.chosen.method,
            h.chosen.k,
            h.chosen.weight,
            h.recall_at_10,
            bm,
            h.recall_at_10 - bm,
            h.recall_at_5,
            h.best_in_set_r10,
            h.default_r10
        );
    }
    let c = l.all_sets_choice;
    let _ = writeln!(s, "  chosen on all sets: {:?} k={} w={}", c.method, c.k, c.weight);
    s
}
