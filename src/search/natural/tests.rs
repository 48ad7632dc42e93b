//! Unit tests of the parent module.

use super::*;
use crate::search::test_rng::Rng;

fn doc(group: &str, name: &str, description: &str) -> SearchDoc {
    SearchDoc {
        name: name.to_owned(),
        description: description.to_owned(),
        group: group.to_owned(),
        canonical: format!("{}__{name}", group.replace('_', "_u")),
        ..SearchDoc::default()
    }
}

fn catalog() -> Vec<SearchDoc> {
    vec![
        doc("weather", "get_forecast", "Weather forecast for a city for the next days."),
        doc("weather", "air_quality", "Air quality index for a zip code."),
        doc("crm", "getCustomerName", "Look up a person's display name."),
        doc("crm", "delete_customer", "Delete a customer record permanently."),
        doc("papers", "search", "Search academic papers by topic."),
        doc("cli", "usage", "Help for the command line."),
    ]
}

fn names(docs: &[SearchDoc], hits: &[(u32, f32)]) -> Vec<String> {
    hits.iter().map(|&(d, _)| docs[d as usize].canonical.clone()).collect()
}

fn top(docs: &[SearchDoc], cfg: &NaturalConfig, query: &str, group: Option<&str>) -> Vec<String> {
    names(docs, &NaturalIndex::build(docs, cfg).search(query, group, 10).0)
}

#[test]
fn index_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<NaturalIndex>();
}

#[test]
fn identifiers_are_split_into_words() {
    let docs = catalog();
    let cfg = NaturalConfig::default();
    // camelCase name matched by plain words; snake_case name and `group__tool` likewise.
    assert_eq!(top(&docs, &cfg, "customer name", None)[0], "crm__getCustomerName");
    assert_eq!(top(&docs, &cfg, "the air quality please", None)[0], "weather__air_quality");
    assert_eq!(top(&docs, &cfg, "crm delete customer", None)[0], "crm__delete_customer");
}

#[test]
fn stemming_matches_word_forms() {
    let docs = catalog();
    let stemmed = NaturalConfig::default();
    let plain = NaturalConfig { stem: false, ..NaturalConfig::default() };
    assert_eq!(top(&docs, &stemmed, "forecasts", None)[0], "weather__get_forecast");
    assert!(top(&docs, &plain, "forecasts", None).is_empty());
    assert_eq!(top(&docs, &stemmed, "searching for a paper", None)[0], "papers__search");
}

#[test]
fn request_boilerplate_does_not_match() {
    let docs = catalog();
    let cfg = NaturalConfig::default();
    // "help" is boilerplate in a request: the weather words decide.
    let idx = NaturalIndex::build(&docs, &cfg);
    let (hits, total) = idx.search("Can you please help me with the weather forecast?", None, 10);
    assert_eq!(names(&docs, &hits)[0], "weather__get_forecast");
    assert!(!names(&docs, &hits).contains(&"cli__usage".to_owned()), "{total}");
    // A query of boilerplate only still searches its words.
    assert_eq!(top(&docs, &cfg, "help", None), ["cli__usage"]);
    // Without stop words, function words match too.
    let no_stop = NaturalConfig { stop_words: false, ..NaturalConfig::default() };
    assert!(NaturalIndex::build(&docs, &no_stop).search("for the", None, 10).1 > 0);
    assert_eq!(NaturalIndex::build(&docs, &cfg).search("for the", None, 10).1, 0);
}

