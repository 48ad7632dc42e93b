//! The keyword index (SPEC §5), built once per immutable catalog version and shared by all
//! request threads.
//!
//! Whole-word matches come from a token → postings map. Substring matches come from a
//! vocabulary of the distinct alphanumeric runs of the lower-cased field texts, stored in one
//! buffer: a keyword is alphanumeric, so each of its occurrences lies inside one run, and one
//! `memmem` scan of the buffer finds every run (and so every document) containing it.
//! Postings keep one entry per (term, document): the document's best field for that term.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;

use memchr::memmem;

use super::fields::searchable_fields;
use super::tokenize::{alphanumeric_runs, for_each_token, keywords, lowercase, normalize_exact};
use super::{Hit, SearchDoc};

const FIELDS: usize = 6;
/// Separates runs in the substring buffer; never part of an alphanumeric keyword.
const RUN_SEPARATOR: u8 = b'\n';

/// Searchable index over one catalog version's documents.
#[derive(Debug)]
pub struct KeywordIndex {
    /// Whole-word tokens → term id in `word_postings`.
    words: HashMap<Box<str>, u32>,
    word_postings: Postings,
    /// Distinct lower-cased runs, each followed by `RUN_SEPARATOR`.
    run_text: Vec<u8>,
    /// Byte offset of each run in `run_text`, ascending; the run id is the position.
    run_starts: Vec<usize>,
    run_postings: Postings,
    /// Lower-cased local and canonical names → documents.
    exact: HashMap<Box<str>, Vec<u32>>,
    groups: HashMap<Box<str>, u32>,
    doc_group: Vec<u32>,
    /// Each document's position in canonical bytewise order (ties by document id).
    canonical_rank: Vec<u32>,
    /// All documents in canonical order, and each group's members in canonical order.
    by_canonical: Vec<u32>,
    group_members: Vec<Vec<u32>>,
}

/// Documents per (term, best field), in CSR form.
#[derive(Debug, Default)]
struct Postings {
    /// `docs[offsets[t * FIELDS + f]..offsets[t * FIELDS + f + 1]]` holds the documents
    /// whose best field for term `t` is the zero-based field `f`.
    offsets: Vec<usize>,
    docs: Vec<u32>,
}

impl Postings {
    /// `entries` are (term, zero-based field, doc), at most one per (term, doc).
    fn from_entries(terms: usize, entries: &[(u32, u8, u32)]) -> Self {
        let slot = |term: u32, field: u8| term as usize * FIELDS + field as usize;
        let mut offsets = vec![0usize; terms * FIELDS + 1];
        for &(term, field, _) in entries {
            offsets[slot(term, field) + 1] += 1;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        let mut docs = vec![0u32; entries.len()];
        for &(term, field, doc) in entries {
            let at = &mut next[slot(term, field)];
            docs[*at] = doc;
            *at += 1;
        }
        Postings { offsets, docs }
    }

    /// The term's documents per field, strongest field first.
    fn by_field(&self, term: usize) -> impl Iterator<Item = &[u32]> {
        let base = term * FIELDS;
        (base..base + FIELDS).map(|s| &self.docs[self.offsets[s]..self.offsets[s + 1]])
    }
}

/// Terms of one document with their best (lowest) field, collected without a string
/// allocation per term.
#[derive(Default)]
struct DocTerms {
    text: String,
    spans: Vec<(usize, usize, u8)>,
}

impl DocTerms {
    fn push(&mut self, term: &str, field: u8) {
        let start = self.text.len();
        self.text.push_str(term);
        self.spans.push((start, self.text.len(), field));
    }

