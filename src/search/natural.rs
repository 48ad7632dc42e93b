//! Natural-language ranker (`RANKING_NATURAL`): BM25F over the SPEC §5 searchable fields with
//! identifier splitting, English stemming and stop words, for queries written as requests
//! ("Can you find me recent papers on …") rather than keywords.
//!
//! Everything query-independent (field-length normalisation, term saturation, IDF) is folded
//! into the posting weights at build time, so a query is a sum over the postings of its terms.

mod analyze;

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use self::analyze::Analyzer;
use super::SearchDoc;

/// Weight and length normalisation of one searchable field.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FieldParams {
    /// Multiplies the field's term frequency (0 = field ignored).
    pub weight: f32,
    /// BM25 length normalisation of the field, 0 (none) ..= 1 (full).
    pub b: f32,
}

/// Ranker parameters. `Default` holds the values tuned on the development sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NaturalConfig {
    /// BM25 term-frequency saturation.
    pub k1: f32,
    pub name: FieldParams,
    pub description: FieldParams,
    pub group: FieldParams,
    pub property_names: FieldParams,
    pub schema_descriptions: FieldParams,
    pub additional_search_text: FieldParams,
    /// English (Porter2) stemming of tool text and queries.
    pub stem: bool,
    /// Drop function words (both sides) and request boilerplate (queries).
    pub stop_words: bool,
    /// Weight of the group's own relevance (BM25 over all its tools' text as one document)
    /// added to each of its tools' scores: tools of a server that fits the request as a whole
    /// rise together, even those whose own text says little. 0 = off.
    pub group_prior: f32,
    /// Length normalisation of the group documents.
    pub group_b: f32,
    /// The group prior also applies to tools that match no query term themselves.
    pub group_prior_all: bool,
}

impl Default for NaturalConfig {
    fn default() -> Self {
        let f = |weight, b| FieldParams { weight, b };
        NaturalConfig {
            k1: 1.2,
            name: f(3.0, 0.5),
            description: f(1.0, 0.75),
            group: f(1.5, 0.5),
            property_names: f(0.5, 0.75),
            schema_descriptions: f(0.3, 0.75),
            additional_search_text: f(1.0, 0.75),
            stem: true,
            stop_words: true,
            group_prior: 0.0,
            group_b: 0.75,
            group_prior_all: false,
        }
    }
}

const FIELDS: usize = 6;

impl NaturalConfig {
    /// Field parameters in the order of `field_texts`.
    fn fields(&self) -> [FieldParams; FIELDS] {
        [
            self.name,
            self.description,
            self.group,
            self.property_names,
            self.schema_descriptions,
            self.additional_search_text,
        ]
    }
}

/// The searchable texts of a document in SPEC §5 field order.
fn field_texts(d: &SearchDoc) -> [String; FIELDS] {
    [
        d.name.clone(),
        d.description.clone(),
        d.group.clone(),
        d.property_names.join(" "),
        d.schema_descriptions.join("\n"),
        d.additional_search_text.clone(),
    ]
}

/// Turns postings holding pseudo term frequencies into final BM25 contributions
/// `scale · idf · tf (k1 + 1) / (k1 + tf)`, with `n` documents.
fn finish_bm25(postings: &mut [Vec<(u32, f32)>], n: f32, k1: f32, scale: f32) {
    for list in postings {
        let df = list.len() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        for (_, w) in list.iter_mut() {
            *w = scale * idf * *w * (k1 + 1.0) / (k1 + *w);
        }
    }
}

