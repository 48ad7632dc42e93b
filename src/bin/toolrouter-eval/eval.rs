//! This file is long because the harness is one pipeline (load sets, build catalogs, rank with
//! each ranker, score, report) that reads best in one place.
//!
//! Retrieval evaluation harness (`toolrouter-eval`): loads the labelled tool catalogs
//! (`tools.jsonl` + `queries.jsonl` per set; sets without queries are skipped), builds each
//! catalog as toolrouter would see it (SPEC §3 names, see `build_catalog`), and measures the
//! SPEC §5 keyword ranking, the natural-language ranker and a BM25 baseline on the same
//! queries: Recall@1/5/10 (share of a query's relevant tools in the top k, averaged over
//! queries), nDCG@10 (binary relevance) and per-query latency (p50/p99), per set and per
//! `split`, plus the issue-7 targets (`check_targets`).
//!
//! Retrieval is always over the whole catalog ("pooled"): StableToolBench queries carry a
//! `candidate_pool` (the tools of their original task), which is ignored on purpose, since
//! toolrouter searches a definition's whole catalog.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use toolrouter::search::SearchDoc;
use toolrouter::search::embed::Embedder;
use toolrouter::search::hybrid::{self, Fusion, Vectors};
use toolrouter::search::natural::{NaturalConfig, NaturalIndex};

use super::hybrid::{FusionInput, Loso};

// ---- Adapter to the SPEC §5 modules (the only place the harness touches them). ----
use toolrouter::search::keyword::KeywordIndex;

/// The §5 keyword leg: top `k` docs of the fully ranked candidate list.
fn keyword_top(index: &KeywordIndex, query: &str, k: usize) -> Vec<u32> {
    index.search_top(query, None, k).0.iter().map(|h| h.doc).collect()
}
// ---- End of adapter. ----

/// One line of `tools.jsonl`.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolRecord {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub domain: String,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub input_schema: Value,
}

/// One line of `queries.jsonl` (other fields, such as `candidate_pool`, are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct QueryRecord {
    pub id: String,
    pub text: String,
    pub relevant: Vec<String>,
    #[serde(default)]
    pub split: String,
}

/// A catalog as toolrouter sees it: sanitized groups and names, with the dataset ids kept.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub docs: Vec<SearchDoc>,
    /// Dataset tool id of each doc.
    pub ids: Vec<String>,
}

/// A query with its relevant tools resolved to doc numbers.
#[derive(Debug, Clone)]
pub struct EvalQuery {
    pub id: String,
    pub text: String,
    pub split: String,
    pub relevant: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct DataSet {
    pub name: String,
    pub catalog: Catalog,
    pub queries: Vec<EvalQuery>,
    /// Relevant ids that name no tool of the catalog (dropped).
    pub unknown_relevant: usize,
}

/// SPEC §3 group identifier for a dataset group: other characters become `_` (one per run),
/// no `__`, starts with an ASCII letter (else prefixed with `g`), at most 32 characters.
pub fn sanitize_group(raw: &str) -> String {
    let mut s = identifier_chars(raw);
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s.insert(0, 'g');
    }
    s.truncate(32);
    s
}

/// SPEC §3 local name for a dataset tool name: other characters become `_` (one per run),
/// 1–64 characters.
pub fn sanitize_local(raw: &str) -> String {
    let mut s = identifier_chars(raw);
    if s.is_empty() {
        s.push_str("tool");
    }
    s.truncate(64);
    s
}

