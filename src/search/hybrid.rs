//! Hybrid ranking (`RANKING_NATURAL` with an embedding model): the lexical natural ranker's
//! list fused with the tools nearest to the query in embedding space.
//!
//! The fusion and its parameters were chosen by leave-one-set-out evaluation over the
//! development sets (`toolrouter-eval --embedding-model DIR` prints the figures): every
//! parameter is the one that did best on the other sets, for each set held out in turn.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::SearchDoc;
use super::embed::dot;

/// How the two lists are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FusionMethod {
    /// Reciprocal rank fusion: `1/(k + lexical rank) + weight/(k + semantic rank)`.
    Rrf,
    /// Normalized score mixing: `(1 - weight)·lexical/best lexical + weight·cosine rescaled
    /// to 0..1 between the deepest candidate and the best`.
    Mix,
}

/// Fusion parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Fusion {
    pub method: FusionMethod,
    /// RRF rank constant.
    pub k: f32,
    /// Weight of the semantic list (RRF: relative to the lexical list's 1; mix: share).
    pub weight: f32,
    /// Candidates taken from each list.
    pub depth: usize,
}

impl Default for Fusion {
    fn default() -> Self {
        // Leave-one-set-out over the development sets chose score mixing with 0.4-0.5 of
        // the weight on embeddings in every fold (RRF at any k and weight did worse on every
        // held-out set); 0.4 is the choice on all sets together.
        Fusion { method: FusionMethod::Mix, k: 60.0, weight: 0.4, depth: 50 }
    }
}

/// The text of a tool that is embedded: its words as a person would read them (identifier
/// separators as spaces), group, name and description; the schema is left to the lexical
/// ranker.
pub fn tool_text(d: &SearchDoc) -> String {
    let words = |s: &str| s.replace(['_', '-', '.', '/'], " ");
    let mut text = format!("{}: {}", words(&d.name), d.description.trim());
    if !d.group.is_empty() {
        text = format!("{} / {text}", words(&d.group));
    }
    if !d.additional_search_text.is_empty() {
        text.push(' ');
        text.push_str(d.additional_search_text.trim());
    }
    text
}

/// The unit vectors of a version's tools, one per document, in document order.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    dims: usize,
    data: Vec<f32>,
}

impl Vectors {
    /// `rows` must all be `dims` long.
    pub fn new(dims: usize, rows: impl IntoIterator<Item = Vec<f32>>) -> Vectors {
        let mut data = Vec::new();
        for r in rows {
            assert_eq!(r.len(), dims, "embedding of the wrong length");
            data.extend(r);
        }
        Vectors { dims, data }
    }

    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dims).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<f32>()
    }

    /// The `depth` documents most similar to `query` among those `keep` accepts, best
    /// first (ties: lower document number first).
    pub fn nearest(&self, query: &[f32], depth: usize, keep: impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        if query.len() != self.dims || depth == 0 {
            return Vec::new();
        }
        let scored = (0u32..).zip(self.data.chunks_exact(self.dims)).filter(|&(i, _)| keep(i)).map(|(i, v)| (i, dot(v, query)));
        let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        super::top::best_k(scored, depth, by_score).0
    }
}

/// Fuses a lexical list (best first, with scores) and a semantic list (best first, with
/// cosines) into one, best first; ties fall to the lexical order, then the document number.
pub fn fuse(lexical: &[(u32, f32)], semantic: &[(u32, f32)], p: &Fusion) -> Vec<(u32, f32)> {
    let mut scores: Vec<(u32, f32, usize)> = Vec::with_capacity(lexical.len() + semantic.len());
    let mut add = |doc: u32, s: f32, lex_rank: usize| match scores.iter_mut().find(|(d, _, _)| *d == doc) {
        Some(e) => {
            e.1 += s;
            e.2 = e.2.min(lex_rank);
        }
        None => scores.push((doc, s, lex_rank)),
    };
    match p.method {
        FusionMethod::Rrf => {
            for (r, &(d, _)) in lexical.iter().enumerate() {
                add(d, 1.0 / (p.k + r as f32 + 1.0), r);
            }
            for (r, &(d, _)) in semantic.iter().enumerate() {
                add(d, p.weight / (p.k + r as f32 + 1.0), usize::MAX);
            }
        }
        FusionMethod::Mix => {
            let best = lexical.first().map_or(0.0, |x| x.1);
            for (r, &(d, s)) in lexical.iter().enumerate() {
                let s = if best > 0.0 { s / best } else { 0.0 };
                add(d, (1.0 - p.weight) * s, r);
            }
            let hi = semantic.first().map_or(0.0, |x| x.1);
            let lo = semantic.last().map_or(0.0, |x| x.1);
            for &(d, c) in semantic {
                let s = if hi > lo { (c - lo) / (hi - lo) } else { 1.0 };
                add(d, p.weight * s, usize::MAX);
            }
        }
    }
    scores.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    scores.into_iter().map(|(d, s, _)| (d, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = dot(v, v).sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn nearest_is_best_first_with_ties_to_the_lower_document() {
        let vs = Vectors::new(2, [unit(&[1.0, 0.0]), unit(&[0.0, 1.0]), unit(&[1.0, 1.0]), unit(&[1.0, 0.0])]);
        let q = unit(&[1.0, 0.1]);
        let top: Vec<u32> = vs.nearest(&q, 3, |_| true).iter().map(|x| x.0).collect();
        assert_eq!(top, vec![0, 3, 2]);
        let only_odd: Vec<u32> = vs.nearest(&q, 10, |d| d % 2 == 1).iter().map(|x| x.0).collect();
        assert_eq!(only_odd, vec![3, 1]);
        assert!(vs.nearest(&[1.0], 3, |_| true).is_empty(), "a query of another length matches nothing");
    }

    #[test]
    fn rrf_puts_a_document_both_lists_agree_on_first() {
        let rrf = Fusion { method: FusionMethod::Rrf, k: 60.0, weight: 1.0, ..Fusion::default() };
        let lexical = [(7, 9.0), (3, 5.0), (1, 1.0)];
        let semantic = [(3, 0.9), (8, 0.8), (9, 0.7)];
        let fused: Vec<u32> = fuse(&lexical, &semantic, &rrf).iter().map(|x| x.0).collect();
        assert_eq!(fused, vec![3, 7, 8, 1, 9]);
        // Without the semantic list the lexical order stands, whatever the method.
        for f in [rrf, Fusion::default()] {
            let alone: Vec<u32> = fuse(&lexical, &[], &f).iter().map(|x| x.0).collect();
            assert_eq!(alone, vec![7, 3, 1]);
        }
    }

    #[test]
    fn mixing_weights_the_lists_by_share() {
        let lexical = [(1, 10.0), (2, 5.0)];
        let semantic = [(2, 0.9), (1, 0.5)];
        let lex_heavy = Fusion { method: FusionMethod::Mix, weight: 0.1, ..Fusion::default() };
        let sem_heavy = Fusion { method: FusionMethod::Mix, weight: 0.9, ..Fusion::default() };
        assert_eq!(fuse(&lexical, &semantic, &lex_heavy)[0].0, 1);
        assert_eq!(fuse(&lexical, &semantic, &sem_heavy)[0].0, 2);
    }

    #[test]
    fn the_embedded_text_reads_like_words() {
        let d =
            SearchDoc { name: "get_stock_price".into(), description: "Latest price. ".into(), group: "my-finance".into(), ..SearchDoc::default() };
        assert_eq!(tool_text(&d), "my finance / get stock price: Latest price.");
    }
}
