//! A query's tallies, bit-sliced: per 64 documents, one word per bit of the matched-keyword
//! count and one per bit of the score. A keyword's matches arrive as per-tier bitmaps (tier:
//! whole-word or substring match in one field); folding them into the tallies is a few word
//! operations per 64 documents, where a per-document tally would cost a memory write per
//! document and keyword. The best k are then selected bit by bit from the top plane down
//! (a radix select over the planes), so only they are ever taken apart per document.

use super::super::Hit;
use super::FIELDS;

/// Tiers of a keyword's match, strongest first: whole word in field 0..6, then substring.
pub(super) const TIERS: usize = 2 * FIELDS;
/// Strength points by tier (SPEC §5): whole word in field f = 12 − f, substring = 6 − f.
const POINTS: [u32; TIERS] = [12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1];
/// Bits of a tier's points.
const POINT_BITS: usize = 4;

/// Per-thread dense per-query state. Between queries every tier word is zero.
#[derive(Default)]
pub(super) struct Tallies {
    /// Words of 64 documents in the current index.
    words: usize,
    /// Per word, `TIERS` bitmaps: the current keyword's documents by tier.
    tiers: Vec<u64>,
    /// Per word, `width` planes: the matched count's bits (least first), then the score's.
    planes: Vec<u64>,
    matched_bits: usize,
    width: usize,
    /// Per word: candidates still undecided, and those selected (scratch of `best`).
    undecided: Vec<u64>,
    chosen: Vec<u64>,
    /// Runs containing the current keyword (scratch of the caller).
    pub(super) runs: Vec<usize>,
}

