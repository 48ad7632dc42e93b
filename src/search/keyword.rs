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

use memchr::memmem;

use super::tokenize::{for_each_term, keywords, lowercase, normalize_exact};
use super::{DocText, Hit, Searchable};

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

/// The terms and postings of some documents, numbered from 0 in the order given; shared by
/// every version that keeps them.
#[derive(Debug)]
struct Segment {
    docs: u32,
    /// Tokens and runs → term id in `word_postings` and `run_postings`.
    words: Map<Box<str>, u32>,
    word_postings: Postings,
    runs: Runs,
    run_postings: Postings,
    /// Chars of the lower-cased runs → term id in `char_postings`.
    chars: Map<Box<str>, u32>,
    char_postings: Postings,
}

/// Documents per (term, best field). Each slot — one term's documents whose best field is
/// one field — is a sorted list, or a bitmap over all documents once it holds more than
/// 1/32 of them: then the bitmap is no larger than the list and merges 64 documents a step.
#[derive(Debug)]
struct Postings {
    /// `docs[offsets[s]..offsets[s + 1]]` lists slot `s = term * FIELDS + field`; empty
    /// when the slot is a bitmap.
    offsets: Vec<u32>,
    docs: Vec<u32>,
    /// Per slot, the index of its bitmap in `bitmaps`, or `NO_BITMAP`.
    bitmap_of: Vec<u32>,
    /// Bitmaps of `words` u64 each, back to back.
    bitmaps: Vec<u64>,
    words: usize,
}

const NO_BITMAP: u32 = u32::MAX;

/// One slot's documents.
enum List<'a> {
    Docs(&'a [u32]),
    Bits(&'a [u64]),
}

impl Postings {
    /// `entries` are (term, zero-based field, doc), at most one per (term, doc), over
    /// `docs` documents.
    fn from_entries(terms: usize, docs: usize, entries: &[(u32, u8, u32)]) -> Self {
        let slot = |term: u32, field: u8| term as usize * FIELDS + usize::from(field);
        // Entries are bounded by the catalog's words, which the registry's size limit bounds.
        u32::try_from(entries.len()).expect("fewer than 2^32 postings");
        let mut counts = vec![0u32; terms * FIELDS];
        for &(term, field, _) in entries {
            counts[slot(term, field)] += 1;
        }
        let words = docs.div_ceil(64);
        let mut bitmap_of = vec![NO_BITMAP; counts.len()];
        let mut bitmaps = 0u32;
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        offsets.push(0);
        for (count, bitmap) in counts.iter_mut().zip(&mut bitmap_of) {
            if *count as usize * 32 > docs {
                *bitmap = bitmaps;
                bitmaps += 1;
                *count = 0;
            }
            offsets.push(offsets[offsets.len() - 1] + *count);
        }
        let mut next = offsets.clone();
        let mut postings =
            Postings { docs: vec![0; offsets[offsets.len() - 1] as usize], offsets, bitmap_of, bitmaps: vec![0; bitmaps as usize * words], words };
        for &(term, field, doc) in entries {
            let s = slot(term, field);
            match postings.bitmap_of[s] {
                NO_BITMAP => {
                    postings.docs[next[s] as usize] = doc;
                    next[s] += 1;
                }
                bitmap => {
                    let word = bitmap as usize * words + doc as usize / 64;
                    postings.bitmaps[word] |= 1 << (doc % 64);
                }
            }
        }
        postings
    }

    /// The term's documents per best field, strongest field first.
    fn lists(&self, term: usize) -> impl Iterator<Item = List<'_>> {
        (0..FIELDS).map(move |field| self.list(term, field))
    }

    /// The term's documents whose best field is the zero-based `field`.
    fn list(&self, term: usize, field: usize) -> List<'_> {
        let slot = term * FIELDS + field;
        match self.bitmap_of[slot] {
            NO_BITMAP => List::Docs(&self.docs[self.offsets[slot] as usize..self.offsets[slot + 1] as usize]),
            bitmap => {
                let start = bitmap as usize * self.words;
                List::Bits(&self.bitmaps[start..start + self.words])
            }
        }
    }
}

/// Term ids in order of first appearance.
fn intern(ids: &mut Map<Box<str>, u32>, term: &str) -> u32 {
    if let Some(&id) = ids.get(term) {
        return id;
    }
    let id = u32::try_from(ids.len()).expect("fewer than 2^32 distinct terms");
    ids.insert(term.into(), id);
    id
}

