//! A segment of the keyword index: the terms, runs and postings of some documents, built in
//! one pass over their fields, in runs of documents on several threads then merged (see the
//! parent module for how they are searched).

use std::ops::Range;

use memchr::memmem;

use super::super::DocText;
use super::super::Map;
use super::super::tokenize::for_each_term;
use super::FIELDS;
use crate::threads::{on_threads, threads_for};

/// The terms and postings of some documents, numbered from 0 in the order given; shared by
/// every version that keeps them.
#[derive(Debug, PartialEq)]
pub(super) struct Segment {
    pub(super) docs: u32,
    /// Tokens and runs → term id in `word_postings` and `run_postings`.
    pub(super) words: Map<Box<str>, u32>,
    pub(super) word_postings: Postings,
    pub(super) runs: Runs,
    pub(super) run_postings: Postings,
    /// Chars of the lower-cased runs → term id in `char_postings`.
    pub(super) chars: Map<Box<str>, u32>,
    pub(super) char_postings: Postings,
}

/// Documents per term, each with its best field. A term's documents are listed as entries
/// `doc << FIELD_BITS | field`, in document order: one offset per term, so reading a term
/// costs one lookup whatever its fields. A (term, field) holding more than 1/32 of the
/// documents is a bitmap over all of them instead (no larger than its list, and merged 64
/// documents a step); the few terms with bitmaps are flagged in their offset.
#[derive(Debug, PartialEq)]
pub(super) struct Postings {
    /// `entries[offsets[t] & !HAS_BITMAPS..offsets[t + 1] & !HAS_BITMAPS]` lists term `t`.
    offsets: Vec<u32>,
    entries: Vec<u32>,
    /// The terms with bitmaps, ascending, and per such term its bitmap per field (an index
    /// into `bitmaps`), or `NO_BITMAP`.
    bitmap_terms: Vec<u32>,
    bitmap_of: Vec<[u32; FIELDS]>,
    /// Bitmaps of `words` u64 each, back to back.
    bitmaps: Vec<u64>,
    words: usize,
}

/// Bits of an entry holding its field.
pub(super) const FIELD_BITS: u32 = 3;
const FIELD_MASK: u32 = (1 << FIELD_BITS) - 1;
pub(super) const NO_BITMAP: u32 = u32::MAX;
/// Flags a term with bitmaps in its offset (entries are fewer than 2^31).
const HAS_BITMAPS: u32 = 1 << 31;

impl Postings {
    /// Postings from the occurrences of several parts of consecutive documents, in document
    /// order: each part's entries (term, doc and field packed by [`Occurrences::push`], at most
    /// one per term and doc, in document order) and its map from its term ids to `terms`'s.
    fn from_parts(terms: usize, docs: usize, parts: &[(&[u64], &[u32])]) -> Self {
        let slot = |term: u32, field: u32| term as usize * FIELDS + field as usize;
        let unpack = |map: &[u32], entry: u64| (map[(entry >> 32) as usize], entry as u32);
        // Entries are bounded by the catalog's words, which the registry's size limit bounds.
        let total: usize = parts.iter().map(|(entries, _)| entries.len()).sum();
        u32::try_from(total).ok().filter(|&n| n < HAS_BITMAPS).expect("fewer than 2^31 postings");
        // Per (term, field) slot its size; then its bitmap's index, or NO_BITMAP when listed.
        let mut slots = vec![0u32; terms * FIELDS];
        for &(entries, map) in parts {
            for &entry in entries {
                let (term, entry) = unpack(map, entry);
                slots[slot(term, entry & FIELD_MASK)] += 1;
            }
        }
        let (mut bitmap_terms, mut bitmap_of) = (Vec::new(), Vec::new());
        let mut offsets = Vec::with_capacity(terms + 1);
        let (mut listed, mut bitmaps) = (0u32, 0u32);
        for (term, sizes) in (0u32..).zip(slots.chunks_exact_mut(FIELDS)) {
            let start = listed;
            let mut of = [NO_BITMAP; FIELDS];
            for (bitmap, size) in of.iter_mut().zip(sizes) {
                if *size as usize * 32 > docs {
                    (*bitmap, *size) = (bitmaps, bitmaps);
                    bitmaps += 1;
                } else {
                    listed += *size;
                    *size = NO_BITMAP;
                }
            }
            let flag = if of == [NO_BITMAP; FIELDS] {
                0
            } else {
                bitmap_terms.push(term);
                bitmap_of.push(of);
                HAS_BITMAPS
            };
            offsets.push(start | flag);
        }
        offsets.push(listed);
        let words = docs.div_ceil(64);
        // Each term's next free entry.
        let mut next: Vec<u32> = offsets[..terms].iter().map(|o| o & !HAS_BITMAPS).collect();
        let mut postings =
            Postings { offsets, entries: vec![0; listed as usize], bitmap_terms, bitmap_of, bitmaps: vec![0; bitmaps as usize * words], words };
        for &(entries, map) in parts {
            for &entry in entries {
                let (term, entry) = unpack(map, entry);
                match slots[slot(term, entry & FIELD_MASK)] {
                    NO_BITMAP => {
                        let at = &mut next[term as usize];
                        postings.entries[*at as usize] = entry;
                        *at += 1;
                    }
                    bitmap => {
                        let doc = (entry >> FIELD_BITS) as usize;
                        postings.bitmaps[bitmap as usize * words + doc / 64] |= 1 << (doc % 64);
                    }
                }
            }
        }
        postings
    }