    /// Calls `f` once per distinct term with its best field, then clears.
    fn drain_best(&mut self, mut f: impl FnMut(&str, u8)) {
        let text = &self.text;
        self.spans
            .sort_unstable_by(|a, b| text[a.0..a.1].cmp(&text[b.0..b.1]).then(a.2.cmp(&b.2)));
        self.spans.dedup_by(|b, a| text[a.0..a.1] == text[b.0..b.1]);
        for &(start, end, field) in &self.spans {
            f(&text[start..end], field);
        }
        self.text.clear();
        self.spans.clear();
    }
}

fn intern(map: &mut HashMap<Box<str>, u32>, term: &str) -> (u32, bool) {
    if let Some(&id) = map.get(term) {
        return (id, false);
    }
    let id = u32::try_from(map.len()).expect("fewer than 2^32 distinct terms");
    map.insert(term.into(), id);
    (id, true)
}

impl KeywordIndex {
    /// Indexes `docs`; hits refer to documents by their position in this slice.
    ///
    /// # Panics
    /// If `docs` holds 2^32 documents or more (hit ids are `u32`).
    pub fn build(docs: &[SearchDoc]) -> KeywordIndex {
        let count = u32::try_from(docs.len()).expect("fewer than 2^32 documents");
        let mut words = HashMap::new();
        let mut word_entries = Vec::new();
        let mut runs = HashMap::new();
        let mut run_entries = Vec::new();
        let mut run_text = Vec::new();
        let mut run_starts = Vec::new();
        let mut exact: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        let mut groups = HashMap::new();
        let mut doc_group = Vec::with_capacity(docs.len());
        let mut doc_words = DocTerms::default();
        let mut doc_runs = DocTerms::default();

        for (id, doc) in (0..count).zip(docs) {
            for (field, texts) in (0u8..).zip(searchable_fields(doc)) {
                for text in texts {
                    for_each_token(text, |token| doc_words.push(token, field));
                    for run in alphanumeric_runs(&lowercase(text)) {
                        doc_runs.push(run, field);
                    }
                }
            }
            doc_words.drain_best(|token, field| {
                word_entries.push((intern(&mut words, token).0, field, id));
            });
            doc_runs.drain_best(|run, field| {
                let (term, new) = intern(&mut runs, run);
                if new {
                    run_starts.push(run_text.len());
                    run_text.extend_from_slice(run.as_bytes());
                    run_text.push(RUN_SEPARATOR);
                }
                run_entries.push((term, field, id));
            });

            let name = lowercase(&doc.name);
            let canonical = lowercase(&doc.canonical);
            if canonical != name {
                exact.entry(canonical.into()).or_default().push(id);
            }
            exact.entry(name.into()).or_default().push(id);
            doc_group.push(intern(&mut groups, &doc.group).0);
        }

        let mut by_canonical: Vec<u32> = (0..count).collect();
        by_canonical.sort_by(|&a, &b| {
            docs[a as usize]
                .canonical
                .as_bytes()
                .cmp(docs[b as usize].canonical.as_bytes())
        });
        let mut canonical_rank = vec![0u32; docs.len()];
        let mut group_members = vec![Vec::new(); groups.len()];
        for (rank, &doc) in (0u32..).zip(&by_canonical) {
            canonical_rank[doc as usize] = rank;
            group_members[doc_group[doc as usize] as usize].push(doc);
        }
        for ids in exact.values_mut() {
            ids.sort_unstable();
        }

        KeywordIndex {
            word_postings: Postings::from_entries(words.len(), &word_entries),
            words,
            run_postings: Postings::from_entries(runs.len(), &run_entries),
            run_text,
            run_starts,
            exact,
            groups,
            doc_group,
            canonical_rank,
            by_canonical,
            group_members,
        }
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.doc_group.len()
    }

    /// Whether the index holds no documents.
    pub fn is_empty(&self) -> bool {
        self.doc_group.is_empty()
    }

    /// Every candidate for `query`, fully ranked (SPEC §5 order). `group`, when given,
    /// restricts candidates to that exact group identifier.
    pub fn search(&self, query: &str, group: Option<&str>) -> Vec<Hit> {
        match self.candidates(query, group) {
            Candidates::Browse(ids) => ids.iter().map(|&doc| browse_hit(doc)).collect(),
            Candidates::Ranked(mut hits) => {
                hits.sort_unstable_by(|a, b| self.order(a, b));
                hits
            }
        }
    }

