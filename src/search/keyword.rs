//! The keyword index (SPEC §5), built once per immutable catalog version and shared by all
//! request threads.
//!
//! Whole-word matches come from a token → postings map. Substring matches come from the
//! vocabulary of distinct runs: the maximal alphanumeric runs of the lower-cased field
//! texts. A keyword is alphanumeric, so each of its occurrences lies inside one run; a
//! char-bigram index over the vocabulary yields the few runs that can hold it, `memmem`
//! confirms them, and each run maps to postings. A one-char keyword is inside most runs, so
//! it reads per-char postings instead. Postings keep one entry per (term, document): the
//! document's best field for that term.
//!
//! The terms and postings live in segments over some of the documents, shared through `Arc`:
//! a new version of a catalog keeps the segments of its predecessor whose documents did not
//! change, indexing only the changed ones (`KeywordIndex::update`). Scores are per document
//! (no corpus statistics), so a document's strength is read from its own segment alone.
//!
//! A query scores into per-thread dense arrays (tallies, a visited bitmap), so its cost
//! follows the postings it reads, not the catalog size.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::Map;
use super::tokenize::{keywords, lowercase, normalize_exact};
use super::{Hit, Searchable};

mod segment;
use segment::{List, Postings, Segment, intern};

const FIELDS: usize = 6;
/// Strength points by zero-based field: whole-word in field f = 13 − f, substring = 7 − f.
const WHOLE_WORD_POINTS: [u64; FIELDS] = [12, 11, 10, 9, 8, 7];
const SUBSTRING_POINTS: [u64; FIELDS] = [6, 5, 4, 3, 2, 1];

/// Searchable index over one catalog version's documents.
#[derive(Debug)]
pub struct KeywordIndex {
    /// The documents' terms and postings, in parts: one for a new catalog, and after an
    /// update the previous version's where its documents are unchanged, plus the changed.
    parts: Vec<Part>,
    /// Shared with the previous version when no document was renamed, moved or regrouped.
    names: Arc<Names>,
}

/// What the index knows of its documents' names and groups.
#[derive(Debug)]
struct Names {
    /// Lower-cased local and canonical names → documents, ascending.
    exact: Map<Box<str>, Vec<u32>>,
    groups: Map<Box<str>, u32>,
    doc_group: Vec<u32>,
    /// Each document's position in canonical bytewise order (ties by document id).
    canonical_rank: Vec<u32>,
    /// All documents in canonical order, and each group's members in canonical order.
    by_canonical: Vec<u32>,
    group_members: Vec<Vec<u32>>,
}

/// Most parts an index keeps: each costs a vocabulary lookup per query keyword. An update
/// that would keep more rebuilds the smallest ones with the changed documents.
const MAX_PARTS: usize = 8;
/// Marks a part's document that is no longer in the catalog.
const GONE: u32 = u32::MAX;

/// A segment and where its documents are in this version.
#[derive(Debug)]
struct Part {
    segment: Arc<Segment>,
    docs: PartDocs,
}

#[derive(Debug)]
enum PartDocs {
    /// Segment document `d` is document `base + d`; `base` is a multiple of 64, so the
    /// segment's bitmaps line up with whole words of the per-query bitmaps.
    Run(u32),
    /// Segment document `d` is document `map[d]`, or `GONE`.
    Map(Box<[u32]>),
}

impl PartDocs {
    /// A run when `map` numbers consecutive documents from a multiple of 64.
    fn compact(map: Box<[u32]>) -> PartDocs {
        match map.first() {
            Some(&base) if base % 64 == 0 && (0u32..).zip(&map).all(|(d, &doc)| doc == base.wrapping_add(d)) => PartDocs::Run(base),
            _ => PartDocs::Map(map),
        }
    }

    fn doc(&self, local: u32) -> u32 {
        match self {
            PartDocs::Run(base) => base + local,
            PartDocs::Map(map) => map[local as usize],
        }
    }
}