/// Keeps `[A-Za-z0-9_-]`; each run of other characters between kept ones becomes one `_`.
fn identifier_chars(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut gap = false;
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

/// SPEC §3 canonical name (the catalog's own rule).
pub use toolrouter::catalog::names::canonical_name;

/// Makes `base` distinct from every name in `taken` by appending `-2`, `-3`, … (shortening
/// the base to stay within `max` characters), and records the result.
fn unique(base: String, max: usize, taken: &mut HashSet<String>) -> String {
    if taken.insert(base.clone()) {
        return base;
    }
    // Bounded: at most `taken.len()` suffixes can already be in use.
    for n in 2..=taken.len() + 2 {
        let suffix = format!("-{n}");
        let mut name = base.clone();
        name.truncate(max - suffix.len());
        name.push_str(&suffix);
        if taken.insert(name.clone()) {
            return name;
        }
    }
    unreachable!("a free suffix exists among taken.len() + 1 candidates")
}

/// Registers the set as toolrouter would: an agent definition with one client source per
/// group (group = `group`, else `domain`, else `default`; names sanitized to SPEC §3 and made
/// unique), validated and compiled like any version. A schema the validator refuses is
/// replaced by `{"type":"object"}` (the tool stays searchable by name and description).
pub fn build_catalog(tools: &[ToolRecord]) -> Catalog {
    use toolrouter::catalog::{self as cat, AgentDefinition, ClientSource, SourceKind, ToolDeclaration, ToolGroup, ToolSource};
    let mut group_names: HashMap<String, String> = HashMap::new();
    let mut taken_groups = HashSet::new();
    let mut locals: HashMap<String, HashSet<String>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut by_group: HashMap<String, Vec<ToolDeclaration>> = HashMap::new();
    let mut ids: HashMap<String, String> = HashMap::new();
    for t in tools {
        let raw_group = match t.group.as_deref() {
            Some(g) if !g.trim().is_empty() => g,
            _ if !t.domain.trim().is_empty() => &t.domain,
            _ => "default",
        };
        let group = group_names.entry(raw_group.to_owned()).or_insert_with(|| unique(sanitize_group(raw_group), 32, &mut taken_groups)).clone();
        let local = unique(sanitize_local(&t.name), 64, locals.entry(group.clone()).or_default());
        let schema = match &t.input_schema {
            Value::Object(_) if cat::schema::check_input(&t.input_schema).is_ok() => t.input_schema.to_string(),
            _ => String::new(),
        };
        let mut description = t.description.clone();
        if description.chars().count() > cat::validate::MAX_TOOL_DESCRIPTION {
            description = description.chars().take(cat::validate::MAX_TOOL_DESCRIPTION).collect();
        }
        ids.insert(canonical_name(&group, &local), t.id.clone());
        if !by_group.contains_key(&group) {
            order.push(group.clone());
        }
        by_group.entry(group).or_default().push(ToolDeclaration { name: local, description, input_schema: schema, ..Default::default() });
    }
    let mut def = AgentDefinition::default();
    for g in order {
        let id = format!("src-{g}");
        def.groups.insert(g.clone(), ToolGroup { description: format!("{g} tools"), source_ids: vec![id.clone()] });
        let tools = by_group.remove(&g).unwrap_or_default();
        def.sources.push(ToolSource { id, kind: SourceKind::Client(ClientSource { tools }), ..Default::default() });
    }
    if let Err(v) = cat::validate::validate(&def) {
        // Sanitizing keeps every rule; a violation here is a harness bug worth seeing.
        eprintln!("warning: the evaluation definition breaks {} rule(s), first: {} {}", v.len(), v[0].field, v[0].description);
    }
    let compiled = cat::Catalog::compile(&def, &Default::default());
    let docs = compiled.search_docs();
    let ids = docs.iter().map(|d| ids.get(&d.canonical).cloned().unwrap_or_default()).collect();
    Catalog { docs, ids }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1)))
        .collect()
}

/// Loads one set directory; `None` when it has no `queries.jsonl` (catalog-only sets).
pub fn load_set(dir: &Path) -> Result<Option<DataSet>> {
    let queries_path = dir.join("queries.jsonl");
    if !queries_path.exists() {
        return Ok(None);
    }
    let tools: Vec<ToolRecord> = read_jsonl(&dir.join("tools.jsonl"))?;
    let records: Vec<QueryRecord> = read_jsonl(&queries_path)?;
    let catalog = build_catalog(&tools);
    let by_id: HashMap<&str, u32> = catalog.ids.iter().enumerate().map(|(i, id)| (id.as_str(), i as u32)).collect();
    let mut unknown_relevant = 0;
    let mut queries = Vec::with_capacity(records.len());
    for q in records {
        let mut relevant = Vec::new();
        for id in &q.relevant {
            match by_id.get(id.as_str()) {
                Some(&doc) if !relevant.contains(&doc) => relevant.push(doc),
                Some(_) => {}
                None => unknown_relevant += 1,
            }
        }
        // A query without a known relevant tool has no recall to measure.
        if !relevant.is_empty() {
            queries.push(EvalQuery { id: q.id, text: q.text, split: q.split, relevant });
        }
    }
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(Some(DataSet { name, catalog, queries, unknown_relevant }))
}

