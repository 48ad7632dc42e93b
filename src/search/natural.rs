//! Natural-language ranker (`RANKING_NATURAL`): BM25F over the SPEC §5 searchable fields, for
//! queries written as requests ("Can you find me recent papers on …") rather than keywords.
//!
//! Text is split into words at identifier boundaries (`get_stock_price`, `customerName`,
//! `crm__find`), filler words are dropped and English words stemmed (see `analyze`). On top of
//! per-field BM25F: adjacent-pair (bigram) matches, a bonus for covering the tool's name, a
//! group prior (the tool's whole server fits the request) and one round of pseudo-relevance
//! feedback. Each was kept because it raised recall on the development sets.
//!
//! Everything query-independent (field-length normalisation, saturation, IDF) is folded into
//! the posting weights at build time: a query only sums postings of its terms.

mod analyze;

use super::Map;
use super::top::best_k;
use super::with_scratch;
use std::cell::RefCell;
use std::cmp::Ordering;

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

/// Ranker parameters. `Default` holds the values tuned on the development sets (on one half
/// of each set's queries; see the evaluation harness, `toolrouter-eval --half`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NaturalConfig {
    /// BM25 term-frequency saturation.
    pub k1: f32,
    /// (1) local name.
    pub name: FieldParams,
    /// (2) description.
    pub description: FieldParams,
    /// (3) group identifier.
    pub group: FieldParams,
    /// (4) input property names.
    pub property_names: FieldParams,
    /// (5) descriptions inside the input schema.
    pub schema_descriptions: FieldParams,
    /// (6) `additional_search_text`: operator-chosen words, weighted like the description.
    pub additional_search_text: FieldParams,
    /// English (Porter2) stemming of tool text and queries.
    pub stem: bool,
    /// Drop function words (both sides) and request boilerplate (queries only).
    pub stop_words: bool,
    /// Weight of adjacent query-term pairs that are also adjacent in the name or description.
    pub bigram: f32,
    /// Bonus for the IDF-weighted share of the tool name's terms found in the query.
    pub name_coverage: f32,
    /// Weight of the group's own relevance (BM25 over all its tools' text as one document),
    /// added to each matching tool of the group: tools of a server that fits the request as
    /// a whole rise together. 0 = off.
    pub group_prior: f32,
    /// Length normalisation of the group documents.
    pub group_b: f32,
    /// Pseudo-relevance feedback: the `prf_terms` strongest terms of the `prf_docs` best tools
    /// are added to the query with weight `prf_weight` (relative to the best one). 0 = off.
    pub prf_docs: usize,
    pub prf_terms: usize,
    pub prf_weight: f32,
}

impl Default for NaturalConfig {
    fn default() -> Self {
        let f = |weight, b| FieldParams { weight, b };
        NaturalConfig {
            k1: 1.5,
            name: f(3.0, 0.8),
            description: f(1.0, 0.5),
            group: f(2.5, 0.8),
            property_names: f(1.0, 0.75),
            schema_descriptions: f(0.3, 0.75),
            additional_search_text: f(1.0, 0.5),
            stem: true,
            stop_words: true,
            bigram: 0.25,
            name_coverage: 2.0,
            group_prior: 0.3,
            group_b: 1.0,
            prf_docs: 3,
            prf_terms: 10,
            prf_weight: 0.5,
        }
    }
}

const FIELDS: usize = 6;
/// A query reading at least docs / this many postings scores the docs densely (add, then
/// find who has a score) rather than noting each doc as it turns positive.
const DENSE_FROM: usize = 2;
/// Fields whose word order is meaningful, for bigrams: name and description.
const PHRASE_FIELDS: usize = 2;