impl KeywordIndex {
    /// Approximate bytes the index owns (`crate::mem`); segments shared with another version
    /// count in both.
    pub fn heap_bytes(&self) -> usize {
        use crate::mem::{table, text, vec};
        let keys = |m: &Map<Box<str>, u32>| table(m) + m.keys().map(|k| text(k)).sum::<usize>();
        vec(&self.parts, self.parts.capacity())
            + self
                .parts
                .iter()
                .map(|p| {
                    2 * size_of::<usize>()
                        + p.segment.heap_bytes()
                        + match &p.docs {
                            PartDocs::Run(_) => 0,
                            PartDocs::Map(map) => vec(map, map.len()),
                        }
                })
                .sum::<usize>()
            + size_of::<Names>()
            + table(&self.names.exact)
            + self.names.exact.iter().map(|(k, v)| text(k) + vec(v, v.capacity())).sum::<usize>()
            + keys(&self.names.groups)
            + vec(&self.names.doc_group, self.names.doc_group.capacity())
            + vec(&self.names.canonical_rank, self.names.canonical_rank.capacity())
            + vec(&self.names.by_canonical, self.names.by_canonical.capacity())
            + vec(&self.names.group_members, self.names.group_members.capacity())
            + self.names.group_members.iter().map(|g| vec(g, g.capacity())).sum::<usize>()
    }

    /// Indexes `docs`; hits refer to documents by their position in this slice.
    ///
    /// # Panics
    /// If `docs` holds 2^32 − 1 documents or more (hit ids are `u32`).
    pub fn build(docs: &[impl Searchable]) -> KeywordIndex {
        // One segment: each more would cost every query keyword another vocabulary lookup
        // (measured: split in two for a parallel build, keyword p99 rose by 40%).
        u32::try_from(docs.len()).ok().filter(|&n| n < GONE).expect("fewer than 2^32 - 1 documents");
        Self::assemble(docs, vec![Part { segment: Arc::new(Segment::build(docs.iter().map(Searchable::text))), docs: PartDocs::Run(0) }])
    }

    /// [`KeywordIndex::build`] for a new version of `previous`'s catalog: `was[d]` is the
    /// document of `previous` that document `d` repeats unchanged (the same searchable
    /// text), or `None`. The segments holding mostly unchanged documents are shared with
    /// `previous`; only the rest is indexed again. `same_names` says every document has the
    /// local name, canonical name and group of `previous`'s document of the same number
    /// (only descriptions or schemas changed): the name tables are then shared too. Ranks
    /// exactly as `build` would.
    ///
    /// # Panics
    /// As `build`, or if `was` is not one entry per document.
    pub fn update(docs: &[impl Searchable], previous: &KeywordIndex, was: &[Option<u32>], same_names: bool) -> KeywordIndex {
        assert_eq!(was.len(), docs.len(), "one entry per document");
        let mut now = vec![GONE; previous.len()];
        for (doc, old) in (0u32..).zip(was) {
            if let Some(old) = old.filter(|&o| (o as usize) < now.len()) {
                now[old as usize] = doc;
            }
        }
        // Keep the segments still mostly live, mapped to this version's documents.
        let mut kept: Vec<(usize, Part)> = Vec::new();
        for part in &previous.parts {
            // A document already gone (`GONE`) is past the end of `now`: gone still.
            let map: Box<[u32]> = (0..part.segment.docs).map(|d| now.get(part.docs.doc(d) as usize).copied().unwrap_or(GONE)).collect();
            let live = map.iter().filter(|&&d| d != GONE).count();
            if live * 2 > map.len() {
                kept.push((live, Part { segment: part.segment.clone(), docs: PartDocs::compact(map) }));
            }
        }
        // Room for the part of fresh documents: the smallest kept parts are indexed again.
        kept.sort_by_key(|(live, _)| Reverse(*live));
        kept.truncate(MAX_PARTS - 1);
        let mut covered = vec![false; docs.len()];
        let mut parts = Vec::with_capacity(kept.len() + 1);
        for (_, part) in kept {
            for d in 0..part.segment.docs {
                match part.docs.doc(d) {
                    GONE => {}
                    doc => covered[doc as usize] = true,
                }
            }
            parts.push(part);
        }
        let fresh: Vec<u32> = (0u32..).zip(&covered).filter(|(_, c)| !**c).map(|(d, _)| d).collect();
        if fresh.len() * 2 > docs.len() {
            return Self::build(docs);
        }
        if !fresh.is_empty() {
            let segment = Segment::build(fresh.iter().map(|&d| docs[d as usize].text()));
            parts.push(Part { segment: Arc::new(segment), docs: PartDocs::compact(fresh.into()) });
        }
        if same_names && previous.len() == docs.len() {
            return KeywordIndex { parts, names: previous.names.clone() };
        }
        Self::assemble(docs, parts)
    }

    /// `docs` in `parts` segments over consecutive documents (an index as updates leave it).
    #[cfg(test)]
    fn build_parts(docs: &[impl Searchable], parts: usize) -> KeywordIndex {
        let size = docs.len().div_ceil(parts).next_multiple_of(64);
        let parts = (0u32..)
            .zip(docs.chunks(size))
            .map(|(i, chunk)| Part { segment: Arc::new(Segment::build(chunk.iter().map(Searchable::text))), docs: PartDocs::Run(i * size as u32) })
            .collect();
        Self::assemble(docs, parts)
    }