/// Loads every set under `root` that has queries (sorted by name), or only the named ones.
pub fn load_sets(root: &Path, only: Option<&[String]>) -> Result<Vec<DataSet>> {
    let mut dirs: Vec<_> = fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut sets = Vec::new();
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if only.is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        if let Some(set) = load_set(&dir)? {
            sets.push(set);
        }
    }
    if let Some(o) = only {
        for want in o {
            if !sets.iter().any(|s| &s.name == want) {
                bail!("no set with queries named {want:?} under {}", root.display());
            }
        }
    }
    Ok(sets)
}

/// Share of `relevant` found in the first `k` of `ranked`.
pub fn recall_at(ranked: &[u32], relevant: &[u32], k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|d| relevant.contains(d)).count();
    found as f64 / relevant.len() as f64
}

/// nDCG@k with binary relevance.
pub fn ndcg_at(ranked: &[u32], relevant: &[u32], k: usize) -> f64 {
    let gain = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = ranked.iter().take(k).enumerate().filter(|(_, d)| relevant.contains(d)).map(|(i, _)| gain(i)).sum();
    let ideal: f64 = (0..relevant.len().min(k)).map(gain).sum();
    // An empty float sum is -0.0; report a plain 0.
    if dcg > 0.0 { dcg / ideal } else { 0.0 }
}

/// Okapi BM25 baseline, set up like the README reference figures (bm25s): one bag of words
/// over name, group, description, parameter names and parameter descriptions; words split at
/// non-alphanumerics and camelCase boundaries, lower-cased, at least 2 characters, Lucene's 33
/// English stop words removed; no stemming and no field weights. IDF is the non-negative
/// `ln(1 + (N - df + 0.5) / (df + 0.5))` (Lucene's); repeated query words count each time.
/// Without the identifier splitting and the stop words it lands ~8 points of Recall@10 below
/// the reference on StableToolBench.
pub struct Bm25 {
    vocab: HashMap<String, u32>,
    /// Per term: (doc, BM25 weight without IDF), docs ascending.
    postings: Vec<Vec<(u32, f32)>>,
    idf: Vec<f32>,
    canon_rank: Vec<u32>,
}

pub const BM25_K1: f32 = 1.2;
pub const BM25_B: f32 = 0.75;

/// Lucene's English stop words (also bm25s's `en` list). Sorted (binary search).
const BM25_STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that",
    "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// Lower-cased words of `text`, split at non-alphanumerics and at lower→Upper
