//! A segment of the keyword index: the terms, runs and postings of some documents, built in
//! one pass over their fields (see the parent module for how they are searched).

use memchr::memmem;

use super::super::DocText;
use super::super::Map;
use super::super::tokenize::for_each_term;
use super::{FIELDS, GONE};

/// The terms and postings of some documents, numbered from 0 in the order given; shared by
/// every version that keeps them.
#[derive(Debug)]
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
#[derive(Debug)]
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
pub(super) const NO_BITMAP: u32 = u32::MAX;
/// Flags a term with bitmaps in its offset (entries are fewer than 2^31).
const HAS_BITMAPS: u32 = 1 << 31;

impl Postings {
    /// `entries` are (term, zero-based field, doc), at most one per (term, doc), in document
    /// order, over `docs` documents.
    fn from_entries(terms: usize, docs: usize, entries: &[(u32, u8, u32)]) -> Self {
        let slot = |term: u32, field: u8| term as usize * FIELDS + usize::from(field);
        // Entries are bounded by the catalog's words, which the registry's size limit bounds.
        u32::try_from(entries.len()).ok().filter(|&n| n < HAS_BITMAPS).expect("fewer than 2^31 postings");
        assert!(docs < 1 << (32 - FIELD_BITS), "fewer than 2^29 documents in a segment");
        // Per (term, field) slot its size; then its bitmap's index, or NO_BITMAP when listed.
        let mut slots = vec![0u32; terms * FIELDS];
        for &(term, field, _) in entries {
            slots[slot(term, field)] += 1;
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
        for &(term, field, doc) in entries {
            match slots[slot(term, field)] {
                NO_BITMAP => {
                    let at = &mut next[term as usize];
                    postings.entries[*at as usize] = doc << FIELD_BITS | u32::from(field);
                    *at += 1;
                }
                bitmap => postings.bitmaps[bitmap as usize * words + doc as usize / 64] |= 1 << (doc % 64),
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

    /// Indexes `docs`, numbering them from 0 in the order given.
    pub(super) fn build<'a>(docs: impl ExactSizeIterator<Item = DocText<'a>>) -> Segment {
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
