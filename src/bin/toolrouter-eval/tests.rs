//! The evaluation harness on a tiny hand-made set (tests/fixtures/retrieval/tiny): one query
//! per split, so each split row is one query's hand-checkable metrics.
use std::path::Path;

use super::eval::{self, EvalOptions, Row, SetReport};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/retrieval"))
}

fn tiny() -> SetReport {
    let sets = eval::load_sets(root(), None).unwrap();
    // catalog_only has no queries.jsonl and is skipped.
    assert_eq!(sets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["tiny"]);
    eval::evaluate(&sets[0], &EvalOptions::default()).unwrap()
}

fn row<'a>(rep: &'a SetReport, split: &str) -> &'a Row {
    rep.rows.iter().find(|r| r.split == split).unwrap_or_else(|| panic!("no row {split}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn metric_functions() {
    assert!(close(eval::recall_at(&[3, 1, 2], &[1, 2], 1), 0.0));
    assert!(close(eval::recall_at(&[3, 1, 2], &[1, 2], 2), 0.5));
    assert!(close(eval::recall_at(&[3, 1, 2], &[1, 2], 10), 1.0));
    // One relevant tool at rank 2: 1 / log2(3).
    assert!(close(eval::ndcg_at(&[3, 1], &[1], 10), 1.0 / 3f64.log2()));
    // Two relevant, found at ranks 1 and 3: (1 + 1/2) / (1 + 1/log2 3).
    assert!(close(eval::ndcg_at(&[1, 9, 2], &[1, 2], 10), 1.5 / (1.0 + 1.0 / 3f64.log2())));
    let none = eval::ndcg_at(&[9, 8], &[1], 10);
    assert!(close(none, 0.0) && none.is_sign_positive());
}

#[test]
fn catalog_names_follow_spec_section_3() {
    assert_eq!(eval::canonical_name("my_tools", "select"), "my_utools__select");
    assert_eq!(eval::canonical_name("a_", "b"), "a_u__b");
    assert_eq!(eval::canonical_name("a", "_b"), "a___b");
    assert_eq!(eval::canonical_name("a_u", "b"), "a_uu__b");
    assert_eq!(eval::sanitize_group("OTT details"), "OTT_details");
    assert_eq!(eval::sanitize_group("a__b"), "a_b");
    assert_eq!(eval::sanitize_group("3D printing!"), "g3D_printing");
    assert_eq!(eval::sanitize_group("必应"), "g");
    assert_eq!(eval::sanitize_group(&"x".repeat(40)).len(), 32);
    assert_eq!(eval::sanitize_local("Advanced Search"), "Advanced_Search");
    assert_eq!(eval::sanitize_local("???"), "tool");

    let set = eval::load_set(&root().join("tiny")).unwrap().unwrap();
    let docs = &set.catalog.docs;
    let find = |id: &str| &docs[set.catalog.ids.iter().position(|i| i == id).unwrap()];
    // Group falls back to the domain; spaces become `_`; clashing local names get a suffix.
    assert_eq!(find("calculator").canonical, "Math__calculator");
    assert_eq!(find("My Files::read file").canonical, "My_uFiles__read_file");
    assert_eq!(find("My Files::read_file").name, "read_file-2");
    // Property names at any depth (here inside array items).
    // (A compiled catalog gives them as one space-separated string.)
    let mut props: Vec<&str> = find("billing::create_invoice").property_names.iter().flat_map(|p| p.split(' ')).collect();
    props.sort();
    assert_eq!(props, ["lines", "order_id", "quantity", "sku"]);
    // Query relevance resolves to doc numbers; unknown ids are counted, and a query left
    // without any known relevant tool is dropped.
    assert_eq!(set.unknown_relevant, 2);
    assert_eq!(set.queries.len(), 5);
}

#[test]
fn per_query_metrics_are_hand_checkable() {
    let rep = tiny();
    assert_eq!(rep.tools, 12);
    assert_eq!(rep.rows[0].split, "all");
    assert_eq!(rep.rows[0].queries, 5);
    assert_eq!(rep.rows.len(), 6);

    // Every ranker has its metrics (the loops below would pass on none).
    for split in ["all", "exact", "miss"] {
        let rankers: Vec<&str> = row(&rep, split).rankers.iter().map(|m| m.ranker.as_str()).collect();
        assert_eq!(rankers, ["keyword", "natural", "bm25"], "{split}");
    }
    // The exact local name ranks first in every ranker.
    for m in &row(&rep, "exact").rankers {
        assert!(close(m.recall_at_1, 100.0), "{m:?}");
    }
    let nat = |split| row(&rep, split).ranker("natural").unwrap().clone();
    assert!(close(nat("single").recall_at_1, 100.0));
    assert!(close(nat("unknown").recall_at_1, 100.0));
    // Two relevant tools, both in the top 2: half found at 1, all at 5, ideal nDCG.
    let multi = nat("multi");
    assert!(close(multi.recall_at_1, 50.0));
    assert!(close(multi.recall_at_5, 100.0));
    assert!(close(multi.ndcg_at_10, 100.0));
    // No query word occurs in the catalog: nothing found by anyone.
    for m in &row(&rep, "miss").rankers {
        assert!(close(m.recall_at_10, 0.0) && close(m.ndcg_at_10, 0.0), "{m:?}");
    }
    // `all` is the mean over the five queries.
    let all = row(&rep, "all").ranker("natural").unwrap();
    assert!(close(all.recall_at_1, (100.0 + 100.0 + 50.0 + 0.0 + 100.0) / 5.0));
    assert!(close(all.recall_at_5, 80.0));
    assert!(close(all.recall_at_10, 80.0));
    assert!(close(all.ndcg_at_10, 80.0));
    assert!(all.p50_us <= all.p99_us);
}

#[test]
fn selection_options_and_targets() {
    let set = eval::load_set(&root().join("tiny")).unwrap().unwrap();
    let opts = EvalOptions { max_queries: Some(2), ..EvalOptions::default() };
    assert_eq!(eval::evaluate(&set, &opts).unwrap().rows[0].queries, 2);
    let halves: usize = [eval::Half::A, eval::Half::B]
        .into_iter()
        .map(|h| {
            let opts = EvalOptions { half: Some(h), ..EvalOptions::default() };
            eval::evaluate(&set, &opts).unwrap().rows[0].queries
        })
        .sum();
    assert_eq!(halves, 5);

    let run = eval::run(root(), Some(&["tiny".to_owned()]), &EvalOptions::default()).unwrap();
    // Targets are checked on `all` and on splits of at least TARGET_MIN_QUERIES queries.
    assert_eq!(run.targets.len(), 1);
    assert_eq!(run.targets[0].split, "all");
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(json["sets"][0]["rows"][0]["rankers"][1]["ranker"], "natural");
    assert!(eval::render(&run).contains("tiny"));
    assert!(eval::run(root(), Some(&["nope".to_owned()]), &EvalOptions::default()).is_err());
}
