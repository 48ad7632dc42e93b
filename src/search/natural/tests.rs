//! Unit tests of the parent module.

use super::*;

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
