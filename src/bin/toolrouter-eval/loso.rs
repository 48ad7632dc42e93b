//! Leave-one-set-out check of the lexical natural ranker's constants (`--loso-natural`): for
//! each constant, a few values (its default and "off" among them) are tried with the others
//! at their defaults; for each set held out in turn, every constant takes the value with the
//! best mean Recall@10 on the *other* sets, and the held-out set is measured with the
//! resulting settings. A constant whose chosen value is the default in every fold is
//! justified by data it was not tuned on; one that flips is reported as such.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use toolrouter::search::natural::{NaturalConfig, NaturalIndex};

use super::eval::{DataSet, EvalOptions, recall_at, selected};

/// The constants checked and the values tried (JSON paths into `NaturalConfig`).
pub fn grid() -> Vec<(&'static str, Vec<f64>)> {
    vec![
        ("k1", vec![0.9, 1.2, 1.5, 2.0]),
        ("name.weight", vec![1.0, 2.0, 3.0, 4.0]),
        ("description.b", vec![0.25, 0.5, 0.75]),
        ("group.weight", vec![0.0, 1.0, 2.5]),
        ("schema_descriptions.weight", vec![0.0, 0.3, 0.6]),
        ("bigram", vec![0.0, 0.25, 0.5]),
        ("name_coverage", vec![0.0, 1.0, 2.0, 3.0]),
        ("group_prior", vec![0.0, 0.15, 0.3, 0.6]),
        ("prf_weight", vec![0.0, 0.25, 0.5]),
    ]
}

fn with(base: &NaturalConfig, changes: &[(&str, f64)]) -> NaturalConfig {
    let mut v = serde_json::to_value(base).expect("config serializes");
    for (path, value) in changes {
        let mut at = &mut v;
        for part in path.split('.') {
            at = at.get_mut(part).unwrap_or_else(|| panic!("no setting {path}"));
        }
        *at = match at {
            Value::Number(n) if n.is_u64() => Value::from(*value as u64),
            _ => Value::from(*value),
        };
    }
    serde_json::from_value(v).expect("config deserializes")
}

fn r_at(set: &DataSet, opts: &EvalOptions, cfg: &NaturalConfig, k: usize) -> f64 {
    let index = NaturalIndex::build(&set.catalog.docs, cfg);
    let queries = selected(set, opts);
    let sum: f64 = queries.iter().map(|q| recall_at(&index.search(&q.text, None, k).0.iter().map(|x| x.0).collect::<Vec<_>>(), &q.relevant, k)).sum();
    100.0 * sum / queries.len().max(1) as f64
}

#[derive(Debug, Clone, Serialize)]
pub struct Fold {
    pub held_out: String,
    /// Constant → value chosen on the other sets.
    pub chosen: BTreeMap<String, f64>,
    pub default_r10: f64,
    pub chosen_r10: f64,
    pub default_r5: f64,
    pub chosen_r5: f64,
}

pub fn run(sets: &[DataSet], opts: &EvalOptions) -> Vec<Fold> {
    let base = &opts.natural;
    let default_value = |path: &str| -> f64 {
        let v = serde_json::to_value(base).expect("config serializes");
        path.split('.').fold(&v, |at, p| &at[p]).as_f64().unwrap_or(f64::NAN)
    };
    // r10[(constant, value)][set]
    let mut r10: BTreeMap<(&str, u32), Vec<f64>> = BTreeMap::new();
    for (path, values) in grid() {
        for &value in &values {
            let cfg = with(base, &[(path, value)]);
            r10.insert((path, (value as f32).to_bits()), sets.iter().map(|s| r_at(s, opts, &cfg, 10)).collect());
        }
    }
    sets.iter()
        .enumerate()
        .map(|(held, set)| {
            let mut chosen = BTreeMap::new();
            for (path, values) in grid() {
                let mean = |v: f64| {
                    let r = &r10[&(path, (v as f32).to_bits())];
                    let others: Vec<f64> = r.iter().enumerate().filter(|(i, _)| *i != held).map(|(_, x)| *x).collect();
                    others.iter().sum::<f64>() / others.len().max(1) as f64
                };
                // Ties keep the default, then the earlier value.
                let d = f64::from(default_value(path) as f32);
                let d = values.iter().copied().find(|v| (*v as f32) == (d as f32)).unwrap_or(values[0]);
                let best = values.iter().copied().fold(d, |best, v| if mean(v) > mean(best) + 1e-9 { v } else { best });
                chosen.insert(path.to_string(), best);
            }
            let changes: Vec<(&str, f64)> = chosen.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let cfg = with(base, &changes);
            Fold {
                held_out: set.name.clone(),
                default_r10: r_at(set, opts, base, 10),
                chosen_r10: r_at(set, opts, &cfg, 10),
                default_r5: r_at(set, opts, base, 5),
                chosen_r5: r_at(set, opts, &cfg, 5),
                chosen,
            }
        })
        .collect()
}

pub fn render(folds: &[Fold], defaults: &NaturalConfig) -> String {
    use std::fmt::Write;
    let mut s = String::from("\nleave-one-set-out check of the natural ranker's constants (chosen on the other sets):\n");
    let v = serde_json::to_value(defaults).expect("config serializes");
    for (path, _) in grid() {
        let d = path.split('.').fold(&v, |at, p| &at[p]).as_f64().unwrap_or(f64::NAN);
        let picks: Vec<String> = folds.iter().map(|f| format!("{}={}", f.held_out, f.chosen[path])).collect();
        let stable = folds.iter().all(|f| (f.chosen[path] as f32) == (d as f32));
        let _ = writeln!(
            s,
            "  {:<28} default {:<5} {}  {}",
            path,
            d,
            if stable { "kept in every fold" } else { "FLIPS:" },
            if stable { String::new() } else { picks.join(" ") }
        );
    }
    for f in folds {
        let _ = writeln!(
            s,
            "  held out {:<16} R@10 default {:.2} → chosen {:.2} ({:+.2});  R@5 {:.2} → {:.2}",
            f.held_out,
            f.default_r10,
            f.chosen_r10,
            f.chosen_r10 - f.default_r10,
            f.default_r5,
            f.chosen_r5
        );
    }
    s
}