/// One (term, best field, doc) entry per term and document, collected while indexing.
#[derive(Default)]
struct Occurrences {
    /// The last document that added each term.
    last_doc: Vec<u32>,
    entries: Vec<(u32, u8, u32)>,
}

impl Occurrences {
    /// Records `term` for `doc` unless the document already has it. Fields are indexed
    /// strongest first, so a document's first occurrence of a term is its best field.
    fn add(&mut self, term: u32, field: u8, doc: u32) -> bool {
        if self.last_doc.len() <= term as usize {
            self.last_doc.resize(term as usize + 1, u32::MAX);
        }
        let last = &mut self.last_doc[term as usize];
        let first = *last != doc;
        if first {
            *last = doc;
            self.entries.push((term, field, doc));
        }
        first
    }
}

/// The vocabulary of distinct runs with a char-bigram index over it. A keyword of two or
/// more chars lies only in runs holding all its bigrams, so the shortest of their run lists
/// bounds the runs to check with `memmem` (for two chars it is the answer).
#[derive(Debug, Default)]
struct Runs {
    /// Runs back to back: run `r` is `text[starts[r]..starts[r + 1]]`.
    text: String,
    starts: Vec<u32>,
    /// Each run's term id.
    terms: Vec<u32>,
    /// Char bigram → its runs, `runs[offsets[b]..offsets[b + 1]]`.
    bigrams: Map<Box<str>, u32>,
    offsets: Vec<usize>,
    runs: Vec<u32>,
}

impl Runs {
    /// Appends a run new to the vocabulary, with (bigram, run) entries for its bigrams.
    fn push(&mut self, term: u32, run: &str, entries: &mut Vec<(u32, u32)>) {
        let id = u32::try_from(self.terms.len()).expect("fewer than 2^32 runs");
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.text.push_str(run);
        self.starts.push(u32::try_from(self.text.len()).expect("runs of fewer than 2^32 bytes"));
        self.terms.push(term);
        let mut grams: Vec<u32> = bigrams(run).map(|g| intern(&mut self.bigrams, g)).collect();
        grams.sort_unstable();
        grams.dedup();
        entries.extend(grams.into_iter().map(|gram| (gram, id)));
    }