    /// The index over `docs` from segments covering each document once.
    fn assemble(docs: &[impl Searchable], parts: Vec<Part>) -> KeywordIndex {
        KeywordIndex { parts, names: Arc::new(Names::of(docs)) }
    }
}

impl Names {
    fn of(docs: &[impl Searchable]) -> Names {
        let count = u32::try_from(docs.len()).expect("fewer than 2^32 documents");
        let mut exact: Map<Box<str>, Vec<u32>> = Map::default();
        let mut groups = Map::default();
        let mut doc_group = Vec::with_capacity(docs.len());
        for (id, doc) in (0..count).zip(docs) {
            let doc = doc.text();
            let name = lowercase(doc.name());
            let canonical = lowercase(doc.canonical);
            if canonical != name {
                exact.entry(canonical.into()).or_default().push(id);
            }
            exact.entry(name.into()).or_default().push(id);
            doc_group.push(intern(&mut groups, doc.group()));
        }
        let mut by_canonical: Vec<u32> = (0..count).collect();
        by_canonical.sort_by(|&a, &b| {
            let canonical = |d: u32| docs[d as usize].text().canonical.as_bytes();
            canonical(a).cmp(canonical(b))
        });
        let mut canonical_rank = vec![0u32; docs.len()];
        let mut group_members = vec![Vec::new(); groups.len()];
        for (rank, &doc) in (0u32..).zip(&by_canonical) {
            canonical_rank[doc as usize] = rank;
            group_members[doc_group[doc as usize] as usize].push(doc);
        }
        Names { exact, groups, doc_group, canonical_rank, by_canonical, group_members }
    }
}

impl KeywordIndex {
    /// How many segments the index reads per query keyword.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// Documents whose lower-cased local or canonical name equals the query trimmed and
    /// lower-cased, ascending.
    pub fn exact_docs(&self, query: &str) -> &[u32] {
        self.names.exact.get(normalize_exact(query).as_str()).map_or(&[][..], Vec::as_slice)
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.names.doc_group.len()
    }

    /// Whether the index holds no documents.
    pub fn is_empty(&self) -> bool {
        self.names.doc_group.is_empty()
    }

    /// Every candidate for `query`, fully ranked (SPEC §5 order). `group`, when given,
    /// restricts candidates to that exact group identifier.
    pub fn search(&self, query: &str, group: Option<&str>) -> Vec<Hit> {
        match self.plan(query, group) {
            Plan::Browse(ids) => ids.iter().map(|&doc| browse_hit(doc)).collect(),
            Plan::Rank(group) => {
                let mut keys = Vec::new();
                self.rank(query, group, |key| keys.push(key));
                keys.sort_unstable_by(|a, b| b.cmp(a));
                keys.into_iter().map(|key| self.hit(key)).collect()
            }
        }
    }

    /// The best `k` candidates in rank order, and the total number of candidates.
    pub fn search_top(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<Hit>, usize) {
        match self.plan(query, group) {
            Plan::Browse(ids) => {
                let top = ids.iter().take(k).map(|&doc| browse_hit(doc)).collect();
                (top, ids.len())
            }
            Plan::Rank(group) => {
                // A min-heap of the best k keys seen so far: one comparison per candidate.
                // `k` comes from the caller's offset and limit: never allocate past the catalog.
                let mut best = BinaryHeap::with_capacity(k.min(self.len()));
                let mut total = 0;
                self.rank(query, group, |key| {
                    total += 1;
                    if best.len() < k {
                        best.push(Reverse(key));
                    } else if let Some(mut worst) = best.peek_mut()
                        && key > worst.0
                    {
                        *worst = Reverse(key);
                    }
                });
                // Ascending `Reverse` order is descending key order: best first.
                let top = best.into_sorted_vec().into_iter().map(|Reverse(key)| self.hit(key));
                (top.collect(), total)
            }
        }
    }