    /// The best `k` candidates in rank order, and the total number of candidates.
    pub fn search_top(&self, query: &str, group: Option<&str>, k: usize) -> (Vec<Hit>, usize) {
        match self.candidates(query, group) {
            Candidates::Browse(ids) => (
                ids.iter().take(k).map(|&doc| browse_hit(doc)).collect(),
                ids.len(),
            ),
            Candidates::Ranked(mut hits) => {
                let total = hits.len();
                if k == 0 {
                    hits.clear();
                } else if k < total {
                    hits.select_nth_unstable_by(k - 1, |a, b| self.order(a, b));
                    hits.truncate(k);
                }
                hits.sort_unstable_by(|a, b| self.order(a, b));
                (hits, total)
            }
        }
    }

    /// Exact first, then matched desc, score desc, canonical ascending.
    fn order(&self, a: &Hit, b: &Hit) -> Ordering {
        b.exact
            .cmp(&a.exact)
            .then(b.matched.cmp(&a.matched))
            .then(b.score.cmp(&a.score))
            .then_with(|| {
                let rank = |h: &Hit| self.canonical_rank[h.doc as usize];
                rank(a).cmp(&rank(b))
            })
    }

    fn candidates(&self, query: &str, group: Option<&str>) -> Candidates<'_> {
        let group = match group {
            None => None,
            Some(name) => match self.groups.get(name) {
                Some(&id) => Some(id),
                None => return Candidates::Browse(&[]),
            },
        };
        if query.trim().is_empty() {
            return Candidates::Browse(match group {
                Some(id) => &self.group_members[id as usize],
                None => &self.by_canonical,
            });
        }
        let in_group = |doc: u32| group.is_none_or(|id| self.doc_group[doc as usize] == id);
        let exact: Vec<u32> = self
            .exact
            .get(normalize_exact(query).as_str())
            .map(|ids| ids.iter().copied().filter(|&doc| in_group(doc)).collect())
            .unwrap_or_default();
        let keywords = keywords(query);

        SCRATCH.with(|cell| {
            // Taken out so a panic mid-query leaves a fresh scratch behind, not a dirty one.
            let mut scratch = cell.take();
            scratch.fit(self.len());
            for keyword in &keywords {
                self.score_keyword(keyword, &mut scratch);
            }
            let mut hits = Vec::with_capacity(scratch.touched.len() + exact.len());
            for &doc in &exact {
                if scratch.matched[doc as usize] == 0 {
                    hits.push(Hit {
                        doc,
                        exact: true,
                        matched: 0,
                        score: 0,
                    });
                }
            }
            for &doc in &scratch.touched {
                let d = doc as usize;
                if in_group(doc) {
                    hits.push(Hit {
                        doc,
                        exact: exact.binary_search(&doc).is_ok(),
                        matched: scratch.matched[d],
                        score: scratch.score[d],
                    });
                }
            }
            scratch.reset();
            cell.replace(scratch);
            Candidates::Ranked(hits)
        })
    }

    /// Adds one keyword's strongest match per document to the scratch totals.
    fn score_keyword(&self, keyword: &str, scratch: &mut Scratch) {
        // Whole-word points 12…7 always exceed substring points 6…1, so offering whole
        // words first lets substring offers only fill documents without one.
        if let Some(&term) = self.words.get(keyword) {
            for (points, docs) in (7u8..=12)
                .rev()
                .zip(self.word_postings.by_field(term as usize))
            {
                scratch.offer(docs, points);
            }
        }
        let finder = memmem::Finder::new(keyword.as_bytes());
        let mut from = 0;
        let mut run = 0;
        while let Some(found) = finder.find(&self.run_text[from..]) {
            run = run_containing(&self.run_starts, run, from + found);
            for (points, docs) in (1u8..=6).rev().zip(self.run_postings.by_field(run)) {
                scratch.offer(docs, points);
            }
            // One visit per run: resume at the next run.
            run += 1;
            match self.run_starts.get(run) {
                Some(&start) => from = start,
                None => break,
            }
        }
        scratch.fold_keyword();
    }
}