/// (`customerName`), acronym→word (`HTTPServer`) and digit→Upper (`v2Api`) boundaries.
fn identifier_words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let boundary = !word.is_empty()
            && c.is_uppercase()
            && (chars[i - 1].is_lowercase()
                || chars[i - 1].is_numeric()
                || (chars[i - 1].is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
        if (!c.is_alphanumeric() || boundary) && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn bm25_tokens(text: &str) -> impl Iterator<Item = String> {
    identifier_words(text).into_iter().filter(|w| w.chars().nth(1).is_some() && BM25_STOP_WORDS.binary_search(&w.as_str()).is_err())
}

impl Bm25 {
    pub fn build(docs: &[SearchDoc]) -> Self {
        let mut vocab: HashMap<String, u32> = HashMap::new();
        let bags: Vec<Vec<u32>> = docs
            .iter()
            .map(|d| {
                let text = [d.name.as_str(), &d.group, &d.description, &d.property_names.join(" "), &d.schema_descriptions.join(" ")].join(" ");
                bm25_tokens(&text)
                    .map(|t| {
                        let next = vocab.len() as u32;
                        *vocab.entry(t).or_insert(next)
                    })
                    .collect()
            })
            .collect();
        let n = docs.len().max(1) as f32;
        let avg = bags.iter().map(Vec::len).sum::<usize>() as f32 / n;
        let mut postings: Vec<Vec<(u32, f32)>> = vec![Vec::new(); vocab.len()];
        let mut tf: BTreeMap<u32, f32> = BTreeMap::new();
        for (doc, bag) in bags.iter().enumerate() {
            tf.clear();
            for &t in bag {
                *tf.entry(t).or_default() += 1.0;
            }
            let norm = 1.0 - BM25_B + BM25_B * bag.len() as f32 / avg.max(f32::MIN_POSITIVE);
            for (&t, &f) in &tf {
                let w = f * (BM25_K1 + 1.0) / (f + BM25_K1 * norm);
                postings[t as usize].push((doc as u32, w));
            }
        }
        let idf = postings
            .iter()
            .map(|p| {
                let df = p.len() as f32;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        Bm25 { vocab, postings, idf, canon_rank: canonical_ranks(docs) }
    }

    /// Top `k` docs by score, ties by canonical name.
    pub fn top(&self, query: &str, k: usize) -> Vec<u32> {
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for t in bm25_tokens(query) {
            if let Some(&id) = self.vocab.get(&t) {
                for &(doc, w) in &self.postings[id as usize] {
                    *scores.entry(doc).or_default() += self.idf[id as usize] * w;
                }
            }
        }
        let mut ranked: Vec<(u32, f32)> = scores.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(self.canon_rank[a.0 as usize].cmp(&self.canon_rank[b.0 as usize])));
        ranked.into_iter().take(k).map(|(d, _)| d).collect()
    }
}

fn canonical_ranks(docs: &[SearchDoc]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..docs.len() as u32).collect();
    order.sort_by(|&a, &b| docs[a as usize].canonical.cmp(&docs[b as usize].canonical));
    let mut rank = vec![0u32; docs.len()];
    for (r, &d) in order.iter().enumerate() {
        rank[d as usize] = r as u32;
    }
    rank
}

/// The rankers compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ranker {
    /// SPEC §5 keyword ranking.
    Keyword,
    /// The natural-language ranker.
    Natural,
    /// The BM25 baseline.
    Bm25,
    /// The natural ranker fused with embedding similarity (needs a model).
    Hybrid,
    /// Embedding similarity alone (needs a model).
    Embedding,
}

impl Ranker {
    pub const ALL: [Ranker; 3] = [Ranker::Keyword, Ranker::Natural, Ranker::Bm25];

    pub fn name(self) -> &'static str {
        match self {
            Ranker::Keyword => "keyword",
            Ranker::Natural => "natural",
            Ranker::Bm25 => "bm25",
            Ranker::Hybrid => "hybrid",
            Ranker::Embedding => "embedding",
        }
    }
}

/// Which half of the queries to evaluate (split by a hash of the query id), for checking that
/// settings tuned on one half hold on the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Half {
    A,
    B,
}

