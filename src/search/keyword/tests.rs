//! Unit tests of the parent module.

use super::*;
use crate::search::SearchDoc;
use crate::search::fields::schema_fields;
use crate::search::naive::naive_search;
use crate::search::test_rng::Rng;
use serde_json::json;

fn tool(group: &str, name: &str) -> SearchDoc {
    SearchDoc { name: name.into(), group: group.into(), canonical: format!("{}__{name}", group.replace('_', "_u")), ..SearchDoc::default() }
}

fn described(group: &str, name: &str, description: &str) -> SearchDoc {
    SearchDoc { description: description.into(), ..tool(group, name) }
}

fn with_schema(mut doc: SearchDoc, schema: serde_json::Value) -> SearchDoc {
    (doc.property_names, doc.schema_descriptions) = schema_fields(&schema);
    doc
}

/// Ranks through the index, checking the naive oracle agrees.
fn ranked(docs: &[SearchDoc], query: &str, group: Option<&str>) -> Vec<Hit> {
    let hits = KeywordIndex::build(docs).search(query, group);
    assert_eq!(hits, naive_search(docs, query, group), "oracle disagrees on {query:?}");
    hits
}

fn canonicals<'a>(docs: &'a [SearchDoc], hits: &[Hit]) -> Vec<&'a str> {
    hits.iter().map(|h| docs[h.doc as usize].canonical.as_str()).collect()
}

/// The single hit's score for `query` over one document.
fn score_of(doc: SearchDoc, query: &str) -> u32 {
    let hits = ranked(&[doc], query, None);
    assert_eq!(hits.len(), 1, "{query:?} should match");
    hits[0].score
}

#[test]
fn exact_local_name_ranks_first() {
    let docs = [described("crm", "lookup_customer", "Find a customer by lookup key."), tool("crm", "lookup")];
    let hits = ranked(&docs, "lookup", None);
    assert_eq!(canonicals(&docs, &hits), ["crm__lookup", "crm__lookup_customer"]);
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
    assert!(ranked(&docs, "customer-name", None).iter().all(|h| !h.exact));
}

#[test]
fn canonical_name_query_does_not_filter_by_group() {
    let docs = [tool("crm", "customer_name"), tool("billing", "customer_balance")];
    let hits = ranked(&docs, "crm__customer_name", None);
    assert_eq!(canonicals(&docs, &hits), ["crm__customer_name", "billing__customer_balance"]);
}

#[test]
fn group_parameter_filters_candidates_first() {
    let docs = [tool("crm", "customer_name"), tool("billing", "customer_balance")];
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
    let docs = [tool("odd", "--"), described("odd", "dash", "A dash -- here.")];
    let hits = ranked(&docs, " -- ", None);
    assert_eq!(canonicals(&docs, &hits), ["odd__--"]);
    assert!(hits[0].exact && hits[0].matched == 0);
    assert!(ranked(&docs, "?!", None).is_empty());
}

#[test]
fn empty_query_browses_by_canonical_name() {
    let docs = [tool("crm", "zeta"), tool("billing", "pay"), tool("crm", "alpha")];
    for query in ["", "  \t\n"] {
        let hits = ranked(&docs, query, None);
        assert_eq!(canonicals(&docs, &hits), ["billing__pay", "crm__alpha", "crm__zeta"]);
        assert!(hits.iter().all(|h| !h.exact && h.matched == 0 && h.score == 0));
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
        assert_eq!(score_of(only_in_field(field, "refund_payment"), "payment"), points);
    }
}