    /// The term's listed entries, and its bitmaps by field when it has any.
    pub(super) fn term(&self, term: usize) -> (&[u32], Option<&[u32; FIELDS]>) {
        let (start, end) = (self.offsets[term], self.offsets[term + 1]);
        let listed = &self.entries[(start & !HAS_BITMAPS) as usize..(end & !HAS_BITMAPS) as usize];
        let bitmaps = (start & HAS_BITMAPS != 0).then(|| {
            let at = self.bitmap_terms.binary_search(&(term as u32)).expect("a flagged term has bitmaps");
            &self.bitmap_of[at]
        });
        (listed, bitmaps)
    }

    /// The bitmap numbered `index` (as [`Postings::term`] gives them).
    pub(super) fn bitmap(&self, index: u32) -> &[u64] {
        &self.bitmaps[index as usize * self.words..][..self.words]
    }
}

/// Term ids in order of first appearance.
pub(super) fn intern(ids: &mut Map<Box<str>, u32>, term: &str) -> u32 {
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
    /// `term << 32 | doc << FIELD_BITS | field` (a posting entry under its term).
    entries: Vec<u64>,
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
            self.push(term, field, doc);
        }
        first
    }

    /// Records `term` for `doc`, known to be new to the document.
    fn push(&mut self, term: u32, field: u8, doc: u32) {
        self.entries.push(u64::from(term) << 32 | u64::from(doc << FIELD_BITS | u32::from(field)));
    }
}

/// The vocabulary of distinct runs with a char-bigram index over it. A keyword of two or
/// more chars lies only in runs holding all its bigrams, so the shortest of their run lists
/// bounds the runs to check with `memmem` (for two chars it is the answer).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Runs {
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
    pub(super) fn containing(&self, keyword: &str, out: &mut Vec<usize>) {
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
            + vec(&self.entries, self.entries.capacity())
            + vec(&self.bitmap_terms, self.bitmap_terms.capacity())
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
    pub(super) fn heap_bytes(&self) -> usize {
        use crate::mem::{table, text};
        let keys = |m: &Map<Box<str>, u32>| table(m) + m.keys().map(|k| text(k)).sum::<usize>();
        keys(&self.words)
            + self.word_postings.heap_bytes()
            + self.runs.heap_bytes()
            + self.run_postings.heap_bytes()
            + keys(&self.chars)
            + self.char_postings.heap_bytes()
    }

    /// Indexes documents `0..count` (`doc(d)` is document `d`'s text); split across threads
    /// when there are many.
    pub(super) fn build<'a>(count: usize, doc: impl Fn(u32) -> DocText<'a> + Sync) -> Segment {
        Self::build_in(count, threads_for(count, PARALLEL_FROM_DOCS), doc)
    }

    /// [`Segment::build`] in `parts` runs of consecutive documents, each indexed on its own
    /// (on several threads), then merged: the segment is the same whatever the parts.
    pub(super) fn build_in<'a>(count: usize, parts: usize, doc: impl Fn(u32) -> DocText<'a> + Sync) -> Segment {
        // Entries pack a document in 29 bits (`FIELD_BITS`), under the 32-bit term.
        let count = u32::try_from(count).ok().filter(|&n| n < 1 << (32 - FIELD_BITS)).expect("fewer than 2^29 documents in a segment");
        let size = count.div_ceil(parts.max(1) as u32).max(1);
        let runs: Vec<Range<u32>> = (0..count).step_by(size as usize).map(|start| start..count.min(start + size)).collect();
        let partials = on_threads(&runs, 2, |_, docs| Partial::index(docs.clone(), &doc));
        Self::merge(count, partials)
    }

    /// One segment from the parts of its documents, in document order. Terms, runs and chars
    /// are numbered in order of first appearance, as one pass over all documents would.
    fn merge(count: u32, mut partials: Vec<Partial>) -> Segment {
        let mut terms: Map<Box<str>, u32> = Map::default();
        let mut chars: Map<Box<str>, u32> = Map::default();
        let mut runs = Runs::default();
        let mut bigram_entries = Vec::new();
        let mut is_run: Vec<bool> = Vec::new();
        // Per part, its term ids and char ids → the segment's.
        let (mut term_maps, mut char_maps) = (Vec::with_capacity(partials.len()), Vec::with_capacity(partials.len()));
        for (i, part) in partials.iter_mut().enumerate() {
            let texts = by_id(&part.terms);
            // The first part's ids are the segment's (its tables are taken whole below).
            let term_map: Vec<u32> = if i == 0 { (0..texts.len() as u32).collect() } else { texts.iter().map(|t| intern(&mut terms, t)).collect() };
            is_run.resize(texts.len().max(terms.len()), false);
            for &local in &part.runs {
                let term = term_map[local as usize];
                if !std::mem::replace(&mut is_run[term as usize], true) {
                    let text = texts[local as usize];
                    runs.push(term, text, &mut bigram_entries);
                    for (at, c) in text.char_indices() {
                        intern(&mut chars, &text[at..at + c.len_utf8()]);
                    }
                }
            }
            drop(texts);
            if i == 0 {
                terms = std::mem::take(&mut part.terms);
            }
            char_maps.push(by_id(&part.chars).iter().map(|c| chars[*c]).collect::<Vec<u32>>());
            term_maps.push(term_map);
        }
        runs.index_bigrams(&bigram_entries);
        let postings = |uses: fn(&Partial) -> &Occurrences, maps: &[Vec<u32>], ids: usize| {
            let parts: Vec<(&[u64], &[u32])> = partials.iter().zip(maps).map(|(p, map)| (uses(p).entries.as_slice(), map.as_slice())).collect();
            Postings::from_parts(ids, count as usize, &parts)
        };
        let words = || postings(|p| &p.words, &term_maps, terms.len());
        let rest = || (postings(|p| &p.run_uses, &term_maps, terms.len()), postings(|p| &p.char_uses, &char_maps, chars.len()));
        // Built on several threads: the word postings beside the others, of about their size.
        let (word_postings, (run_postings, char_postings)) = match partials.len() {
            0 | 1 => (words(), rest()),
            _ => std::thread::scope(|scope| {
                let words = scope.spawn(words);
                let rest = rest();
                (words.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), rest)
            }),
        };
        Segment { docs: count, word_postings, run_postings, char_postings, words: terms, runs, chars }
    }
}