#[test]
fn field_weights_decide_between_fields() {
    // "record" is in the name of one tool and the description of the other.
    let docs = vec![doc("a", "record_audio", "Capture sound from the microphone."), doc("b", "archive", "Store a record in the archive.")];
    // Plain BM25F: no name-coverage bonus, group prior or feedback.
    let by_name = NaturalConfig { name_coverage: 0.0, prf_docs: 0, group_prior: 0.0, ..NaturalConfig::default() };
    assert_eq!(top(&docs, &by_name, "record", None), ["a__record_audio", "b__archive"]);
    let by_description =
        NaturalConfig { name: FieldParams { weight: 0.2, b: 0.8 }, description: FieldParams { weight: 3.0, b: 0.5 }, ..by_name.clone() };
    assert_eq!(top(&docs, &by_description, "record", None), ["b__archive", "a__record_audio"]);
    let name_ignored = NaturalConfig { name: FieldParams { weight: 0.0, b: 0.0 }, ..by_name };
    assert_eq!(top(&docs, &name_ignored, "record", None), ["b__archive"]);
}

#[test]
fn exact_name_ranks_first() {
    let docs = catalog();
    let cfg = NaturalConfig::default();
    assert_eq!(top(&docs, &cfg, " SEARCH ", None)[0], "papers__search");
    assert_eq!(top(&docs, &cfg, "crm__delete_customer", None)[0], "crm__delete_customer");
}

#[test]
fn ties_break_by_canonical_name_whatever_the_doc_order() {
    let mut docs = vec![doc("zeta", "lookup", "Find a city."), doc("alpha", "lookup", "Find a city."), doc("alpha_x", "lookup", "Find a city.")];
    // Same text and equal group text: equal scores.
    let cfg = NaturalConfig { group: FieldParams { weight: 0.0, b: 0.0 }, ..NaturalConfig::default() };
    let expected = ["alpha__lookup", "alpha_ux__lookup", "zeta__lookup"];
    assert_eq!(top(&docs, &cfg, "find city", None), expected);
    docs.reverse();
    assert_eq!(top(&docs, &cfg, "find city", None), expected);
}

#[test]
fn deterministic_across_builds_and_queries() {
    let docs = catalog();
    let cfg = NaturalConfig::default();
    let a = NaturalIndex::build(&docs, &cfg);
    let b = NaturalIndex::build(&docs, &cfg);
    for q in ["weather in a city", "delete a customer record", "papers"] {
        let first = a.search(q, None, 10);
        assert_eq!(first, a.search(q, None, 10));
        assert_eq!(first, b.search(q, None, 10));
        assert!(first.0.windows(2).all(|w| w[0].1 >= w[1].1), "{q}: descending scores");
    }
}

#[test]
fn the_per_thread_accumulator_carries_nothing_between_indexes_of_other_sizes() {
    // A larger catalog (more docs and groups) and a smaller one, queried in turns on one
    // thread: each answer is the one a thread that never searched the other gives.
    let small = catalog();
    let mut large = catalog();
    for i in 0..200 {
        large.push(doc(&format!("extra{}", i % 40), &format!("forecast_{i}"), "Weather forecast and customer papers for a city."));
    }
    let (small_index, large_index) = (NaturalIndex::build(&small, &NaturalConfig::default()), NaturalIndex::build(&large, &NaturalConfig::default()));
    let queries = ["weather in a city", "customer papers", "forecast", "delete a customer record"];
    let alone = |index: &NaturalIndex| std::thread::scope(|s| s.spawn(|| queries.map(|q| index.search(q, None, 10))).join().expect("no panic"));
    let (small_alone, large_alone) = (alone(&small_index), alone(&large_index));
    for round in 0..3 {
        for (i, q) in queries.iter().enumerate() {
            assert_eq!(large_index.search(q, None, 10), large_alone[i], "round {round}: {q} on the larger index");
            assert_eq!(small_index.search(q, None, 10), small_alone[i], "round {round}: {q} on the smaller index");
        }
    }
}

#[test]
fn group_filter_applies_first() {
    let docs = catalog();
    let idx = NaturalIndex::build(&docs, &NaturalConfig::default());
    let (hits, total) = idx.search("customer record weather", Some("crm"), 10);
    assert_eq!(total, 2);
    assert!(names(&docs, &hits).iter().all(|n| n.starts_with("crm__")));
    assert_eq!(idx.search("weather", Some("nope"), 10), (Vec::new(), 0));
    // An exact canonical name outside the group is filtered out too.
    assert_eq!(idx.search("papers__search", Some("crm"), 10).1, 0);
}