    fn plan(&self, query: &str, group: Option<&str>) -> Plan<'_> {
        let group = match group {
            None => None,
            Some(name) => match self.names.groups.get(name) {
                Some(&id) => Some(id),
                None => return Plan::Browse(&[]),
            },
        };
        if !query.trim().is_empty() {
            return Plan::Rank(group);
        }
        Plan::Browse(match group {
            Some(id) => &self.names.group_members[id as usize],
            None => &self.names.by_canonical,
        })
    }

    /// Calls `sink` with the rank key (see `key`) of every candidate in `group`.
    fn rank(&self, query: &str, group: Option<u32>, mut sink: impl FnMut(u128)) {
        // Slices taken once: the per-candidate closures index them directly.
        let names = &*self.names;
        let (doc_group, canonical_rank) = (names.doc_group.as_slice(), names.canonical_rank.as_slice());
        let in_group = |doc: u32| group.is_none_or(|id| doc_group[doc as usize] == id);
        let exact = names.exact.get(normalize_exact(query).as_str()).map_or(&[][..], Vec::as_slice);
        let key = |doc: u32, tally: u64| {
            let exact = exact.binary_search(&doc).is_ok();
            pack(u128::from(exact) << 64 | u128::from(tally), canonical_rank[doc as usize])
        };
        let keywords = keywords(query);

        SCRATCH.with(|cell| {
            // Taken out so a panic mid-query leaves a fresh scratch behind, not a dirty one.
            let mut scratch = cell.take();
            scratch.fit(self.len(), self.parts.iter().map(|p| p.segment.docs as usize).max().unwrap_or(0));
            for keyword in &keywords {
                self.score_keyword(keyword, &mut scratch);
            }
            for &doc in exact {
                if in_group(doc) && scratch.tally[doc as usize] == 0 {
                    sink(key(doc, 0));
                }
            }
            // In document order: the per-document arrays are read sequentially, and each
            // tally is cleared as it is read.
            let Scratch { hit, tally, .. } = &mut scratch;
            for (w, word) in hit[..self.len().div_ceil(64)].iter_mut().enumerate() {
                let mut bits = std::mem::take(word);
                while bits != 0 {
                    let doc = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let points = std::mem::take(&mut tally[doc]);
                    if in_group(doc as u32) {
                        sink(key(doc as u32, points));
                    }
                }
            }
            cell.replace(scratch);
        });
    }

    /// Adds one keyword's strongest match per document to the scratch tallies.
    fn score_keyword(&self, keyword: &str, scratch: &mut Scratch) {
        scratch.start_keyword();
        let mut chars = keyword.chars();
        let one_char = matches!((chars.next(), chars.next()), (Some(_), None));
        // A document is in one part: its strongest match is found there.
        for Part { segment, docs } in &self.parts {
            // Whole words first: every whole-word match beats every substring match.
            if let Some(&term) = segment.words.get(keyword) {
                scratch.visit_tiers(&segment.word_postings, docs, [term as usize], WHOLE_WORD_POINTS);
            }
            if one_char {
                if let Some(&term) = segment.chars.get(keyword) {
                    scratch.visit_tiers(&segment.char_postings, docs, [term as usize], SUBSTRING_POINTS);
                }
                continue;
            }
            let mut runs = std::mem::take(&mut scratch.runs);
            segment.runs.containing(keyword, &mut runs);
            scratch.visit_tiers(&segment.run_postings, docs, runs.iter().copied(), SUBSTRING_POINTS);
            runs.clear();
            scratch.runs = runs;
        }
    }

    fn hit(&self, key: u128) -> Hit {
        let rank = u32::MAX - key as u32;
        let tally = (key >> 32) as u64;
        Hit { doc: self.names.by_canonical[rank as usize], exact: key >> 96 == 1, matched: (tally >> 32) as u32, score: tally as u32 }
    }
}

/// Packs a candidate so that a larger key ranks first: its strength (the exact flag above
/// the tally `matched << 32 | score`), then ascending canonical rank.
fn pack(strength: u128, canonical_rank: u32) -> u128 {
    strength << 32 | u128::from(u32::MAX - canonical_rank)
}

fn browse_hit(doc: u32) -> Hit {
    Hit { doc, exact: false, matched: 0, score: 0 }
}

enum Plan<'a> {
    /// Every candidate, already in canonical order, none exact or matched.
    Browse(&'a [u32]),
    /// Score the query, within this group if given.
    Rank(Option<u32>),
}