#[test]
fn each_field_matches_substrings_for_7_minus_its_priority() {
    for (field, points) in (0..6).zip((1..=6).rev()) {
        assert_eq!(score_of(only_in_field(field, "prepayments"), "payment"), points);
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
    let docs = [tool("g0", "prepayments"), SearchDoc { additional_search_text: "payment".into(), ..tool("g0", "zz") }];
    let hits = ranked(&docs, "payment", None);
    assert_eq!(canonicals(&docs, &hits), ["g0__zz", "g0__prepayments"]);
    assert_eq!((hits[0].score, hits[1].score), (7, 6));
}

#[test]
fn field_priority_decides_within_a_tier() {
    let docs = [with_schema(tool("g0", "a"), json!({"properties": {"invoice": {}}})), described("g0", "b", "Sends an invoice.")];
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
    let once = ranked(std::slice::from_ref(&doc), "payment", None);
    let repeated = ranked(&[doc], "payment PAYMENT payment-payment", None);
    assert_eq!(once, repeated);
    assert_eq!(repeated[0].matched, 1);
}

#[test]
fn repeated_text_adds_nothing() {
    let docs = [described("g0", "b", "payment payment payment, PAYMENT"), described("g0", "a", "payment")];
    let hits = ranked(&docs, "payment", None);
    assert_eq!(canonicals(&docs, &hits), ["g0__a", "g0__b"]);
    assert_eq!(hits[0].score, hits[1].score);
}

#[test]
fn more_distinct_keywords_beat_a_higher_score() {
    let docs = [SearchDoc { additional_search_text: "refund later".into(), ..tool("g0", "b") }, tool("g0", "refund")];
    let hits = ranked(&docs, "refund later", None);
    assert_eq!(canonicals(&docs, &hits), ["g0__b", "g0__refund"]);
    assert_eq!((hits[0].matched, hits[1].matched), (2, 1));
    assert!(hits[0].score < hits[1].score + 7);
}

#[test]
fn ties_break_by_canonical_name_bytewise() {
    let docs = [described("crm", "alpha", "pay"), described("crm", "Zeta", "pay"), described("crm", "_b", "pay")];
    let hits = ranked(&docs, "pay", None);
    assert_eq!(canonicals(&docs, &hits), ["crm__Zeta", "crm___b", "crm__alpha"]);
}

#[test]
fn camel_case_queries_split_into_keywords() {
    let docs = [with_schema(tool("crm", "lookup"), json!({"properties": {"customerName": {}}}))];
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
    let docs = [with_schema(tool("g0", "t0"), json!({"properties": {"target": {"$ref": "https://example.com/walrus.json"}}}))];
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
    let docs = [tool("billing", "refund_payment"), tool("billing", "payment_lookup"), tool("billing", "payment")];
    let hits = ranked(&docs, "payment", Some("billing"));
    assert_eq!(canonicals(&docs, &hits), ["billing__payment", "billing__payment_lookup", "billing__refund_payment"]);
    assert!(hits[0].exact);
}

#[test]
fn customer_name_query_finds_the_crm_lookup() {
    let docs = [with_schema(
        described("crm", "customer_name", "Look up the display name for a customer ID."),
        json!({"type": "object", "properties": {"customer_id": {"type": "integer"}}}),
    )];
    let hits = ranked(&docs, "customer name", Some("crm"));
    assert_eq!(canonicals(&docs, &hits), ["crm__customer_name"]);
    assert_eq!((hits[0].exact, hits[0].matched, hits[0].score), (false, 2, 24));
}

#[test]
fn search_top_returns_the_best_k_and_the_total() {
    let docs: Vec<SearchDoc> = (0..20).map(|i| described("g0", &format!("t{i:02}"), "pay")).collect();
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
    let list = |rng: &mut Rng, n, words| (0..rng.below(n)).map(|_| phrase(rng, words)).collect();
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
            let name = if rng.below(2) == 0 { &doc.name } else { &doc.canonical };
            format!(" {} ", recase(rng, name))
        }
        5 => rng.pick(&["--", "_", "?!", "__", "."]).to_owned(),
        _ => format!("{} {}", rng.pick(WORDS), rng.pick(&["pa", "ment", "sTR", "xyz"])),
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
        assert_eq!(all, naive_search(&docs, &query, group), "{query:?} in {group:?}");
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

/// Every query ranks the same through `index` as through the naive scan of `docs`.
fn agrees_with_naive(index: &KeywordIndex, docs: &[SearchDoc], rng: &mut Rng, queries: usize) {
    assert_eq!(index.len(), docs.len());
    for _ in 0..queries {
        let query = random_query(rng, docs);
        let group = if rng.below(3) == 0 { Some(rng.pick(GROUPS)) } else { None };
        let all = index.search(&query, group);
        assert_eq!(all, naive_search(docs, &query, group), "{query:?} in {group:?}");
        let (top, total) = index.search_top(&query, group, 5);
        assert_eq!((top.as_slice(), total), (&all[..all.len().min(5)], all.len()), "{query:?} top 5");
    }
}

#[test]
fn an_index_built_in_parts_ranks_like_the_naive_scan() {
    let mut rng = Rng(0x5151_2026_0c07_0001);
    let docs: Vec<SearchDoc> = (0..700).map(|_| random_doc(&mut rng)).collect();
    for parts in [2, 3, 4] {
        let index = KeywordIndex::build_parts(&docs, parts);
        assert_eq!(index.parts(), parts);
        agrees_with_naive(&index, &docs, &mut rng, 150);
    }
}

/// Random documents, a third of them with words and chars no other document has (so later
/// runs of documents bring terms new to the earlier ones).
fn docs_with_new_terms(rng: &mut Rng, count: usize) -> Vec<SearchDoc> {
    (0..count)
        .map(|i| {
            let mut doc = random_doc(rng);
            if i % 3 == 0 {
                doc.description.push_str(&format!(" uniq{i} Zeta{i}x{}y", char::from_u32(0x4e00 + i as u32).unwrap_or('x')));
            }
            doc
        })
        .collect()
}

#[test]
fn a_segment_indexed_in_parts_on_several_threads_equals_one_indexed_in_one_pass() {
    let mut rng = Rng(0x5151_2026_1207_0001);
    for count in [0, 1, 5, 64, 301] {
        let docs = docs_with_new_terms(&mut rng, count);
        let one = Segment::build_in(docs.len(), 1, |d| docs[d as usize].text());
        for parts in [2, 3, 7] {
            let merged = Segment::build_in(docs.len(), parts, |d| docs[d as usize].text());
            assert!(merged == one, "{count} documents in {parts} parts");
        }
    }
}

#[test]
fn an_index_whose_segment_was_built_in_parts_ranks_like_the_naive_scan() {
    let mut rng = Rng(0x5151_2026_1207_0002);
    let docs = docs_with_new_terms(&mut rng, 500);
    for parts in [1, 3] {
        let segment = Segment::build_in(docs.len(), parts, |d| docs[d as usize].text());
        if parts == 1 {
            // Chars numbered 128 and up are listed per run rather than in its bit set.
            assert!(segment.chars.len() > 128, "only {} chars", segment.chars.len());
        }
        let index = KeywordIndex::assemble(&docs, vec![Part { segment: Arc::new(segment), docs: PartDocs::Run(0) }]);
        assert_eq!(index.parts(), 1);
        agrees_with_naive(&index, &docs, &mut rng, 300);
        // The one-char keywords only some documents hold, most of them numbered past 128.
        for i in (0..500).step_by(9) {
            let query = char::from_u32(0x4e00 + i).map(String::from).unwrap_or_default();
            assert_eq!(index.search(&query, None), naive_search(&docs, &query, None), "{query:?} in {parts} parts");
        }
    }
}

#[test]
fn updated_indexes_keep_unchanged_parts_and_rank_like_the_naive_scan() {
    let mut rng = Rng(0x5151_2026_0c07_0002);
    let mut docs: Vec<SearchDoc> = (0..900).map(|_| random_doc(&mut rng)).collect();
    let mut index = KeywordIndex::build_parts(&docs, 4);
    let (mut shared, mut rebuilt) = (0, 0);
    for round in 0..40 {
        // Most documents stay; some leave, change or arrive, and every seventh round most
        // of them change.
        let churn = if round % 7 == 6 { 2 } else { 40 };
        let mut next = Vec::new();
        let mut was = Vec::new();
        for (old, doc) in (0u32..).zip(&docs) {
            match rng.below(churn) {
                0 => {}
                1 => {
                    next.push(random_doc(&mut rng));
                    was.push(None);
                }
                _ => {
                    next.push(doc.clone());
                    was.push(Some(old));
                }
            }
            if rng.below(churn * 2) == 0 {
                next.push(random_doc(&mut rng));
                was.push(None);
            }
        }
        let updated = KeywordIndex::update(&next, &index, &was, false);
        assert!(updated.parts() <= MAX_PARTS, "round {round}: {} parts", updated.parts());
        let kept = updated.parts.iter().filter(|p| index.parts.iter().any(|q| Arc::ptr_eq(&p.segment, &q.segment))).count();
        if kept > 0 {
            shared += 1
        } else {
            rebuilt += 1
        }
        agrees_with_naive(&updated, &next, &mut rng, 40);
        (docs, index) = (next, updated);
    }
    // Both paths ran: segments kept across versions, and whole rebuilds after big changes.
    assert!(shared >= 25 && rebuilt >= 3, "kept segments in {shared} rounds, rebuilt in {rebuilt}");
}

#[test]
fn an_update_with_every_document_unchanged_shares_every_segment() {
    let mut rng = Rng(0x5151_2026_0c07_0003);
    let docs: Vec<SearchDoc> = (0..500).map(|_| random_doc(&mut rng)).collect();
    let index = KeywordIndex::build_parts(&docs, 2);
    let was: Vec<Option<u32>> = (0..500).map(Some).collect();
    let again = KeywordIndex::update(&docs, &index, &was, true);
    assert_eq!(again.parts(), 2);
    assert!(Arc::ptr_eq(&again.names, &index.names));
    assert!(again.parts.iter().zip(&index.parts).all(|(a, b)| Arc::ptr_eq(&a.segment, &b.segment) && matches!(a.docs, PartDocs::Run(_))));
    agrees_with_naive(&again, &docs, &mut rng, 50);
}

#[test]
fn an_update_rejects_a_mapping_of_the_wrong_length() {
    let docs = [tool("crm", "lookup")];
    let index = KeywordIndex::build(&docs);
    let result = std::panic::catch_unwind(|| KeywordIndex::update(&docs, &index, &[], false));
    assert!(result.is_err());
}

#[test]
fn an_update_of_descriptions_only_shares_the_name_tables_and_ranks_like_the_naive_scan() {
    let mut rng = Rng(0x5151_2026_0c07_0004);
    let docs: Vec<SearchDoc> = (0..600).map(|_| random_doc(&mut rng)).collect();
    let index = KeywordIndex::build_parts(&docs, 3);
    let mut next = docs.clone();
    let mut was: Vec<Option<u32>> = (0..600).map(Some).collect();
    for d in [0, 1, 63, 64, 300, 599] {
        next[d].description = phrase(&mut rng, 6);
        next[d].property_names = vec![phrase(&mut rng, 2)];
        was[d] = None;
    }
    let updated = KeywordIndex::update(&next, &index, &was, true);
    assert!(Arc::ptr_eq(&updated.names, &index.names));
    assert_eq!(updated.parts(), 4, "three kept segments and the changed documents'");
    agrees_with_naive(&updated, &next, &mut rng, 200);
}

#[test]
fn a_kept_segment_wider_than_its_version_is_searched_on_a_fresh_thread() {
    let mut rng = Rng(0x5151_2026_0c07_0005);
    let docs: Vec<SearchDoc> = (0..1_000).map(|_| random_doc(&mut rng)).collect();
    let index = KeywordIndex::build(&docs);
    // 600 of the 1,000 stay: the one segment is kept, wider than the new version.
    let next: Vec<SearchDoc> = docs[..600].to_vec();
    let was: Vec<Option<u32>> = (0..600).map(Some).collect();
    let updated = KeywordIndex::update(&next, &index, &was, false);
    assert!(Arc::ptr_eq(&updated.parts[0].segment, &index.parts[0].segment));
    // A thread whose scratch never saw the 1,000-document version.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut rng = Rng(0x5151_2026_0c07_0006);
                agrees_with_naive(&updated, &next, &mut rng, 200);
            })
            .join()
            .expect("searching the wider segment does not panic")
    });
}

#[test]
fn queries_of_many_keywords_tally_every_one_like_the_naive_scan() {
    // Up to 30 matched keywords and scores in the hundreds: carries through every bit plane.
    let mut rng = Rng(0x5151_2026_0c07_0007);
    let docs: Vec<SearchDoc> = (0..500).map(|_| random_doc(&mut rng)).collect();
    let index = KeywordIndex::build(&docs);
    let every_word = WORDS.join(" ");
    for query in
        [every_word.clone(), format!("{every_word} qqq zzz 7"), WORDS[..9].join("_"), WORDS.iter().rev().copied().collect::<Vec<_>>().join("-")]
    {
        for group in [None, Some("crm")] {
            let all = index.search(&query, group);
            assert_eq!(all, naive_search(&docs, &query, group), "{query:?} in {group:?}");
            assert!(all.iter().any(|hit| hit.matched > 8), "{query:?} matches many keywords at once");
            for k in [1, 3, 10, 64, 65] {
                let (top, total) = index.search_top(&query, group, k);
                assert_eq!((top.as_slice(), total), (&all[..k.min(all.len())], all.len()), "{query:?} top {k}");
            }
        }
    }
}