#[test]
fn k_limits_the_page_not_the_total() {
    let docs = catalog();
    let idx = NaturalIndex::build(&docs, &NaturalConfig::default());
    let (all, total) = idx.search("customer weather papers", None, 10);
    let (two, same_total) = idx.search("customer weather papers", None, 2);
    assert_eq!(total, same_total);
    assert_eq!(&all[..2], &two[..]);
    assert_eq!(idx.search("customer", None, 0), (Vec::new(), 2));
    assert_eq!(idx.search("   ", None, 10), (Vec::new(), 0));
    // The largest k asks for everything (the fuzzer found 2k overflowing here).
    assert_eq!(idx.search("customer weather papers", None, usize::MAX), (all.clone(), total));
    assert_eq!(idx.search("customer weather papers", None, usize::MAX / 2 + 1), (all, total));
}

/// A catalog of `n` docs over a small vocabulary (so words repeat across docs, as in real
/// catalogs), in 12 groups.
fn random_catalog(n: usize, rng: &mut Rng) -> Vec<SearchDoc> {
    const WORDS: [&str; 24] = [
        "weather", "forecast", "city", "customer", "record", "delete", "search", "paper", "invoice", "payment", "refund", "order", "ship", "track",
        "user", "email", "send", "list", "create", "update", "file", "upload", "report", "daily",
    ];
    (0..n)
        .map(|i| {
            // Skewed: low-numbered words are picked more often.
            let mut word = || WORDS[rng.below(WORDS.len()).min(rng.below(WORDS.len()))];
            let name = format!("{}_{}{i}", word(), word());
            let description: Vec<&str> = (0..3 + i % 9).map(|_| word()).collect();
            doc(&format!("g{}", i % 12), &name, &description.join(" "))
        })
        .collect()
}

#[test]
fn dense_and_sparse_scoring_give_the_same_answer_bit_for_bit() {
    let docs = random_catalog(400, &mut Rng(0x9e37_79b9_7f4a_7c15));
    let index = NaturalIndex::build(&docs, &NaturalConfig::default());
    let queries = [
        "weather",
        "customer record",
        "delete the customer invoice payment",
        "getWeatherForecast for a city",
        "list daily report upload file send email",
        "track order ship refund payment invoice user create update",
        "nothing matches here",
        // Exact names, which rank first whatever their score.
        &docs[3].canonical,
        &docs[7].name,
        "",
    ];
    let mut answers = 0;
    for query in queries {
        for group in [None, Some("g3"), Some("g7"), Some("absent")] {
            for k in [0, 1, 3, 10, 500] {
                // Each way on a thread of its own (a fresh accumulator), so that one way's
                // leftovers cannot hide the other's misses.
                let fresh = |dense| std::thread::scope(|s| s.spawn(|| index.search_with(query, group, k, Some(dense))).join().expect("no panic"));
                let (dense, dense_total) = fresh(true);
                let (sparse, sparse_total) = fresh(false);
                let bits = |hits: &[(u32, f32)]| hits.iter().map(|&(d, s)| (d, s.to_bits())).collect::<Vec<_>>();
                assert_eq!(bits(&dense), bits(&sparse), "{query:?} in {group:?}, k = {k}");
                assert_eq!(dense_total, sparse_total, "{query:?} in {group:?}, k = {k}");
                // And on this thread, one query after another, either way.
                assert_eq!(index.search_with(query, group, k, Some(true)), (dense.clone(), dense_total));
                assert_eq!(index.search_with(query, group, k, Some(false)), (dense.clone(), dense_total));
                assert_eq!(index.search(query, group, k), (dense.clone(), dense_total));
                answers += dense.len();
            }
        }
    }
    // Most queries matched something: the comparison is not between two empty answers.
    assert!(answers > 1_000, "{answers}");
}