/// Group-prior postings: each group is one document made of all its tools' field terms
/// (field-weighted counts), length-normalised against the other groups.
fn group_postings(
    fields: &[[Vec<u32>; FIELDS]],
    group_of: &[u32],
    groups: usize,
    params: &[FieldParams; FIELDS],
    cfg: &NaturalConfig,
) -> Vec<Vec<(u32, f32)>> {
    let vocab = fields
        .iter()
        .flatten()
        .flatten()
        .max()
        .map_or(0, |&t| t as usize + 1);
    let mut counts: Vec<HashMap<u32, f32>> = vec![HashMap::new(); groups];
    let mut len = vec![0f32; groups];
    for (doc, doc_fields) in fields.iter().enumerate() {
        let g = group_of[doc] as usize;
        for (f, terms) in doc_fields.iter().enumerate() {
            if params[f].weight > 0.0 {
                len[g] += terms.len() as f32;
                for &t in terms {
                    *counts[g].entry(t).or_default() += params[f].weight;
                }
            }
        }
    }
    let avg = len.iter().sum::<f32>() / groups.max(1) as f32;
    let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab];
    for (g, c) in counts.iter().enumerate() {
        let norm = if avg > 0.0 {
            1.0 - cfg.group_b + cfg.group_b * len[g] / avg
        } else {
            1.0
        };
        let mut entries: Vec<(u32, f32)> = c.iter().map(|(&t, &w)| (t, w / norm)).collect();
        entries.sort_unstable_by_key(|&(t, _)| t);
        for (t, w) in entries {
            postings[t as usize].push((g as u32, w));
        }
    }
    finish_bm25(&mut postings, groups as f32, cfg.k1, cfg.group_prior);
    postings
}

/// Immutable inverted index over one catalog; `Send + Sync`, shared across queries.
pub struct NaturalIndex {
    analyzer: Analyzer,
    vocab: HashMap<String, u32>,
    /// Per term: (doc, final BM25F contribution), docs ascending.
    postings: Vec<Vec<(u32, f32)>>,
    /// Per term: (group, group-prior contribution), groups ascending.
    group_postings: Vec<Vec<(u32, f32)>>,
    group_of: Vec<u32>,
    group_ids: HashMap<String, u32>,
    group_prior_all: bool,
    /// Position of each doc in canonical-name order, the final tie-break.
    canon_rank: Vec<u32>,
    /// Lower-cased local and canonical names → docs, for exact-name queries.
    exact: HashMap<String, Vec<u32>>,
}

impl NaturalIndex {
    pub fn build(docs: &[SearchDoc], cfg: &NaturalConfig) -> Self {
        let analyzer = Analyzer::new(cfg.stem, cfg.stop_words);
        let params = cfg.fields();
        let mut vocab: HashMap<String, u32> = HashMap::new();
        let mut buf = Vec::new();
        let fields: Vec<[Vec<u32>; FIELDS]> = docs
            .iter()
            .map(|d| {
                field_texts(d).map(|text| {
                    analyzer.doc_terms(&text, &mut buf);
                    buf.drain(..)
                        .map(|t| {
                            let next = vocab.len() as u32;
                            *vocab.entry(t).or_insert(next)
                        })
                        .collect()
                })
            })
            .collect();

        let n = docs.len().max(1) as f32;
        let mut avg_len = [0f32; FIELDS];
        for doc in &fields {
            for (f, terms) in doc.iter().enumerate() {
                avg_len[f] += terms.len() as f32 / n;
            }
        }

        // Pseudo term frequency: weighted, length-normalised counts summed over fields.
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab.len()];
        let mut tf: HashMap<u32, f32> = HashMap::new();
        for (doc, doc_fields) in fields.iter().enumerate() {
            tf.clear();
            for (f, terms) in doc_fields.iter().enumerate() {
                let p = params[f];
                let norm = if avg_len[f] > 0.0 {
                    1.0 - p.b + p.b * terms.len() as f32 / avg_len[f]
                } else {
                    1.0
                };
                for &t in terms {
                    *tf.entry(t).or_default() += p.weight / norm;
                }
            }
            let mut entries: Vec<(u32, f32)> = tf.iter().map(|(&t, &w)| (t, w)).collect();
            entries.sort_unstable_by_key(|&(t, _)| t);
            for (t, w) in entries {
                if w > 0.0 {
                    postings[t as usize].push((doc as u32, w));
                }
            }
        }
        finish_bm25(&mut postings, n, cfg.k1, 1.0);