thread_local! {
    /// Per-thread dense per-document arrays, reused across queries and indexes.
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Dense per-document state for one query. Between queries every tally is zero and the
/// lists are empty, so a query costs what it matches, not the catalog size.
#[derive(Default)]
struct Scratch {
    /// Documents in use: the current index's size.
    docs: usize,
    /// One bit per document: already visited for the current keyword.
    seen: Vec<u64>,
    /// Per field, the union of the current keyword's bitmaps.
    tiers: Vec<u64>,
    /// Per document `matched << 32 | score`: one add counts a keyword and its points
    /// (a score reaching 2^32 would need hundreds of millions of keywords).
    tally: Vec<u64>,
    /// One bit per document with a non-zero tally.
    hit: Vec<u64>,
    /// Runs containing the current keyword.
    runs: Vec<usize>,
}

impl Scratch {
    /// Sizes the arrays for `docs` documents and bitmaps of segments of up to `segment_docs`
    /// (a kept segment can be wider than its version, holding documents since removed).
    fn fit(&mut self, docs: usize, segment_docs: usize) {
        self.docs = docs;
        if self.tally.len() < docs {
            self.tally.resize(docs, 0);
            self.seen.resize(docs.div_ceil(64), 0);
            self.hit.resize(docs.div_ceil(64), 0);
        }
        let tiers = FIELDS * docs.max(segment_docs).div_ceil(64);
        if self.tiers.len() < tiers {
            self.tiers.resize(tiers, 0);
        }
    }

    fn start_keyword(&mut self) {
        self.seen[..self.docs.div_ceil(64)].fill(0);
    }

    /// Credits the documents of `terms`' postings, tier by tier in descending points (tier
    /// f: documents whose best field for a term is f), skipping documents already visited
    /// for this keyword: so each document gets its strongest match. The postings number a
    /// segment's documents; `docs` places them in the catalog.
    fn visit_tiers<'a>(&mut self, postings: &'a Postings, docs: &PartDocs, terms: impl IntoIterator<Item = usize>, points: [u64; FIELDS]) {
        let words = postings.words;
        let mut lists: [Vec<&'a [u32]>; FIELDS] = Default::default();
        let mut merged = [false; FIELDS];
        // Gather term by term (a term's slots sit together in memory), merging bitmaps.
        for term in terms {
            for (field, list) in postings.lists(term).enumerate() {
                match list {
                    List::Docs([]) => {}
                    List::Docs(docs) => lists[field].push(docs),
                    List::Bits(bits) => {
                        let tier = &mut self.tiers[field * words..(field + 1) * words];
                        if merged[field] {
                            for (acc, &bits) in tier.iter_mut().zip(bits) {
                                *acc |= bits;
                            }
                        } else {
                            tier.copy_from_slice(bits);
                            merged[field] = true;
                        }
                    }
                }
            }
        }
        // Two loops, one per kind of part, keep the common `Run` as tight as one index.
        match docs {
            PartDocs::Run(base) => {
                let (base, first_word) = (*base as usize, *base as usize / 64);
                for (field, (lists, &points)) in lists.iter().zip(&points).enumerate() {
                    for &doc in lists.iter().copied().flatten() {
                        self.visit(base + doc as usize, points);
                    }
                    if merged[field] {
                        for w in 0..words {
                            // Whole words: `base` is a multiple of 64.
                            self.visit_word(first_word + w, self.tiers[field * words + w], points);
                        }
                    }
                }
            }
            PartDocs::Map(map) => {
                for (field, (lists, &points)) in lists.iter().zip(&points).enumerate() {
                    for &doc in lists.iter().copied().flatten() {
                        if map[doc as usize] != GONE {
                            self.visit(map[doc as usize] as usize, points);
                        }
                    }
                    if merged[field] {
                        for w in 0..words {
                            let mut bits = self.tiers[field * words + w];
                            while bits != 0 {
                                let doc = map[w * 64 + bits.trailing_zeros() as usize];
                                if doc != GONE {
                                    self.visit(doc as usize, points);
                                }
                                bits &= bits - 1;
                            }
                        }
                    }
                }
            }
        }
    }

    fn visit(&mut self, doc: usize, points: u64) {
        let (word, bit) = (doc / 64, 1u64 << (doc % 64));
        if self.seen[word] & bit == 0 {
            self.seen[word] |= bit;
            self.hit[word] |= bit;
            self.tally[doc] += 1 << 32 | points;
        }
    }

    /// Visits the documents of `bits` (word `at` of the per-query bitmaps) not yet visited
    /// for this keyword.
    fn visit_word(&mut self, at: usize, bits: u64, points: u64) {
        let mut new = bits & !self.seen[at];
        self.seen[at] |= new;
        self.hit[at] |= new;
        let tally = &mut self.tally[at * 64..];
        while new != 0 {
            tally[new.trailing_zeros() as usize] += 1 << 32 | points;
            new &= new - 1;
        }
    }
}

#[cfg(test)]
mod tests;