/// Bits needed to hold `n`.
fn bits(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

impl Tallies {
    /// Starts a query of `keywords` keywords over `docs` documents.
    pub(super) fn start(&mut self, docs: usize, keywords: usize) {
        self.words = docs.div_ceil(64);
        self.matched_bits = bits(keywords);
        self.width = self.matched_bits + bits(keywords * POINTS[0] as usize);
        if self.tiers.len() < self.words * TIERS {
            self.tiers.resize(self.words * TIERS, 0);
        }
        let planes = self.words * self.width;
        if self.planes.len() < planes {
            self.planes.resize(planes, 0);
        }
        self.planes[..planes].fill(0);
        for list in [&mut self.undecided, &mut self.chosen] {
            if list.len() < self.words {
                list.resize(self.words, 0);
            }
        }
    }

    /// Marks `doc` as matching the current keyword in `tier`.
    pub(super) fn mark(&mut self, tier: usize, doc: usize) {
        self.tiers[doc / 64 * TIERS + tier] |= 1 << (doc % 64);
    }

    /// Marks the documents of `bits`, a bitmap whose first word is word `first` of the index.
    pub(super) fn mark_words(&mut self, tier: usize, first: usize, bits: &[u64]) {
        for (at, &bits) in (first..).zip(bits) {
            self.tiers[at * TIERS + tier] |= bits;
        }
    }

    /// Adds the current keyword to the tallies: each document its strongest tier's points
    /// and one matched keyword. Clears the tiers for the next keyword.
    pub(super) fn fold_keyword(&mut self) {
        let (matched_bits, width) = (self.matched_bits, self.width);
        for (tiers, planes) in self.tiers.chunks_exact_mut(TIERS).zip(self.planes.chunks_exact_mut(width)).take(self.words) {
            if tiers.iter().all(|&t| t == 0) {
                continue;
            }
            // The strongest tier of each document, as points in POINT_BITS bit planes.
            let (mut seen, mut points) = (0u64, [0u64; POINT_BITS]);
            for (tier, &tier_points) in tiers.iter_mut().zip(&POINTS) {
                let new = std::mem::take(tier) & !seen;
                seen |= new;
                for (b, plane) in points.iter_mut().enumerate() {
                    if tier_points >> b & 1 == 1 {
                        *plane |= new;
                    }
                }
            }
            let (matched, score) = planes.split_at_mut(matched_bits);
            // Ripple-carry additions, 64 documents at a time; counts never overflow their bits.
            let mut carry = seen;
            for plane in matched {
                (*plane, carry) = (*plane ^ carry, *plane & carry);
                if carry == 0 {
                    break;
                }
            }
            let mut carry = 0u64;
            for (b, plane) in score.iter_mut().enumerate() {
                let add = points.get(b).copied().unwrap_or(0);
                let sum = *plane ^ add;
                (*plane, carry) = (sum ^ carry, (*plane & add) | (carry & sum));
                if b + 1 >= POINT_BITS && carry == 0 {
                    break;
                }
            }
        }
    }

    /// Documents of word `w` that matched at least one keyword.
    fn any(&self, w: usize) -> u64 {
        self.planes[w * self.width..][..self.matched_bits].iter().fold(0, |any, &p| any | p)
    }

    /// `doc`'s (matched, score).
    fn strength(&self, doc: usize) -> (u32, u32) {
        let planes = &self.planes[doc / 64 * self.width..][..self.width];
        let (matched, score) = planes.split_at(self.matched_bits);
        let value = |planes: &[u64]| planes.iter().rev().fold(0u32, |v, &p| v << 1 | (p >> (doc % 64) & 1) as u32);
        (value(matched), value(score))
    }

    /// The hit of `doc` with its tallies.
    pub(super) fn hit(&self, doc: u32, exact: bool) -> Hit {
        let (matched, score) = self.strength(doc as usize);
        Hit { doc, exact, matched, score }
    }

    /// Sets `undecided` to the candidates: the documents that matched a keyword, among
    /// `members` when given, minus `exclude`. Returns how many there are.
    pub(super) fn candidates(&mut self, members: Option<&[u32]>, exclude: &[u32]) -> usize {
        let words = self.words;
        match members {
            None => self.undecided[..words].fill(u64::MAX),
            Some(members) => {
                self.undecided[..words].fill(0);
                for &doc in members {
                    self.undecided[doc as usize / 64] |= 1 << (doc % 64);
                }
            }
        }
        for w in 0..words {
            self.undecided[w] &= self.any(w);
        }
        for &doc in exclude {
            self.undecided[doc as usize / 64] &= !(1 << (doc % 64));
        }
        self.undecided[..words].iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The candidates still undecided, in document order.
    pub(super) fn undecided(&self) -> SetBits<'_> {
        set_bits(&self.undecided[..self.words])
    }

    /// Narrows the candidates (of which there are `count`) towards the `k` strongest: returns
    /// documents that are among them, and leaves in `undecided` the rest of the way: all of
    /// it when it holds no more than `k` minus the returned; otherwise documents tied in
    /// strength, of which that many are to be taken (by canonical order).
    pub(super) fn best(&mut self, k: usize, mut count: usize) -> Vec<u32> {
        let words = self.words;
        self.chosen[..words].fill(0);
        let mut needed = k;
        // From the top plane down (matched's, then score's): keep the documents with the bit
        // set when there are enough of them; otherwise all of them are in, and the rest are
        // decided by the lower planes.
        for p in (0..self.matched_bits).rev().chain((self.matched_bits..self.width).rev()) {
            if count <= needed {
                break;
            }
            let with: usize = (0..words).map(|w| (self.undecided[w] & self.planes[w * self.width + p]).count_ones() as usize).sum();
            if with >= needed {
                for w in 0..words {
                    self.undecided[w] &= self.planes[w * self.width + p];
                }
                count = with;
            } else {
                for w in 0..words {
                    let plane = self.planes[w * self.width + p];
                    self.chosen[w] |= self.undecided[w] & plane;
                    self.undecided[w] &= !plane;
                }
                needed -= with;
                count -= with;
            }
        }
        set_bits(&self.chosen[..words]).collect()
    }
}

/// The documents of the set bits of `words` (bit b of word w is document 64w + b), ascending.
pub(super) fn set_bits(words: &[u64]) -> SetBits<'_> {
    SetBits { words, next: 0, base: 0, bits: 0 }
}

pub(super) struct SetBits<'a> {
    /// Words not read yet, the first of them numbered `next`.
    words: &'a [u64],
    next: u32,
    /// The bits left of the word numbered `base`.
    base: u32,
    bits: u64,
}

impl Iterator for SetBits<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while self.bits == 0 {
            let (&word, rest) = self.words.split_first()?;
            // Fits: documents are numbered by u32.
            (self.base, self.next, self.bits, self.words) = (self.next, self.next + 64, word, rest);
        }
        let bit = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(self.base + bit)
    }
}