impl NaturalConfig {
    /// Field parameters in the order of `field_texts`.
    fn fields(&self) -> [FieldParams; FIELDS] {
        [self.name, self.description, self.group, self.property_names, self.schema_descriptions, self.additional_search_text]
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

/// BM25 IDF, never negative.
fn idf(n: f32, df: usize) -> f32 {
    (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln()
}

/// Turns postings holding pseudo term frequencies into final contributions
/// `scale · idf · tf (k1 + 1) / (k1 + tf)` over `n` documents.
fn finish_bm25<'a>(postings: impl IntoIterator<Item = &'a mut Vec<(u32, f32)>>, n: f32, k1: f32, scale: f32) {
    for list in postings {
        let w_idf = scale * idf(n, list.len());
        for (_, w) in list.iter_mut() {
            *w = w_idf * *w * (k1 + 1.0) / (k1 + *w);
        }
    }
}

/// Appends `(key, value)` pairs of `tf` to `postings[key]` as `(id, value)`, in key order so
/// that the build is deterministic.
fn push_sorted(tf: &Map<u32, f32>, id: u32, postings: &mut [Vec<(u32, f32)>]) {
    let mut entries: Vec<(u32, f32)> = tf.iter().map(|(&t, &w)| (t, w)).collect();
    entries.sort_unstable_by_key(|&(t, _)| t);
    for (t, w) in entries {
        if w > 0.0 {
            postings[t as usize].push((id, w));
        }
    }
}

/// Lists of (id, weight) back to back, one allocation for all: list `i` is
/// `entries[offsets[i]..offsets[i + 1]]`. Most lists are short, and a `Vec` each would cost
/// a header and an allocation apiece.
#[derive(Debug, Default)]
struct Lists {
    offsets: Vec<u32>,
    entries: Vec<(u32, f32)>,
}

impl Lists {
    /// Flattens `lists`, freeing each as it is copied.
    fn from_vecs(lists: Vec<Vec<(u32, f32)>>) -> Self {
        let total: usize = lists.iter().map(Vec::len).sum();
        // Bounded by the catalog's words, which the registry's size limit bounds.
        u32::try_from(total).expect("fewer than 2^32 postings");
        let mut out = Lists { offsets: Vec::with_capacity(lists.len() + 1), entries: Vec::with_capacity(total) };
        out.offsets.push(0);
        for list in lists {
            out.entries.extend_from_slice(&list);
            out.offsets.push(out.entries.len() as u32);
        }
        out
    }

    fn get(&self, i: usize) -> &[(u32, f32)] {
        &self.entries[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    fn heap_bytes(&self) -> usize {
        crate::mem::vec(&self.offsets, self.offsets.capacity()) + crate::mem::vec(&self.entries, self.entries.capacity())
    }
}

/// Immutable inverted index over one catalog; `Send + Sync`, shared by concurrent queries.
pub struct NaturalIndex {
    cfg: NaturalConfig,
    analyzer: Analyzer,
    /// Stemmed term → id.
    vocab: Map<String, u32>,
    /// Lower-case word found in the catalog → its term (None: stop word).
    surface: Map<String, Option<u32>>,
    /// Per term: (doc, BM25F contribution), docs ascending.
    postings: Lists,
    /// Adjacent term pairs, ascending, and per pair (doc, contribution).
    bigram_pairs: Vec<(u32, u32)>,
    bigrams: Lists,
    /// Per term: (group, group-prior contribution).
    group_postings: Lists,
    /// Per doc: (term, contribution), for feedback; empty when feedback is off.
    doc_terms: Lists,
    group_of: Vec<u32>,
    group_ids: Map<String, u32>,
    /// Position of each doc in canonical-name order, the final tie-break.
    canon_rank: Vec<u32>,
    /// Lower-cased local and canonical names → docs, for exact-name queries.
    exact: Map<String, Vec<u32>>,
}

impl NaturalIndex {
    /// Approximate bytes the index owns (`crate::mem`).
    pub fn heap_bytes(&self) -> usize {
        use crate::mem::{table, text, vec};
        table(&self.vocab)
            + self.vocab.keys().map(|k| text(k)).sum::<usize>()
            + table(&self.surface)
            + self.surface.keys().map(|k| text(k)).sum::<usize>()
            + self.postings.heap_bytes()
            + vec(&self.bigram_pairs, self.bigram_pairs.capacity())
            + self.bigrams.heap_bytes()
            + self.group_postings.heap_bytes()
            + self.doc_terms.heap_bytes()
            + vec(&self.group_of, self.group_of.capacity())
            + table(&self.group_ids)
            + self.group_ids.keys().map(|k| text(k)).sum::<usize>()
            + vec(&self.canon_rank, self.canon_rank.capacity())
            + table(&self.exact)
            + self.exact.iter().map(|(k, v)| text(k) + vec(v, v.capacity())).sum::<usize>()
    }

    pub fn build(docs: &[SearchDoc], cfg: &NaturalConfig) -> Self {
        let analyzer = Analyzer::new(cfg.stem, cfg.stop_words);
        let params = cfg.fields();
        let mut vocab: Map<String, u32> = Map::default();
        // Word seen → its term (None: stop word), so that each distinct word is filtered and
        // stemmed once, at build time and for queries.
        let mut surface: Map<String, Option<u32>> = Map::default();
        // fields[doc][field] = the field's terms in text order.
        let mut fields: Vec<[Vec<u32>; FIELDS]> = Vec::with_capacity(docs.len());
        for d in docs {
            fields.push(field_texts(d).map(|text| {
                let mut terms = Vec::new();
                analyze::for_each_word(&text, usize::MAX, |w| {
                    let id = match surface.get(w) {
                        Some(&id) => id,
                        None => {
                            let id = (!analyzer.is_doc_stop(w)).then(|| {
                                let next = vocab.len() as u32;
                                *vocab.entry(analyzer.stem(w)).or_insert(next)
                            });
                            surface.insert(w.to_owned(), id);
                            id
                        }
                    };
                    terms.extend(id);
                });
                terms
            }));
        }
        let n = docs.len().max(1) as f32;

        let mut avg_len = [0f32; FIELDS];
        for doc in &fields {
            for (f, terms) in doc.iter().enumerate() {
                avg_len[f] += terms.len() as f32 / n;
            }
        }
        let norm = |p: FieldParams, len: usize, avg: f32| {
            if avg > 0.0 { 1.0 - p.b + p.b * len as f32 / avg } else { 1.0 }
        };

        // BM25F pseudo term frequency: weighted, length-normalised counts summed over fields.
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab.len()];
        let mut tf: Map<u32, f32> = Map::default();
        for (doc, doc_fields) in fields.iter().enumerate() {
            tf.clear();
            for (f, terms) in doc_fields.iter().enumerate() {
                let w = params[f].weight / norm(params[f], terms.len(), avg_len[f]);
                for &t in terms {
                    *tf.entry(t).or_default() += w;
                }
            }
            push_sorted(&tf, doc as u32, &mut postings);
        }
        let idf: Vec<f32> = postings.iter().map(|l| idf(n, l.len())).collect();
        finish_bm25(&mut postings, n, cfg.k1, 1.0);
        // The name-coverage bonus sums over the query terms found in the name, so it folds
        // into those terms' postings.
        if cfg.name_coverage > 0.0 {
            for (doc, f) in fields.iter().enumerate() {
                let mut names = f[0].clone();
                names.sort_unstable();
                names.dedup();
                let mass: f32 = names.iter().map(|&t| idf[t as usize]).sum();
                for &t in names.iter().filter(|_| mass > 0.0) {
                    let list = &mut postings[t as usize];
                    if let Ok(i) = list.binary_search_by_key(&(doc as u32), |&(d, _)| d) {
                        list[i].1 += cfg.name_coverage * idf[t as usize] / mass;
                    }
                }
            }
        }

        let mut bigrams: Map<(u32, u32), Vec<(u32, f32)>> = Map::default();
        if cfg.bigram > 0.0 {
            let mut pairs: Vec<((u32, u32), f32)> = Vec::new();
            for (doc, doc_fields) in fields.iter().enumerate() {
                pairs.clear();
                for (f, terms) in doc_fields.iter().enumerate().take(PHRASE_FIELDS) {
                    for w in terms.windows(2) {
                        pairs.push(((w[0], w[1]), params[f].weight));
                    }
                }
                pairs.sort_unstable_by_key(|&(p, _)| p);
                for chunk in pairs.chunk_by(|a, b| a.0 == b.0) {
                    let w = chunk.iter().map(|&(_, w)| w).sum();
                    bigrams.entry(chunk[0].0).or_default().push((doc as u32, w));
                }
            }
            finish_bm25(bigrams.values_mut(), n, cfg.k1, cfg.bigram);
        }
        let mut bigrams: Vec<_> = bigrams.into_iter().collect();
        bigrams.sort_unstable_by_key(|&(pair, _)| pair);
        let bigram_pairs = bigrams.iter().map(|&(pair, _)| pair).collect();
        let bigrams = Lists::from_vecs(bigrams.into_iter().map(|(_, list)| list).collect());

        let mut group_ids: Map<String, u32> = Map::default();
        let group_of: Vec<u32> = docs
            .iter()
            .map(|d| {
                let next = group_ids.len() as u32;
                *group_ids.entry(d.group.clone()).or_insert(next)
            })
            .collect();
        let group_postings = if cfg.group_prior > 0.0 {
            group_postings(&fields, &group_of, group_ids.len(), vocab.len(), &params, cfg)
        } else {
            Lists::from_vecs(vec![Vec::new(); vocab.len()])
        };

        let mut doc_terms: Vec<Vec<(u32, f32)>> = vec![Vec::new(); docs.len()];
        if cfg.prf_docs > 0 {
            for (t, list) in postings.iter().enumerate() {
                for &(d, w) in list {
                    doc_terms[d as usize].push((t as u32, w));
                }
            }
        }
        let doc_terms = Lists::from_vecs(doc_terms);
        let postings = Lists::from_vecs(postings);

        let mut order: Vec<u32> = (0..docs.len() as u32).collect();
        order.sort_by(|&a, &b| docs[a as usize].canonical.cmp(&docs[b as usize].canonical));
        let mut canon_rank = vec![0u32; docs.len()];
        for (rank, &doc) in order.iter().enumerate() {
            canon_rank[doc as usize] = rank as u32;
        }
        let mut exact: Map<String, Vec<u32>> = Map::default();
        for (i, d) in docs.iter().enumerate() {
            for name in [&d.name, &d.canonical] {
                let list = exact.entry(name.to_lowercase()).or_default();
                if list.last() != Some(&(i as u32)) {
                    list.push(i as u32);
                }
            }
        }
        NaturalIndex {
            cfg: cfg.clone(),
            analyzer,
            vocab,
            surface,
            postings,
            bigram_pairs,
            bigrams,
            group_postings,
            doc_terms,
            group_of,
            group_ids,
            canon_rank,
            exact,
        }
    }

    /// Ranks the documents for `query`: exact-name matches (the trimmed query equals a local
    /// or canonical name, case-insensitively) first, then by descending score, then by
    /// canonical name ascending (bytewise). `group` filters first; an unknown group has no
    /// candidates. Returns the top `k` as (doc, score) and the number of candidates (exact
    /// matches and documents sharing at least one query term, after the group filter).
    pub fn search(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<(u32, f32)>, usize) {
        self.search_with(query, group, k, None)
    }

    /// [`NaturalIndex::search`], scoring densely or not as `dense` says (None: by how many
    /// postings the query reads). Both ways give the same answer, bit for bit.
    fn search_with(&self, query: &str, group: Option<&str>, k: usize, dense: Option<bool>) -> (Vec<(u32, f32)>, usize) {
        let group = match group.map(|g| self.group_ids.get(g)) {
            Some(None) => return (Vec::new(), 0),
            Some(Some(&id)) => Some(id),
            None => None,
        };
        with_scratch(&SCORES, |acc| {
            acc.fit(self.group_of.len(), self.group_ids.len());
            let found = self.score(acc, query, group, k, dense);
            acc.reset();
            found
        })
    }

    fn score(&self, acc: &mut Scores, query: &str, group: Option<u32>, k: usize, dense: Option<bool>) -> (Vec<(u32, f32)>, usize) {
        let allowed = |doc: u32| group.is_none_or(|g| self.group_of[doc as usize] == g);

        let seq: Vec<Option<u32>> = self
            .analyzer
            .query_words(query)
            .iter()
            .map(|w| match self.surface.get(w) {
                Some(&known) => known,
                None => self.vocab.get(&self.analyzer.stem(w)).copied(),
            })
            .collect();
        let mut pairs: Vec<(u32, u32)> = seq.windows(2).filter_map(|w| Some((w[0]?, w[1]?))).filter(|(a, b)| a != b).collect();
        pairs.sort_unstable();
        pairs.dedup();
        // Each distinct term counts once: restating a word does not make a tool more relevant.
        let mut terms: Vec<u32> = seq.into_iter().flatten().collect();
        terms.sort_unstable();
        terms.dedup();

        let group_scores = &mut acc.group_scores;
        for &t in &terms {
            for &(g, w) in self.group_postings.get(t as usize) {
                group_scores[g as usize] += w;
            }
        }
        // Terms, then pairs: each doc's score is summed in this order, whichever way.
        let lists: Vec<&[(u32, f32)]> = terms
            .iter()
            .map(|&t| self.postings.get(t as usize))
            .chain(pairs.iter().filter_map(|p| self.bigram_pairs.binary_search(p).ok().map(|i| self.bigrams.get(i))))
            .collect();
        let docs = self.group_of.len();
        if dense.unwrap_or_else(|| lists.iter().map(|l| l.len()).sum::<usize>() >= docs / DENSE_FROM) {
            for list in &lists {
                acc.add_dense(list);
            }
            acc.collect_touched(docs);
        } else {
            for list in &lists {
                acc.add_all(list);
            }
        }
        acc.add_group_priors(&self.group_of);
        self.feedback(acc, &terms, &allowed);

        let exact = self.exact.get(&query.trim().to_lowercase()).map_or(&[][..], Vec::as_slice);
        let order = |a: &(u32, bool, f32), b: &(u32, bool, f32)| -> Ordering {
            b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)).then_with(|| self.canon_rank[a.0 as usize].cmp(&self.canon_rank[b.0 as usize]))
        };
        let candidates = acc.touched().iter().chain(exact.iter().filter(|&&d| acc.score[d as usize] == 0.0)).filter(|&&d| allowed(d));
        let (best, total) = best_k(candidates.map(|&d| (d, exact.contains(&d), acc.score[d as usize])), k, order);
        (best.into_iter().map(|(doc, _, s)| (doc, s)).collect(), total)
    }

    /// Pseudo-relevance feedback: adds the strongest other terms of the best allowed docs to
    /// the query, weighted by their strength there (relative to the strongest).
    fn feedback(&self, acc: &mut Scores, terms: &[u32], allowed: &dyn Fn(u32) -> bool) {
        if self.cfg.prf_docs == 0 || self.cfg.prf_weight <= 0.0 {
            return;
        }
        let by_score =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then_with(|| self.canon_rank[a.0 as usize].cmp(&self.canon_rank[b.0 as usize]));
        let candidates = acc.touched().iter().filter(|&&d| allowed(d)).map(|&d| (d, acc.score[d as usize]));
        let (top, _) = best_k(candidates, self.cfg.prf_docs, by_score);
        let Some(&(_, best)) = top.first() else {
            return;
        };
        let mut strength: Map<u32, f32> = Map::default();
        for &(d, s) in &top {
            for &(t, w) in self.doc_terms.get(d as usize) {
                if terms.binary_search(&t).is_err() {
                    *strength.entry(t).or_default() += w * s / best;
                }
            }
        }
        let mut expansion: Vec<(u32, f32)> = strength.into_iter().collect();
        expansion.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        expansion.truncate(self.cfg.prf_terms);
        let Some(&(_, max)) = expansion.first() else {
            return;
        };
        for &(t, e) in &expansion {
            let f = self.cfg.prf_weight * e / max;
            for &(doc, w) in self.postings.get(t as usize) {
                // Only docs the query matched; a select, not a branch (adding 0 keeps a score).
                let s = &mut acc.score[doc as usize];
                *s += if *s > 0.0 { f * w } else { 0.0 };
            }
        }
    }
}

/// Group-prior postings: each group is one document made of all its tools' field terms
/// (field-weighted counts), length-normalised against the other groups.
fn group_postings(
    fields: &[[Vec<u32>; FIELDS]],
    group_of: &[u32],
    groups: usize,
    vocab: usize,
    params: &[FieldParams; FIELDS],
    cfg: &NaturalConfig,
) -> Lists {
    let mut counts: Vec<Map<u32, f32>> = vec![Map::default(); groups];
    let mut len = vec![0f32; groups];
    for (doc, doc_fields) in fields.iter().enumerate() {
        let g = group_of[doc] as usize;
        for (f, terms) in doc_fields.iter().enumerate().filter(|(f, _)| params[*f].weight > 0.0) {
            len[g] += terms.len() as f32;
            for &t in terms {
                *counts[g].entry(t).or_default() += params[f].weight;
            }
        }
    }
    let avg = len.iter().sum::<f32>() / groups.max(1) as f32;
    let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab];
    for (g, c) in counts.iter_mut().enumerate() {
        let norm = if avg > 0.0 { 1.0 - cfg.group_b + cfg.group_b * len[g] / avg } else { 1.0 };
        c.values_mut().for_each(|w| *w /= norm);
        push_sorted(c, g as u32, &mut postings);
    }
    finish_bm25(&mut postings, groups as f32, cfg.k1, cfg.group_prior);
    Lists::from_vecs(postings)
}