/// Fewer documents than this are indexed on one thread.
pub(super) const PARALLEL_FROM_DOCS: usize = 4096;

/// What one thread indexes of a run of documents: its terms and chars numbered in order of
/// first appearance in the run, their occurrences, and its terms used as runs.
#[derive(Default)]
struct Partial {
    /// Tokens and runs share term ids: most runs are also a token.
    terms: Map<Box<str>, u32>,
    chars: Map<Box<str>, u32>,
    words: Occurrences,
    run_uses: Occurrences,
    char_uses: Occurrences,
    /// Terms used as a run, in order of first such use.
    runs: Vec<u32>,
}

/// The distinct chars of a run: ids below 128 as a bit set, the rest listed.
#[derive(Clone, Default)]
struct RunChars {
    narrow: u128,
    wide: Vec<u32>,
}

impl Partial {
    fn index<'a>(docs: Range<u32>, doc: &impl Fn(u32) -> DocText<'a>) -> Partial {
        let mut part = Partial::default();
        // Per term used as a run, its chars (so a document's chars come from its distinct
        // runs); `None` for other terms.
        let mut run_chars: Vec<Option<RunChars>> = Vec::new();
        for id in docs {
            // The document's chars below 128 so far: its first run holding a char gives the
            // char's best field (fields come strongest first).
            let mut seen: u128 = 0;
            for (field, texts) in (0u8..).zip(doc(id).fields) {
                for text in texts {
                    for_each_term(text, |text, uses| {
                        let term = intern(&mut part.terms, text);
                        if uses.token {
                            part.words.add(term, field, id);
                        }
                        if !uses.run {
                            return;
                        }
                        if run_chars.len() <= term as usize {
                            run_chars.resize(term as usize + 1, None);
                        }
                        let chars = run_chars[term as usize].get_or_insert_with(|| {
                            part.runs.push(term);
                            let mut chars = RunChars::default();
                            for (at, c) in text.char_indices() {
                                match intern(&mut part.chars, &text[at..at + c.len_utf8()]) {
                                    narrow @ 0..128 => chars.narrow |= 1 << narrow,
                                    wide => chars.wide.push(wide),
                                }
                            }
                            chars.wide.sort_unstable();
                            chars.wide.dedup();
                            chars
                        });
                        if part.run_uses.add(term, field, id) {
                            for c in set_bits_128(chars.narrow & !seen) {
                                part.char_uses.push(c, field, id);
                            }
                            seen |= chars.narrow;
                            for &c in &chars.wide {
                                part.char_uses.add(c, field, id);
                            }
                        }
                    });
                }
            }
        }
        part
    }
}

/// The set bits of `bits`, lowest first.
fn set_bits_128(mut bits: u128) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        let bit = (bits != 0).then(|| bits.trailing_zeros())?;
        bits &= bits - 1;
        Some(bit)
    })
}

/// The keys of `ids` by id.
fn by_id(ids: &Map<Box<str>, u32>) -> Vec<&str> {
    let mut texts = vec![""; ids.len()];
    for (text, &id) in ids {
        texts[id as usize] = text;
    }
    texts
}