    /// Builds the bigram lists from all entries.
    fn index_bigrams(&mut self, entries: &[(u32, u32)]) {
        let mut offsets = vec![0usize; self.bigrams.len() + 1];
        for &(gram, _) in entries {
            offsets[gram as usize + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        self.runs = vec![0; entries.len()];
        for &(gram, run) in entries {
            self.runs[next[gram as usize]] = run;
            next[gram as usize] += 1;
        }
        self.offsets = offsets;
    }

    /// Pushes the term id of every run containing `keyword` (two or more chars), once each.
    fn containing(&self, keyword: &str, out: &mut Vec<usize>) {
        let mut rarest: Option<&[u32]> = None;
        for gram in bigrams(keyword) {
            // A bigram no run holds: no run holds the keyword.
            let Some(&gram) = self.bigrams.get(gram) else {
                return;
            };
            let runs = &self.runs[self.offsets[gram as usize]..self.offsets[gram as usize + 1]];
            if rarest.is_none_or(|rarest| runs.len() < rarest.len()) {
                rarest = Some(runs);
            }
        }
        let two_chars = bigrams(keyword).nth(1).is_none();
        let finder = memmem::Finder::new(keyword.as_bytes());
        for &run in rarest.unwrap_or_default() {
            let run = run as usize;
            let text = &self.text[self.starts[run] as usize..self.starts[run + 1] as usize];
            if two_chars || finder.find(text.as_bytes()).is_some() {
                out.push(self.terms[run] as usize);
            }
        }
    }
}

/// The two-char windows of `s`.
fn bigrams(s: &str) -> impl Iterator<Item = &str> {
    let chars = s.char_indices();
    chars.clone().zip(chars.skip(1)).map(|((start, _), (at, c))| &s[start..at + c.len_utf8()])
}

impl Postings {
    fn heap_bytes(&self) -> usize {
        use crate::mem::vec;
        vec(&self.offsets, self.offsets.capacity())
            + vec(&self.docs, self.docs.capacity())
            + vec(&self.bitmap_of, self.bitmap_of.capacity())
            + vec(&self.bitmaps, self.bitmaps.capacity())
    }
}

impl Runs {
    fn heap_bytes(&self) -> usize {
        use crate::mem::{table, text, vec};
        text(&self.text)
            + vec(&self.starts, self.starts.capacity())
            + vec(&self.terms, self.terms.capacity())
            + table(&self.bigrams)
            + self.bigrams.keys().map(|k| text(k)).sum::<usize>()
            + vec(&self.offsets, self.offsets.capacity())
            + vec(&self.runs, self.runs.capacity())
    }
}

impl Segment {
    fn heap_bytes(&self) -> usize {
        use crate::mem::{table, text};
        let keys = |m: &Map<Box<str>, u32>| table(m) + m.keys().map(|k| text(k)).sum::<usize>();
        keys(&self.words)
            + self.word_postings.heap_bytes()
            + self.runs.heap_bytes()
            + self.run_postings.heap_bytes()
            + keys(&self.chars)
            + self.char_postings.heap_bytes()
    }

    /// Indexes `docs`, numbering them from 0 in the order given.
    fn build<'a>(docs: impl ExactSizeIterator<Item = DocText<'a>>) -> Segment {
        let count = u32::try_from(docs.len()).ok().filter(|&n| n < GONE).expect("fewer than 2^32 - 1 documents");
        // Tokens and runs share term ids: most runs are also a token.
        let mut terms = Map::default();
        let mut char_ids = Map::default();
        let mut words = Occurrences::default();
        let mut run_uses = Occurrences::default();
        let mut chars = Occurrences::default();
        let mut runs = Runs::default();
        let mut bigram_entries = Vec::new();
        // Per term used as a run, its distinct char ids (so a document's chars come from its
        // distinct runs); empty for other terms.
        let mut run_chars: Vec<Vec<u32>> = Vec::new();
        for (id, doc) in (0..count).zip(docs) {
            for (field, texts) in (0u8..).zip(doc.fields) {
                for text in texts {
                    for_each_term(text, |text, uses| {
                        let term = intern(&mut terms, text);
                        if uses.token {
                            words.add(term, field, id);
                        }
                        if !uses.run {
                            return;
                        }
                        if run_chars.len() <= term as usize {
                            run_chars.resize(term as usize + 1, Vec::new());
                        }
                        if run_chars[term as usize].is_empty() {
                            runs.push(term, text, &mut bigram_entries);
                            let mut ids: Vec<u32> = text.char_indices().map(|(at, c)| intern(&mut char_ids, &text[at..at + c.len_utf8()])).collect();
                            ids.sort_unstable();
                            ids.dedup();
                            run_chars[term as usize] = ids;
                        }
                        if run_uses.add(term, field, id) {
                            for &c in &run_chars[term as usize] {
                                chars.add(c, field, id);
                            }
                        }
                    });
                }
            }
        }
        runs.index_bigrams(&bigram_entries);
        let postings = |uses: Occurrences, ids: usize| Postings::from_entries(ids, count as usize, &uses.entries);
        Segment {
            docs: count,
            word_postings: postings(words, terms.len()),
            run_postings: postings(run_uses, terms.len()),
            words: terms,
            runs,
            char_postings: postings(chars, char_ids.len()),
            chars: char_ids,
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
            scratch.fit(self.len());
            for keyword in &keywords {
                self.score_keyword(keyword, &mut scratch);
            }
            for &doc in exact {
                if in_group(doc) && scratch.tally[doc as usize] == 0 {
                    sink(key(doc, 0));
                }
            }
            for &doc in &scratch.touched {
                if in_group(doc) {
                    sink(key(doc, scratch.tally[doc as usize]));
                }
            }
            scratch.reset();
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
    /// Documents with a non-zero tally.
    touched: Vec<u32>,
    /// Runs containing the current keyword.
    runs: Vec<usize>,
}

impl Scratch {
    fn fit(&mut self, docs: usize) {
        self.docs = docs;
        if self.tally.len() < docs {
            self.tally.resize(docs, 0);
            self.seen.resize(docs.div_ceil(64), 0);
            self.tiers.resize(FIELDS * docs.div_ceil(64), 0);
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
                            let at = first_word + w;
                            let mut new = self.tiers[field * words + w] & !self.seen[at];
                            while new != 0 {
                                self.visit(at * 64 + new.trailing_zeros() as usize, points);
                                new &= new - 1;
                            }
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
            let tally = &mut self.tally[doc];
            if *tally == 0 {
                // Fits: documents are numbered by u32 (see `build`).
                self.touched.push(doc as u32);
            }
            *tally += 1 << 32 | points;
        }
    }

    fn reset(&mut self) {
        for &doc in &self.touched {
            self.tally[doc as usize] = 0;
        }
        self.touched.clear();
    }
}

#[cfg(test)]
mod tests;