fn half_of(id: &str) -> Half {
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    if h & 1 == 0 { Half::A } else { Half::B }
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Evaluate at most this many queries per set, evenly spaced through the file.
    pub max_queries: Option<usize>,
    pub half: Option<Half>,
    pub natural: NaturalConfig,
    /// Rankers to run (targets need natural and bm25).
    pub rankers: Vec<Ranker>,
    /// Keep each query's top 10 per ranker in the report.
    pub per_query: bool,
    /// The embedding model for the hybrid and embedding rankers.
    pub embedder: Option<std::sync::Arc<Embedder>>,
    pub fusion: Fusion,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            max_queries: None,
            half: None,
            natural: NaturalConfig::default(),
            rankers: Ranker::ALL.to_vec(),
            per_query: false,
            embedder: None,
            fusion: Fusion::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RankerMetrics {
    pub ranker: String,
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub ndcg_at_10: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Metrics of one slice of a set's queries: `all`, or one `split` value.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub split: String,
    pub queries: usize,
    pub rankers: Vec<RankerMetrics>,
}

impl Row {
    pub fn ranker(&self, name: &str) -> Option<&RankerMetrics> {
        self.rankers.iter().find(|r| r.ranker == name)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SetReport {
    pub set: String,
    pub tools: usize,
    pub unknown_relevant: usize,
    /// Index build time per ranker, milliseconds.
    pub build_ms: BTreeMap<String, f64>,
    /// `all` first, then one row per split (when the set has several).
    pub rows: Vec<Row>,
    /// With `per_query`: every query's results.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<QueryResult>,
    /// With a model: embedding speed on this set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingStats>,
    /// With a model: both candidate lists of every query, for the leave-one-set-out fusion.
    #[serde(skip)]
    pub fusion_inputs: Vec<FusionInput>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingStats {
    pub tool_texts_per_s: f64,
    /// Mean time to embed one query (batched as the harness does).
    pub query_ms: f64,
}

/// One query's results (dataset tool ids, best first), Recall@10 and latency per ranker.
#[derive(Debug, Clone, Serialize)]
pub struct QueryResult {
    pub id: String,
    pub split: String,
    pub relevant: Vec<String>,
    pub top: BTreeMap<String, Vec<String>>,
    pub recall_at_10: BTreeMap<String, f64>,
    pub micros: BTreeMap<String, f64>,
}

/// Per-query outcome of one ranker.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    r1: f64,
    r5: f64,
    r10: f64,
    ndcg: f64,
    micros: f64,
}

fn outcome(ranked: &[u32], relevant: &[u32], micros: f64) -> Outcome {
    Outcome {
        r1: recall_at(ranked, relevant, 1),
        r5: recall_at(ranked, relevant, 5),
        r10: recall_at(ranked, relevant, 10),
        ndcg: ndcg_at(ranked, relevant, 10),
        micros,
    }
}

/// Nearest-rank percentile of a non-empty sorted slice.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn summarize(ranker: &str, outcomes: &[&Outcome]) -> RankerMetrics {
    let n = outcomes.len().max(1) as f64;
    let mean = |f: fn(&Outcome) -> f64| 100.0 * outcomes.iter().map(|o| f(o)).sum::<f64>() / n;
    let mut micros: Vec<f64> = outcomes.iter().map(|o| o.micros).collect();
    micros.sort_by(f64::total_cmp);
    let (p50_us, p99_us) = if micros.is_empty() { (0.0, 0.0) } else { (percentile(&micros, 0.5), percentile(&micros, 0.99)) };
    RankerMetrics {
        ranker: ranker.to_owned(),
        recall_at_1: mean(|o| o.r1),
        recall_at_5: mean(|o| o.r5),
        recall_at_10: mean(|o| o.r10),
        ndcg_at_10: mean(|o| o.ndcg),
        p50_us,
        p99_us,
    }
}

/// Each query runs this many times per ranker; its latency is the median run, so that one
/// preemption by a neighbouring process does not count as the ranker's tail latency.
const TIMING_RUNS: usize = 3;

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64() * 1e6)
}

/// The queries of `set` selected by `opts` (half, then evenly spaced sample).
pub fn selected<'a>(set: &'a DataSet, opts: &EvalOptions) -> Vec<&'a EvalQuery> {
    let pool: Vec<&EvalQuery> = set.queries.iter().filter(|q| opts.half.is_none_or(|h| half_of(&q.id) == h)).collect();
    match opts.max_queries {
        Some(m) if m < pool.len() => (0..m).map(|i| pool[i * pool.len() / m]).collect(),
        _ => pool,
    }
}