thread_local! {
    /// Per-thread accumulator, reused across queries and indexes: a query costs the postings
    /// it reads, not an allocation (and page faults) the size of the catalog.
    static SCORES: RefCell<Scores> = RefCell::default();
}

/// Per-query score accumulator: dense scores plus the docs that have one, and the groups'
/// prior scores. Between queries every score is zero and no doc is touched.
#[derive(Default)]
struct Scores {
    score: Vec<f32>,
    /// The docs with a score are `touched[..len]`; one slot more than the docs.
    touched: Vec<u32>,
    len: usize,
    group_scores: Vec<f32>,
    /// Groups in use: the current index's.
    groups: usize,
}

impl Scores {
    fn fit(&mut self, docs: usize, groups: usize) {
        if self.score.len() < docs {
            self.score.resize(docs, 0.0);
            self.touched.resize(docs + 1, 0);
        }
        if self.group_scores.len() < groups {
            self.group_scores.resize(groups, 0.0);
        }
        self.groups = groups;
    }

    fn reset(&mut self) {
        for &doc in &self.touched[..self.len] {
            self.score[doc as usize] = 0.0;
        }
        self.len = 0;
        self.group_scores[..self.groups].fill(0.0);
    }

    /// Adds a list's weights. Whether a doc turns positive is data, not a branch: a first
    /// touch is unpredictable, and a mispredicted branch per posting cost more than the add.
    fn add_all(&mut self, postings: &[(u32, f32)]) {
        let (score, touched) = (&mut self.score, &mut self.touched);
        let mut len = self.len;
        for &(doc, w) in postings {
            let s = &mut score[doc as usize];
            // Contributions are never negative, so a doc turns positive at most once: `len`
            // stays below the docs' count, and `touched` has one spare slot to write into.
            let was_zero = *s == 0.0;
            *s += w;
            touched[len] = doc;
            len += usize::from(was_zero & (*s > 0.0));
        }
        self.len = len;
    }

    /// Adds a list's weights without noting which docs turn positive ([`Scores::collect_touched`]
    /// does, once, after the last list): for queries that read postings of a good part of
    /// the catalog.
    fn add_dense(&mut self, postings: &[(u32, f32)]) {
        for &(doc, w) in postings {
            self.score[doc as usize] += w;
        }
    }

    /// Notes the docs of `0..docs` with a score, after [`Scores::add_dense`] onto a clean slate.
    fn collect_touched(&mut self, docs: usize) {
        debug_assert_eq!(self.len, 0);
        let mut len = 0;
        for (doc, &s) in self.score[..docs].iter().enumerate() {
            self.touched[len] = doc as u32;
            len += usize::from(s > 0.0);
        }
        self.len = len;
    }

    /// Adds to each doc with a score its group's prior score.
    fn add_group_priors(&mut self, group_of: &[u32]) {
        for &doc in &self.touched[..self.len] {
            self.score[doc as usize] += self.group_scores[group_of[doc as usize] as usize];
        }
    }

    /// Docs with a score.
    fn touched(&self) -> &[u32] {
        &self.touched[..self.len]
    }
}

#[cfg(test)]
mod tests;