        let mut group_ids: HashMap<String, u32> = HashMap::new();
        let group_of: Vec<u32> = docs
            .iter()
            .map(|d| {
                let next = group_ids.len() as u32;
                *group_ids.entry(d.group.clone()).or_insert(next)
            })
            .collect();
        let group_postings = if cfg.group_prior > 0.0 {
            group_postings(&fields, &group_of, group_ids.len(), &params, cfg)
        } else {
            vec![Vec::new(); vocab.len()]
        };
        let mut order: Vec<u32> = (0..docs.len() as u32).collect();
        order.sort_by(|&a, &b| docs[a as usize].canonical.cmp(&docs[b as usize].canonical));
        let mut canon_rank = vec![0u32; docs.len()];
        for (rank, &doc) in order.iter().enumerate() {
            canon_rank[doc as usize] = rank as u32;
        }
        let mut exact: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, d) in docs.iter().enumerate() {
            for name in [&d.name, &d.canonical] {
                let list = exact.entry(name.to_lowercase()).or_default();
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        NaturalIndex {
            analyzer,
            vocab,
            postings,
            group_postings,
            group_of,
            group_ids,
            group_prior_all: cfg.group_prior_all,
            canon_rank,
            exact,
        }
    }

    /// Ranks the documents for `query`: exact-name matches (query equals a local or canonical
    /// name, trimmed, case-insensitive) first, then by descending score, then by canonical
    /// name ascending. `group` filters first (an unknown group has no candidates). Returns the
    /// top `k` and the number of candidates (documents sharing at least one query term).
    pub fn search(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<(u32, f32)>, usize) {
        let group = match group {
            Some(g) => match self.group_ids.get(g) {
                Some(&id) => Some(id),
                None => return (Vec::new(), 0),
            },
            None => None,
        };
        let mut terms: Vec<u32> = self
            .analyzer
            .query_terms(query)
            .iter()
            .filter_map(|t| self.vocab.get(t).copied())
            .collect();
        // Each distinct term counts once: restating a word does not make it more relevant.
        terms.sort_unstable();
        terms.dedup();

        let mut scores = vec![0f32; self.group_of.len()];
        let mut group_scores = vec![0f32; self.group_ids.len()];
        for &t in &terms {
            for &(doc, w) in &self.postings[t as usize] {
                scores[doc as usize] += w;
            }
            for &(g, w) in &self.group_postings[t as usize] {
                group_scores[g as usize] += w;
            }
        }
        for (doc, s) in scores.iter_mut().enumerate() {
            if *s > 0.0 || self.group_prior_all {
                *s += group_scores[self.group_of[doc] as usize];
            }
        }
        let exact = self
            .exact
            .get(&query.trim().to_lowercase())
            .map_or(&[][..], Vec::as_slice);

        // (doc, exact, score)
        let mut cands: Vec<(u32, bool, f32)> = scores
            .iter()
            .enumerate()
            .filter(|&(doc, &s)| s > 0.0 || exact.contains(&(doc as u32)))
            .filter(|&(doc, _)| group.is_none_or(|g| self.group_of[doc] == g))
            .map(|(doc, &s)| (doc as u32, exact.contains(&(doc as u32)), s))
            .collect();
        let total = cands.len();
        let order = |a: &(u32, bool, f32), b: &(u32, bool, f32)| -> Ordering {
            b.1.cmp(&a.1)
                .then(b.2.total_cmp(&a.2))
                .then(self.canon_rank[a.0 as usize].cmp(&self.canon_rank[b.0 as usize]))
        };
        if k == 0 {
            return (Vec::new(), total);
        }
        if cands.len() > k {
            cands.select_nth_unstable_by(k - 1, order);
            cands.truncate(k);
        }
        cands.sort_unstable_by(order);
        (
            cands.into_iter().map(|(doc, _, s)| (doc, s)).collect(),
            total,
        )
    }
}