/// A built ranker: top-k doc numbers for a query over the whole catalog.
#[allow(clippy::large_enum_variant)] // one per ranker per run, never moved in a loop
enum Built<'a> {
    Keyword(KeywordIndex),
    Natural(Box<NaturalIndex>),
    Bm25(Bm25),
    Hybrid(Box<NaturalIndex>, &'a Vectors, Fusion),
    Embedding(&'a Vectors),
}

impl<'a> Built<'a> {
    /// `None` for a ranker that needs embeddings when there are none.
    fn build(ranker: Ranker, docs: &[SearchDoc], opts: &EvalOptions, vectors: Option<&'a Vectors>) -> Option<Self> {
        Some(match ranker {
            Ranker::Keyword => Built::Keyword(KeywordIndex::build(docs)),
            Ranker::Natural => Built::Natural(Box::new(NaturalIndex::build(docs, &opts.natural))),
            Ranker::Bm25 => Built::Bm25(Bm25::build(docs)),
            Ranker::Hybrid => Built::Hybrid(Box::new(NaturalIndex::build(docs, &opts.natural)), vectors?, opts.fusion),
            Ranker::Embedding => Built::Embedding(vectors?),
        })
    }

    /// Top `k`; `qv` is the query's embedding (hybrid and embedding rankers).
    fn top(&self, query: &str, qv: &[f32], k: usize) -> Vec<u32> {
        match self {
            Built::Keyword(i) => keyword_top(i, query, k),
            Built::Natural(i) => i.search(query, None, k).0.into_iter().map(|(d, _)| d).collect(),
            Built::Bm25(i) => i.top(query, k),
            Built::Hybrid(i, v, f) => {
                let lexical = i.search(query, None, f.depth).0;
                let semantic = v.nearest(qv, f.depth, |_| true);
                hybrid::fuse(&lexical, &semantic, f).into_iter().take(k).map(|(d, _)| d).collect()
            }
            Built::Embedding(v) => v.nearest(qv, k, |_| true).into_iter().map(|(d, _)| d).collect(),
        }
    }
}

/// Runs every selected query of `set` through the chosen rankers.
pub fn evaluate(set: &DataSet, opts: &EvalOptions) -> Result<SetReport> {
    const K: usize = 10;
    let docs = &set.catalog.docs;
    let queries = selected(set, opts);
    let vectors = match &opts.embedder {
        Some(e) => Some(super::hybrid::embed_set(e, set, &queries)?),
        None => None,
    };
    let no_vector: Vec<f32> = Vec::new();
    let qv = |i: usize| vectors.as_ref().map_or(no_vector.as_slice(), |v| v.queries[i].as_slice());
    let mut build_ms = BTreeMap::new();
    // outcomes[ranker][query], tops[ranker][query]
    let mut outcomes: Vec<Vec<Outcome>> = Vec::new();
    let mut tops: Vec<Vec<Vec<u32>>> = Vec::new();
    let rankers: Vec<Ranker> =
        opts.rankers.iter().copied().filter(|r| vectors.is_some() || !matches!(r, Ranker::Hybrid | Ranker::Embedding)).collect();
    for &ranker in &rankers {
        let (built, t) = timed(|| Built::build(ranker, docs, opts, vectors.as_ref().map(|v| &v.tools)));
        let built = built.expect("rankers needing vectors were filtered out");
        build_ms.insert(ranker.name().to_owned(), t / 1e3);
        let mut o = Vec::with_capacity(queries.len());
        let mut top = Vec::new();
        for (qi, q) in queries.iter().enumerate() {
            let mut runs: Vec<(Vec<u32>, f64)> = (0..TIMING_RUNS).map(|_| timed(|| built.top(&q.text, qv(qi), K))).collect();
            runs.sort_by(|a, b| a.1.total_cmp(&b.1));
            let (ranked, us) = runs.swap_remove(TIMING_RUNS / 2);
            o.push(outcome(&ranked, &q.relevant, us));
            if opts.per_query {
                top.push(ranked);
            }
        }
        outcomes.push(o);
        tops.push(top);
    }

    let row = |split: &str, keep: &dyn Fn(&EvalQuery) -> bool| {
        let idx: Vec<usize> = (0..queries.len()).filter(|&i| keep(queries[i])).collect();
        Row {
            split: split.to_owned(),
            queries: idx.len(),
            rankers: rankers.iter().zip(&outcomes).map(|(r, o)| summarize(r.name(), &idx.iter().map(|&i| &o[i]).collect::<Vec<_>>())).collect(),
        }
    };
    let mut rows = vec![row("all", &|_| true)];
    let splits: BTreeMap<&str, ()> = queries.iter().map(|q| (q.split.as_str(), ())).collect();
    if splits.len() > 1 {
        for split in splits.keys() {
            rows.push(row(split, &|q| q.split == *split));
        }
    }
    let ids = |docs: &[u32]| -> Vec<String> { docs.iter().map(|&d| set.catalog.ids[d as usize].clone()).collect() };
    let per_query = if opts.per_query {
        queries
            .iter()
            .enumerate()
            .map(|(i, q)| QueryResult {
                id: q.id.clone(),
                split: q.split.clone(),
                relevant: ids(&q.relevant),
                top: rankers.iter().zip(&tops).map(|(r, t)| (r.name().to_owned(), ids(&t[i]))).collect(),
                recall_at_10: rankers.iter().zip(&outcomes).map(|(r, o)| (r.name().to_owned(), 100.0 * o[i].r10)).collect(),
                micros: rankers.iter().zip(&outcomes).map(|(r, o)| (r.name().to_owned(), o[i].micros)).collect(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let fusion_inputs = match &vectors {
        Some(v) => {
            // The deepest any setting of the grid reads.
            let depth = super::hybrid::grid().iter().map(|f| f.depth).max().unwrap_or(0);
            let natural = NaturalIndex::build(docs, &opts.natural);
            queries
                .iter()
                .enumerate()
                .map(|(i, q)| FusionInput {
                    lexical: natural.search(&q.text, None, depth).0,
                    semantic: v.tools.nearest(&v.queries[i], depth, |_| true),
                    relevant: q.relevant.clone(),
                })
                .collect()
        }
        None => Vec::new(),
    };
    Ok(SetReport {
        set: set.name.clone(),
        tools: docs.len(),
        unknown_relevant: set.unknown_relevant,
        build_ms,
        rows,
        queries: per_query,
        embedding: vectors.as_ref().map(|v| EmbeddingStats { tool_texts_per_s: v.tool_texts_per_s, query_ms: v.query_ms }),
        fusion_inputs,
    })
}

/// Recall targets apply to a set's `all` row and to splits with at least this many queries:
/// on fewer, a 5-point difference is within sampling noise.
pub const TARGET_MIN_QUERIES: usize = 200;
/// Natural Recall@10 must beat the BM25 baseline of the same run by this many points.
pub const TARGET_R10_MARGIN: f64 = 5.0;
/// Natural-ranker p99 query latency bound.
pub const TARGET_P99_US: f64 = 1000.0;

#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    pub set: String,
    pub split: String,
    pub queries: usize,
    pub natural_r10: f64,
    pub bm25_r10: f64,
    pub natural_r5: f64,
    pub bm25_r5: f64,
    pub natural_p99_us: f64,
    /// With a model: hybrid R@10 (must be ≥ bm25 R@10 + 5).
    pub hybrid_r10: Option<f64>,
    /// natural R@10 ≥ bm25 R@10 + 5.
    pub r10_ok: bool,
    /// natural R@5 ≥ bm25 R@5.
    pub r5_ok: bool,
    /// natural p99 ≤ 1 ms (checked on `all` rows only).
    pub p99_ok: bool,
}

impl TargetCheck {
    pub fn ok(&self) -> bool {
        self.recall_ok() && self.p99_ok
    }

    /// The recall targets alone (latency is only meaningful in a release build).
    pub fn recall_ok(&self) -> bool {
        self.r10_ok && self.r5_ok && self.hybrid_r10.is_none_or(|h| h >= self.bm25_r10 + TARGET_R10_MARGIN)
    }
}

pub fn check_targets(reports: &[SetReport]) -> Vec<TargetCheck> {
    let mut checks = Vec::new();
    for rep in reports {
        for row in &rep.rows {
            if row.split != "all" && row.queries < TARGET_MIN_QUERIES {
                continue;
            }
            let (Some(nat), Some(bm)) = (row.ranker("natural"), row.ranker("bm25")) else {
                continue;
            };
            checks.push(TargetCheck {
                set: rep.set.clone(),
                split: row.split.clone(),
                queries: row.queries,
                natural_r10: nat.recall_at_10,
                bm25_r10: bm.recall_at_10,
                natural_r5: nat.recall_at_5,
                bm25_r5: bm.recall_at_5,
                natural_p99_us: nat.p99_us,
                hybrid_r10: row.ranker("hybrid").map(|h| h.recall_at_10),
                r10_ok: nat.recall_at_10 >= bm.recall_at_10 + TARGET_R10_MARGIN,
                r5_ok: nat.recall_at_5 >= bm.recall_at_5,
                p99_ok: row.split != "all" || nat.p99_us <= TARGET_P99_US,
            });
        }
    }
    checks
}

/// The whole run, as written by `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub natural_config: NaturalConfig,
    pub half: Option<Half>,
    pub max_queries: Option<usize>,
    pub rankers: Vec<Ranker>,
    pub sets: Vec<SetReport>,
    pub targets: Vec<TargetCheck>,
    /// With a model: the leave-one-set-out fusion figures.
    pub loso: Option<Loso>,
}

/// Plain-text table of a run.
pub fn render(run: &RunReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<16} {:<15} {:>6} {:<8} {:>6} {:>6} {:>6} {:>7} {:>8} {:>8}",
        "set", "split", "n", "ranker", "R@1", "R@5", "R@10", "nDCG@10", "p50 µs", "p99 µs"
    );
    for rep in &run.sets {
        for row in &rep.rows {
            for m in &row.rankers {
                let _ = writeln!(
                    s,
                    "{:<16} {:<15} {:>6} {:<8} {:>6.2} {:>6.2} {:>6.2} {:>7.2} {:>8.1} {:>8.1}",
                    rep.set, row.split, row.queries, m.ranker, m.recall_at_1, m.recall_at_5, m.recall_at_10, m.ndcg_at_10, m.p50_us, m.p99_us
                );
            }
        }
        let builds: Vec<String> = rep.build_ms.iter().map(|(r, ms)| format!("{r} {ms:.1} ms")).collect();
        let _ = writeln!(s, "  {} tools; index build: {}", rep.tools, builds.join(", "));
        if let Some(e) = &rep.embedding {
            let _ = writeln!(s, "  embedding: {:.1} tool texts/s, {:.2} ms per query", e.tool_texts_per_s, e.query_ms);
        }
    }
    let _ = writeln!(
        s,
        "\ntargets: natural R@10 ≥ bm25 + {TARGET_R10_MARGIN}, natural R@5 ≥ bm25, natural p99 ≤ {TARGET_P99_US} µs; with a model, hybrid R@10 ≥ bm25 + {TARGET_R10_MARGIN}"
    );
    for c in &run.targets {
        let _ = writeln!(
            s,
            "  {:<4} {:<16} {:<15} R@10 {:.2} vs {:.2} ({:+.2})  R@5 {:.2} vs {:.2} ({:+.2})  p99 {:.1} µs{}",
            if c.ok() { "PASS" } else { "FAIL" },
            c.set,
            c.split,
            c.natural_r10,
            c.bm25_r10,
            c.natural_r10 - c.bm25_r10,
            c.natural_r5,
            c.bm25_r5,
            c.natural_r5 - c.bm25_r5,
            c.natural_p99_us,
            c.hybrid_r10.map(|h| format!("  hybrid R@10 {h:.2} ({:+.2})", h - c.bm25_r10)).unwrap_or_default()
        );
    }
    if let Some(l) = &run.loso {
        let bm25: BTreeMap<String, f64> =
            run.sets.iter().filter_map(|r| Some((r.set.clone(), r.rows.first()?.ranker("bm25")?.recall_at_10))).collect();
        s.push_str(&super::hybrid::render(l, &bm25));
    }
    s
}

/// Loads and evaluates every set under `root` (or the named ones).
pub fn run(root: &Path, sets: Option<&[String]>, opts: &EvalOptions) -> Result<RunReport> {
    let mut reports: Vec<SetReport> = load_sets(root, sets)?.iter().map(|s| evaluate(s, opts)).collect::<Result<_>>()?;
    let targets = check_targets(&reports);
    let inputs: Vec<(String, Vec<FusionInput>)> =
        reports.iter_mut().filter(|r| !r.fusion_inputs.is_empty()).map(|r| (r.set.clone(), std::mem::take(&mut r.fusion_inputs))).collect();
    let loso = super::hybrid::loso(&inputs);
    Ok(RunReport {
        natural_config: opts.natural.clone(),
        half: opts.half,
        max_queries: opts.max_queries,
        rankers: opts.rankers.clone(),
        sets: reports,
        targets,
        loso,
    })
}