/// The run holding byte `at`: the last start ≤ `at`, galloping forward from run `from`
/// (whose start is ≤ `at`), since matches arrive in buffer order.
fn run_containing(starts: &[usize], from: usize, at: usize) -> usize {
    let mut lo = from;
    let mut step = 1;
    while lo + step < starts.len() && starts[lo + step] <= at {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(starts.len());
    lo + starts[lo..hi].partition_point(|&s| s <= at) - 1
}

fn browse_hit(doc: u32) -> Hit {
    Hit {
        doc,
        exact: false,
        matched: 0,
        score: 0,
    }
}

enum Candidates<'a> {
    /// Documents already in canonical order, none exact or matched.
    Browse(&'a [u32]),
    /// Unordered candidates.
    Ranked(Vec<Hit>),
}

thread_local! {
    /// Per-thread dense per-document arrays, reused across queries and indexes.
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Dense per-document accumulators. Between queries every entry is zero and both lists are
/// empty, so a query touches only the documents it matches.
#[derive(Default)]
struct Scratch {
    /// Strongest points of the current keyword.
    best: Vec<u8>,
    keyword_touched: Vec<u32>,
    matched: Vec<u32>,
    score: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    fn fit(&mut self, docs: usize) {
        if self.best.len() < docs {
            self.best.resize(docs, 0);
            self.matched.resize(docs, 0);
            self.score.resize(docs, 0);
        }
    }

    fn offer(&mut self, docs: &[u32], points: u8) {
        for &doc in docs {
            let best = &mut self.best[doc as usize];
            if *best == 0 {
                self.keyword_touched.push(doc);
            }
            if points > *best {
                *best = points;
            }
        }
    }

    fn fold_keyword(&mut self) {
        for &doc in &self.keyword_touched {
            let d = doc as usize;
            if self.matched[d] == 0 {
                self.touched.push(doc);
            }
            self.matched[d] += 1;
            self.score[d] += u32::from(self.best[d]);
            self.best[d] = 0;
        }
        self.keyword_touched.clear();
    }

    fn reset(&mut self) {
        for &doc in &self.touched {
            self.matched[doc as usize] = 0;
            self.score[doc as usize] = 0;
        }
        self.touched.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::fields::schema_fields;
    use crate::search::naive::naive_search;
    use serde_json::json;

    fn tool(group: &str, name: &str) -> SearchDoc {
        SearchDoc {
            name: name.into(),
            group: group.into(),
            canonical: format!("{}__{name}", group.replace('_', "_u")),
            ..SearchDoc::default()
        }
    }

    fn described(group: &str, name: &str, description: &str) -> SearchDoc {
        SearchDoc {
            description: description.into(),
            ..tool(group, name)
        }
    }

    fn with_schema(mut doc: SearchDoc, schema: serde_json::Value) -> SearchDoc {
        (doc.property_names, doc.schema_descriptions) = schema_fields(&schema);
        doc
    }

    /// Ranks through the index, checking the naive oracle agrees.
    fn ranked(docs: &[SearchDoc], query: &str, group: Option<&str>) -> Vec<Hit> {
        let hits = KeywordIndex::build(docs).search(query, group);
        assert_eq!(
            hits,
            naive_search(docs, query, group),
            "oracle disagrees on {query:?}"
        );
        hits
    }

    fn canonicals<'a>(docs: &'a [SearchDoc], hits: &[Hit]) -> Vec<&'a str> {
        hits.iter()
            .map(|h| docs[h.doc as usize].canonical.as_str())
            .collect()
    }

    /// The single hit's score for `query` over one document.
    fn score_of(doc: SearchDoc, query: &str) -> u32 {
        let hits = ranked(&[doc], query, None);
        assert_eq!(hits.len(), 1, "{query:?} should match");
        hits[0].score
    }

    #[test]
    fn exact_local_name_ranks_first() {
        let docs = [
            described("crm", "lookup_customer", "Find a customer by lookup key."),
            tool("crm", "lookup"),
        ];
        let hits = ranked(&docs, "lookup", None);
        assert_eq!(
            canonicals(&docs, &hits),
            ["crm__lookup", "crm__lookup_customer"]
        );
        assert!(hits[0].exact && !hits[1].exact);
    }

    #[test]
    fn exact_canonical_name_ranks_first() {
        let docs = [tool("a_", "b"), tool("a_u", "b"), tool("a", "a_u_b")];
        let hits = ranked(&docs, "a_u__b", None);
        assert_eq!(docs[hits[0].doc as usize].canonical, "a_u__b");
        assert!(hits[0].exact);
        assert!(hits[1..].iter().all(|h| !h.exact));
    }

    #[test]
    fn exact_match_ignores_case_and_surrounding_whitespace() {
        let docs = [tool("crm", "customer_name")];
        assert!(ranked(&docs, "  Customer_NAME\t", None)[0].exact);
        assert!(ranked(&docs, " CRM__customer_name ", None)[0].exact);
    }

    #[test]
    fn exact_match_preserves_separators() {
        let docs = [tool("crm", "customer_name")];
        let hits = ranked(&docs, "customer name", None);
        assert_eq!(hits.len(), 1);
        assert!(!hits[0].exact);
        assert!(
            ranked(&docs, "customer-name", None)
                .iter()
                .all(|h| !h.exact)
        );
    }

    #[test]
    fn canonical_name_query_does_not_filter_by_group() {
        let docs = [
            tool("crm", "customer_name"),
            tool("billing", "customer_balance"),
        ];
        let hits = ranked(&docs, "crm__customer_name", None);
        assert_eq!(
            canonicals(&docs, &hits),
            ["crm__customer_name", "billing__customer_balance"]
        );
    }

    #[test]
    fn group_parameter_filters_candidates_first() {
        let docs = [
            tool("crm", "customer_name"),
            tool("billing", "customer_balance"),
        ];
        let hits = ranked(&docs, "customer", Some("billing"));
        assert_eq!(canonicals(&docs, &hits), ["billing__customer_balance"]);
        // An explicit group still filters a canonical-name query.
        let hits = ranked(&docs, "crm__customer_name", Some("billing"));
        assert_eq!(canonicals(&docs, &hits), ["billing__customer_balance"]);
        assert!(!hits[0].exact);
    }

    #[test]
    fn group_filter_is_exact_and_unknown_groups_have_no_candidates() {
        let docs = [tool("crm", "customer_name")];
        assert!(ranked(&docs, "customer", Some("CRM")).is_empty());
        assert!(ranked(&docs, "", Some("nope")).is_empty());
    }

    #[test]
    fn punctuation_only_query_matches_exact_names_only() {
        let docs = [
            tool("odd", "--"),
            described("odd", "dash", "A dash -- here."),
        ];
        let hits = ranked(&docs, " -- ", None);
        assert_eq!(canonicals(&docs, &hits), ["odd__--"]);
        assert!(hits[0].exact && hits[0].matched == 0);
        assert!(ranked(&docs, "?!", None).is_empty());
    }

    #[test]
    fn empty_query_browses_by_canonical_name() {
        let docs = [
            tool("crm", "zeta"),
            tool("billing", "pay"),
            tool("crm", "alpha"),
        ];
        for query in ["", "  \t\n"] {
            let hits = ranked(&docs, query, None);
            assert_eq!(
                canonicals(&docs, &hits),
                ["billing__pay", "crm__alpha", "crm__zeta"]
            );
            assert!(
                hits.iter()
                    .all(|h| !h.exact && h.matched == 0 && h.score == 0)
            );
        }
        let hits = ranked(&docs, "", Some("crm"));
        assert_eq!(canonicals(&docs, &hits), ["crm__alpha", "crm__zeta"]);
    }

    /// A document with `text` in the zero-based `field` only (group and name kept neutral).
    fn only_in_field(field: usize, text: &str) -> SearchDoc {
        let mut doc = tool("g0", "t0");
        match field {
            0 => doc.name = text.into(),
            1 => doc.description = text.into(),
            2 => doc.group = text.into(),
            3 => doc.property_names = vec![text.into()],
            4 => doc.schema_descriptions = vec![text.into()],
            _ => doc.additional_search_text = text.into(),
        }
        doc
    }

    #[test]
    fn each_field_matches_whole_words_for_13_minus_its_priority() {
        for (field, points) in (0..6).zip((7..=12).rev()) {
            assert_eq!(
                score_of(only_in_field(field, "refund_payment"), "payment"),
                points
            );
        }
    }

    #[test]
    fn each_field_matches_substrings_for_7_minus_its_priority() {
        for (field, points) in (0..6).zip((1..=6).rev()) {
            assert_eq!(
                score_of(only_in_field(field, "prepayments"), "payment"),
                points
            );
        }
    }

    #[test]
    fn strength_points_have_exact_values() {
        let doc = described("paygroup", "t0", "Refund a payment.");
        assert_eq!(score_of(doc.clone(), "payment"), 11);
        assert_eq!(score_of(doc, "paygr"), 4);
    }

    #[test]
    fn whole_word_beats_substring_across_fields() {
        let docs = [
            tool("g0", "prepayments"),
            SearchDoc {
                additional_search_text: "payment".into(),
                ..tool("g0", "zz")
            },
        ];
        let hits = ranked(&docs, "payment", None);
        assert_eq!(canonicals(&docs, &hits), ["g0__zz", "g0__prepayments"]);
        assert_eq!((hits[0].score, hits[1].score), (7, 6));
    }

    #[test]
    fn field_priority_decides_within_a_tier() {
        let docs = [
            with_schema(tool("g0", "a"), json!({"properties": {"invoice": {}}})),
            described("g0", "b", "Sends an invoice."),
        ];
        let hits = ranked(&docs, "invoice", None);
        assert_eq!(canonicals(&docs, &hits), ["g0__b", "g0__a"]);
        assert_eq!((hits[0].score, hits[1].score), (11, 9));
    }

    #[test]
    fn each_keyword_counts_once_with_its_strongest_match() {
        let doc = described("g0", "payment", "payment payments prepayment");
        assert_eq!(score_of(doc, "payment"), 12);
    }

    #[test]
    fn repeated_keywords_add_nothing() {
        let doc = described("g0", "t0", "Refund a payment.");
        let once = ranked(&[doc.clone()], "payment", None);
        let repeated = ranked(&[doc], "payment PAYMENT payment-payment", None);
        assert_eq!(once, repeated);
        assert_eq!(repeated[0].matched, 1);
    }

    #[test]
    fn repeated_text_adds_nothing() {
        let docs = [
            described("g0", "b", "payment payment payment, PAYMENT"),
            described("g0", "a", "payment"),
        ];
        let hits = ranked(&docs, "payment", None);
        assert_eq!(canonicals(&docs, &hits), ["g0__a", "g0__b"]);
        assert_eq!(hits[0].score, hits[1].score);
    }

    #[test]
    fn more_distinct_keywords_beat_a_higher_score() {
        let docs = [
            SearchDoc {
                additional_search_text: "refund later".into(),
                ..tool("g0", "b")
            },
            tool("g0", "refund"),
        ];
        let hits = ranked(&docs, "refund later", None);
        assert_eq!(canonicals(&docs, &hits), ["g0__b", "g0__refund"]);
        assert_eq!((hits[0].matched, hits[1].matched), (2, 1));
        assert!(hits[0].score < hits[1].score + 7);
    }

    #[test]
    fn ties_break_by_canonical_name_bytewise() {
        let docs = [
            described("crm", "alpha", "pay"),
            described("crm", "Zeta", "pay"),
            described("crm", "_b", "pay"),
        ];
        let hits = ranked(&docs, "pay", None);
        assert_eq!(
            canonicals(&docs, &hits),
            ["crm__Zeta", "crm___b", "crm__alpha"]
        );
    }

    #[test]
    fn camel_case_queries_split_into_keywords() {
        let docs = [with_schema(
            tool("crm", "lookup"),
            json!({"properties": {"customerName": {}}}),
        )];
        let hits = ranked(&docs, "customerName", None);
        assert_eq!((hits[0].matched, hits[0].score), (2, 18));
    }

    #[test]
    fn substring_matching_is_unicode_case_insensitive() {
        let docs = [described("g0", "t0", "Wechselt das ÖL in der STRASSE.")];
        assert_eq!(ranked(&docs, "öl strass", None)[0].matched, 2);
    }

    #[test]
    fn schema_defaults_examples_enums_consts_and_titles_do_not_match() {
        let docs = [with_schema(
            tool("g0", "t0"),
            json!({
                "title": "zebra",
                "properties": {"mode": {
                    "enum": ["giraffe"], "default": "lion", "examples": ["tiger"],
                    "const": "okapi", "title": "hyena"
                }}
            }),
        )];
        for query in ["zebra", "giraffe", "lion", "tiger", "okapi", "hyena"] {
            assert!(ranked(&docs, query, None).is_empty(), "{query} matched");
        }
    }

    #[test]
    fn ref_targets_are_not_expanded() {
        let docs = [with_schema(
            tool("g0", "t0"),
            json!({"properties": {"target": {"$ref": "https://example.com/walrus.json"}}}),
        )];
        assert!(ranked(&docs, "walrus", None).is_empty());
        assert_eq!(ranked(&docs, "target", None)[0].score, 9);
    }

    #[test]
    fn defs_contents_and_nested_items_and_any_of_property_names_match() {
        let docs = [with_schema(
            tool("g0", "t0"),
            json!({
                "$defs": {"Money": {"properties": {"amount": {"description": "In cents."}}}},
                "properties": {
                    "lines": {"items": {"properties": {"sku": {}}}},
                    "contact": {"anyOf": [{"properties": {"email": {}}}]}
                }
            }),
        )];
        for query in ["amount", "sku", "email"] {
            assert_eq!(ranked(&docs, query, None)[0].score, 9, "{query}");
        }
        assert_eq!(ranked(&docs, "cents", None)[0].score, 8);
        assert!(ranked(&docs, "money", None).is_empty());
    }

    #[test]
    fn payment_search_finds_exact_then_other_keyword_matches() {
        let docs = [
            tool("billing", "refund_payment"),
            tool("billing", "payment_lookup"),
            tool("billing", "payment"),
        ];
        let hits = ranked(&docs, "payment", Some("billing"));
        assert_eq!(
            canonicals(&docs, &hits),
            [
                "billing__payment",
                "billing__payment_lookup",
                "billing__refund_payment"
            ]
        );
        assert!(hits[0].exact);
    }

    #[test]
    fn customer_name_query_finds_the_crm_lookup() {
        let docs = [with_schema(
            described(
                "crm",
                "customer_name",
                "Look up the display name for a customer ID.",
            ),
            json!({"type": "object", "properties": {"customer_id": {"type": "integer"}}}),
        )];
        let hits = ranked(&docs, "customer name", Some("crm"));
        assert_eq!(canonicals(&docs, &hits), ["crm__customer_name"]);
        assert_eq!(
            (hits[0].exact, hits[0].matched, hits[0].score),
            (false, 2, 24)
        );
    }

    #[test]
    fn search_top_returns_the_best_k_and_the_total() {
        let docs: Vec<SearchDoc> = (0..20)
            .map(|i| described("g0", &format!("t{i:02}"), "pay"))
            .collect();
        let index = KeywordIndex::build(&docs);
        let all = index.search("pay", None);
        for k in [0, 1, 7, 20, 50] {
            let (top, total) = index.search_top("pay", None, k);
            assert_eq!(total, 20);
            assert_eq!(top, all[..k.min(20)]);
        }
    }

    #[test]
    fn index_is_send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<KeywordIndex>();
    }

    /// xorshift64*: deterministic and dependency-free.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const WORDS: &[&str] = &[
        "pay",
        "payment",
        "Payments",
        "refund",
        "customer",
        "Name",
        "id",
        "ID",
        "HTTPServer",
        "oauth2",
        "v2Api",
        "invoice",
        "lookup",
        "order",
        "ORDERS",
        "customerName",
        "list",
        "get",
        "e",
        "a",
        "Straße",
        "ÖL",
        "İstanbul",
        "ΣΊΣΥΦΟΣ",
        "日本語",
        "naïve",
        "x2",
        "2fa",
    ];
    const SEPARATORS: &[&str] = &[" ", "_", "-", ", ", ". ", "", "/", "  "];
    const GROUPS: &[&str] = &["crm", "billing", "a_", "a_u", "knowledge"];

    fn phrase(rng: &mut Rng, max_words: usize) -> String {
        let mut text = String::new();
        for i in 0..rng.below(max_words + 1) {
            if i > 0 {
                text.push_str(rng.pick(SEPARATORS));
            }
            text.push_str(rng.pick(WORDS));
        }
        text
    }

    fn recase(rng: &mut Rng, text: &str) -> String {
        match rng.below(3) {
            0 => text.to_uppercase(),
            1 => text.to_lowercase(),
            _ => text.to_owned(),
        }
    }

    fn random_doc(rng: &mut Rng) -> SearchDoc {
        let group = rng.pick(GROUPS);
        let mut name = phrase(rng, 3);
        if name.is_empty() {
            name = "tool".into();
        }
        let list =
            |rng: &mut Rng, n, words| (0..rng.below(n)).map(|_| phrase(rng, words)).collect();
        SearchDoc {
            description: phrase(rng, 8),
            property_names: list(rng, 4, 2),
            schema_descriptions: list(rng, 3, 5),
            additional_search_text: phrase(rng, 3),
            ..tool(group, &name)
        }
    }

    fn random_query(rng: &mut Rng, docs: &[SearchDoc]) -> String {
        match rng.below(7) {
            0 => [" ", "", "\t "][rng.below(3)].to_owned(),
            1 | 2 => {
                let words = phrase(rng, 4);
                recase(rng, &words)
            }
            3 => {
                let chars: Vec<char> = rng.pick(WORDS).chars().collect();
                let start = rng.below(chars.len());
                let end = start + 1 + rng.below(chars.len() - start);
                recase(rng, &chars[start..end].iter().collect::<String>())
            }
            4 => {
                let doc = &docs[rng.below(docs.len())];
                let name = if rng.below(2) == 0 {
                    &doc.name
                } else {
                    &doc.canonical
                };
                format!(" {} ", recase(rng, name))
            }
            5 => rng.pick(&["--", "_", "?!", "__", "."]).to_owned(),
            _ => format!(
                "{} {}",
                rng.pick(WORDS),
                rng.pick(&["pa", "ment", "sTR", "xyz"])
            ),
        }
    }

    #[test]
    fn index_agrees_with_naive_search_on_pseudo_random_catalogs() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let docs: Vec<SearchDoc> = (0..300).map(|_| random_doc(&mut rng)).collect();
        let index = KeywordIndex::build(&docs);
        assert_eq!(index.len(), docs.len());
        let mut nonempty = 0;
        for _ in 0..500 {
            let query = random_query(&mut rng, &docs);
            let group = match rng.below(4) {
                0 => Some(rng.pick(GROUPS)),
                1 => Some("unknown"),
                _ => None,
            };
            let all = index.search(&query, group);
            assert_eq!(
                all,
                naive_search(&docs, &query, group),
                "{query:?} in {group:?}"
            );
            for k in [0, 1, 5, 1_000] {
                let (top, total) = index.search_top(&query, group, k);
                assert_eq!(total, all.len());
                assert_eq!(top, all[..k.min(all.len())], "{query:?} top {k}");
            }
            nonempty += usize::from(!all.is_empty());
        }
        // The generator must exercise real matches, not only empty results.
        assert!(nonempty > 250, "only {nonempty} queries matched");
    }
}
