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
//! A query marks each keyword's matches in per-thread bitmaps by tier (whole word or
//! substring, by field) and folds them into bit-sliced tallies, 64 documents per word
//! operation (`score`); the best k are selected from the tallies' bit planes. Its cost follows
//! the postings it reads, plus a few word operations per 64 documents of the catalog.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::sync::Arc;

use super::Map;
use super::tokenize::{keywords, lowercase, normalize_exact};
use super::top::best_k;
use super::{Hit, Searchable, with_scratch};

mod score;
mod segment;
use score::{Tallies, set_bits};
use segment::{FIELD_BITS, NO_BITMAP, PARALLEL_FROM_DOCS, Postings, Segment, intern};

const FIELDS: usize = 6;

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
    pub fn build(docs: &[impl Searchable + Sync]) -> KeywordIndex {
        // One segment, built on several threads then merged: each segment more would cost
        // every query keyword another vocabulary lookup (measured: two segments, one per
        // thread, raised keyword p99 by 40%).
        u32::try_from(docs.len()).ok().filter(|&n| n < GONE).expect("fewer than 2^32 - 1 documents");
        let segment = || Segment::build(docs.len(), |d| docs[d as usize].text());
        // The name tables need only the names: when the segment is built on several threads,
        // they are built beside it rather than serially after it.
        let (segment, names) = if docs.len() < PARALLEL_FROM_DOCS {
            (segment(), Names::of(docs))
        } else {
            std::thread::scope(|scope| {
                let names = scope.spawn(|| Names::of(docs));
                let segment = segment();
                (segment, names.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            })
        };
        KeywordIndex { parts: vec![Part { segment: Arc::new(segment), docs: PartDocs::Run(0) }], names: Arc::new(names) }
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
    pub fn update(docs: &[impl Searchable + Sync], previous: &KeywordIndex, was: &[Option<u32>], same_names: bool) -> KeywordIndex {
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
            let segment = Segment::build(fresh.len(), |i| docs[fresh[i as usize] as usize].text());
            parts.push(Part { segment: Arc::new(segment), docs: PartDocs::compact(fresh.into()) });
        }
        if same_names && previous.len() == docs.len() {
            return KeywordIndex { parts, names: previous.names.clone() };
        }
        Self::assemble(docs, parts)
    }

    /// `docs` in `parts` segments over consecutive documents (an index as updates leave it).
    #[cfg(test)]
    fn build_parts(docs: &[impl Searchable + Sync], parts: usize) -> KeywordIndex {
        let size = docs.len().div_ceil(parts).next_multiple_of(64);
        let parts = (0u32..)
            .zip(docs.chunks(size))
            .map(|(i, chunk)| Part {
                segment: Arc::new(Segment::build(chunk.len(), |d| chunk[d as usize].text())),
                docs: PartDocs::Run(i * size as u32),
            })
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
        // A local and a canonical name per document, mostly distinct: sized once.
        let mut exact: Map<Box<str>, Vec<u32>> = Map::with_capacity_and_hasher(2 * docs.len(), Default::default());
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

    /// Every document, in canonical-name bytewise order (ties by document id).
    pub fn by_canonical(&self) -> &[u32] {
        &self.names.by_canonical
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
            Plan::Rank(group) => self.ranked(query, group, None).0,
        }
    }

    /// The best `k` candidates in rank order, and the total number of candidates.
    pub fn search_top(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<Hit>, usize) {
        match self.plan(query, group) {
            Plan::Browse(ids) => {
                let top = ids.iter().take(k).map(|&doc| browse_hit(doc)).collect();
                (top, ids.len())
            }
            Plan::Rank(group) => self.ranked(query, group, Some(k)),
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

    /// The candidates in `group` ranked, all of them or the best `k`, and how many there are.
    fn ranked(&self, query: &str, group: Option<u32>, k: Option<usize>) -> (Vec<Hit>, usize) {
        let names = &*self.names;
        let canonical_rank = names.canonical_rank.as_slice();
        let exact = names.exact.get(normalize_exact(query).as_str()).map_or(&[][..], Vec::as_slice);
        let keywords = keywords(query);
        with_scratch(&TALLIES, |tallies| {
            tallies.start(self.len(), keywords.len());
            for keyword in &keywords {
                self.score_keyword(keyword, tallies);
                tallies.fold_keyword();
            }
            let members = group.map(|id| names.group_members[id as usize].as_slice());
            // Exact matches rank first whatever their tallies; the rest are candidates.
            let count = tallies.candidates(members, exact);
            let mut exact: Vec<Hit> =
                exact.iter().filter(|&&doc| group.is_none_or(|id| names.doc_group[doc as usize] == id)).map(|&doc| tallies.hit(doc, true)).collect();
            let total = exact.len() + count;
            let order = |hit: &Hit| (Reverse(hit.exact), Reverse(hit.matched), Reverse(hit.score), canonical_rank[hit.doc as usize]);
            exact.sort_unstable_by_key(order);
            let rest = match k.map(|k| k.saturating_sub(exact.len())) {
                None => tallies.undecided().collect(),
                Some(0) => Vec::new(),
                Some(k) => {
                    let mut rest = tallies.best(k, count);
                    // The rest of the way: tied in strength, so the first in canonical order.
                    let by_rank = |a: &u32, b: &u32| canonical_rank[*a as usize].cmp(&canonical_rank[*b as usize]);
                    rest.extend(best_k(tallies.undecided(), k - rest.len(), by_rank).0);
                    rest
                }
            };
            let mut hits = exact;
            let first_rest = hits.len();
            hits.extend(rest.into_iter().map(|doc| tallies.hit(doc, false)));
            hits[first_rest..].sort_unstable_by_key(order);
            hits.truncate(k.unwrap_or(usize::MAX));
            (hits, total)
        })
    }

    /// Marks one keyword's matches in the tallies' tiers.
    fn score_keyword(&self, keyword: &str, tallies: &mut Tallies) {
        let mut chars = keyword.chars();
        let one_char = matches!((chars.next(), chars.next()), (Some(_), None));
        // A document is in one part: its matches are all found there.
        for Part { segment, docs } in &self.parts {
            if let Some(&term) = segment.words.get(keyword) {
                mark(tallies, &segment.word_postings, docs, term as usize, 0);
            }
            if one_char {
                if let Some(&term) = segment.chars.get(keyword) {
                    mark(tallies, &segment.char_postings, docs, term as usize, FIELDS);
                }
                continue;
            }
            let mut runs = std::mem::take(&mut tallies.runs);
            segment.runs.containing(keyword, &mut runs);
            for &term in &runs {
                mark(tallies, &segment.run_postings, docs, term, FIELDS);
            }
            runs.clear();
            tallies.runs = runs;
        }
    }
}

/// Marks the documents of `term`'s postings, placed in the catalog by `docs`, in the tiers
/// from `first_tier` (whole words: 0, substrings: `FIELDS`) by their best field.
fn mark(tallies: &mut Tallies, postings: &Postings, docs: &PartDocs, term: usize, first_tier: usize) {
    const FIELD: u32 = (1 << FIELD_BITS) - 1;
    let (listed, bitmaps) = postings.term(term);
    match docs {
        PartDocs::Run(base) => {
            for &entry in listed {
                tallies.mark(first_tier + (entry & FIELD) as usize, (base + (entry >> FIELD_BITS)) as usize);
            }
        }
        PartDocs::Map(map) => {
            for &entry in listed {
                let doc = map[(entry >> FIELD_BITS) as usize];
                if doc != GONE {
                    tallies.mark(first_tier + (entry & FIELD) as usize, doc as usize);
                }
            }
        }
    }
    for (tier, &bitmap) in (first_tier..).zip(bitmaps.into_iter().flatten()) {
        if bitmap == NO_BITMAP {
            continue;
        }
        let bits = postings.bitmap(bitmap);
        match docs {
            // Whole words: `base` is a multiple of 64.
            PartDocs::Run(base) => tallies.mark_words(tier, *base as usize / 64, bits),
            PartDocs::Map(map) => {
                for doc in set_bits(bits).map(|d| map[d as usize]).filter(|&doc| doc != GONE) {
                    tallies.mark(tier, doc as usize);
                }
            }
        }
    }
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
    /// Per-thread dense per-query state, reused across queries and indexes.
    static TALLIES: RefCell<Tallies> = RefCell::default();
}

#[cfg(test)]
mod tests;
