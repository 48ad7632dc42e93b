//! Hybrid search's cost with a real model (issue 18 targets, 2 cores): the model's load time
//! and resident memory against its file size, tool texts embedded per second (the background
//! path: length-sorted batches), and natural-language query latency with the model (embed the
//! query, lexical ranking, nearest tools, fusion) against without it (lexical only), on the
//! same catalog and queries.
//!
//! `cargo bench --bench embedding [-- --model DIR] [--texts N] [--queries N]`. The model comes
//! from `--model`, else `TOOLROUTER_EMBEDDING_MODEL`, else `TOOLROUTER_TEST_EMBEDDING_MODEL`;
//! the catalog and queries are StableToolBench's from `../shared/data/retrieval` when present,
//! otherwise generated. Prints figures, then one JSON line per figure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use toolrouter::search::SearchDoc;
use toolrouter::search::embed::Embedder;
use toolrouter::search::hybrid::{self, Fusion, Vectors};
use toolrouter::search::natural::{NaturalConfig, NaturalIndex};

struct Options {
    model: PathBuf,
    texts: usize,
    queries: usize,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mut model = std::env::var_os("TOOLROUTER_EMBEDDING_MODEL").or_else(|| std::env::var_os("TOOLROUTER_TEST_EMBEDDING_MODEL")).map(PathBuf::from);
    let (mut texts, mut queries) = (1000, 300);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = args.next().map(PathBuf::from),
            "--texts" => texts = args.next().and_then(|v| v.parse().ok()).expect("--texts N"),
            "--queries" => queries = args.next().and_then(|v| v.parse().ok()).expect("--queries N"),
            _ => {} // cargo passes --bench
        }
    }
    let model =
        model.expect("give the model directory: --model DIR or TOOLROUTER_EMBEDDING_MODEL (scripts/fetch-embedding-model.sh DIR fetches one)");
    Options { model, texts, queries }
}

#[derive(Deserialize)]
struct ToolLine {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    group: String,
}

#[derive(Deserialize)]
struct QueryLine {
    text: String,
}

/// StableToolBench's tools and queries, or a generated stand-in.
fn workload() -> (Vec<SearchDoc>, Vec<String>, &'static str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/retrieval/stabletoolbench");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    if let (Some(tools), Some(queries)) = (read("tools.jsonl"), read("queries.jsonl")) {
        let docs = tools
            .lines()
            .filter_map(|l| serde_json::from_str::<ToolLine>(l).ok())
            .map(|t| SearchDoc { name: t.name, description: t.description, group: t.group, ..SearchDoc::default() })
            .collect();
        let queries = queries.lines().filter_map(|l| serde_json::from_str::<QueryLine>(l).ok()).map(|q| q.text).collect();
        return (docs, queries, "stabletoolbench");
    }
    let nouns = ["invoice", "customer", "flight", "hotel", "payment", "ticket", "order", "report", "file", "message", "calendar", "weather"];
    let verbs = ["get", "create", "search", "cancel", "update", "list", "send", "book", "delete", "export"];
    let mut docs = Vec::new();
    for (i, n) in nouns.iter().cycle().take(2000).enumerate() {
        let v = verbs[i % verbs.len()];
        let description = format!("{v} a {n} by its id or by filters such as date range, status and owner; returns the matching {n} records ({i}).");
        docs.push(SearchDoc { name: format!("{v}_{n}_{i}"), description, group: format!("g{}", i / 50), ..SearchDoc::default() });
    }
    let queries = (0..500).map(|i| format!("could you {} the {} I got last week, number {i}", verbs[i % 10], nouns[i % 12])).collect();
    (docs, queries, "generated")
}

/// VmRSS and VmHWM of this process, bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn json(figure: &str, value: f64, extra: &str) {
    println!("{{\"bench\":\"embedding\",\"figure\":\"{figure}\"{extra},\"value\":{value:.3}}}");
}

fn main() {
    let opts = options();
    let (docs, queries, source) = workload();
    let (rss_before, _) = memory();
    let started = Instant::now();
    let embedder = Embedder::load(&opts.model).unwrap_or_else(|e| panic!("{e}"));
    let load = started.elapsed();
    let (rss_loaded, _) = memory();
    let file = embedder.file_bytes();
    let resident = rss_loaded.saturating_sub(rss_before);
    println!(
        "model {} ({:.1} MB file): loaded in {:.0} ms, {:.1} MB resident ({:.2}× the file)",
        embedder.id(),
        file as f64 / 1e6,
        ms(load),
        resident as f64 / 1e6,
        resident as f64 / file as f64
    );

    // Tool texts, as the background worker embeds them.
    let texts: Vec<String> = docs.iter().map(hybrid::tool_text).collect();
    let sample: Vec<&str> = texts.iter().take(opts.texts).map(String::as_str).collect();
    let started = Instant::now();
    let mut vectors = Vec::with_capacity(docs.len());
    for chunk in sample.chunks(toolrouter::search::embed::BATCH) {
        vectors.extend(embedder.embed(chunk).expect("embed"));
    }
    let took = started.elapsed();
    let per_s = sample.len() as f64 / took.as_secs_f64();
    let (rss_after, hwm) = memory();
    println!(
        "{} {source} tool texts embedded in {:.1} s: {per_s:.1} texts/s; RSS {:.1} MB after, peak {:.1} MB",
        sample.len(),
        took.as_secs_f64(),
        rss_after as f64 / 1e6,
        hwm as f64 / 1e6
    );
    // The rest of the catalog, untimed, for the query measurements.
    let rest: Vec<&str> = texts.iter().skip(sample.len()).map(String::as_str).collect();
    for chunk in rest.chunks(toolrouter::search::embed::BATCH) {
        vectors.extend(embedder.embed(chunk).expect("embed"));
    }
    let vectors = Vectors::new(embedder.dims(), vectors);

    let natural = NaturalIndex::build(&docs, &NaturalConfig::default());
    let fusion = Fusion::default();
    let qs: Vec<&String> = queries.iter().step_by((queries.len() / opts.queries.max(1)).max(1)).take(opts.queries).collect();
    let mut lexical_times = Vec::new();
    let mut hybrid_times = Vec::new();
    let mut embed_times = Vec::new();
    for q in &qs {
        let started = Instant::now();
        std::hint::black_box(natural.search(q, None, 10));
        lexical_times.push(started.elapsed());

        let started = Instant::now();
        let qv = embedder.embed(&[q.as_str()]).expect("embed").pop().expect("one vector");
        embed_times.push(started.elapsed());
        let (lexical, _) = natural.search(q, None, fusion.depth);
        let semantic = vectors.nearest(&qv, fusion.depth, |_| true);
        std::hint::black_box(hybrid::fuse(&lexical, &semantic, &fusion));
        hybrid_times.push(started.elapsed());
    }
    // Queries as models write them for discover_tools: a few words.
    let mut short_times = Vec::new();
    for q in &qs {
        let short: String = q.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        let started = Instant::now();
        let qv = embedder.embed(&[short.as_str()]).expect("embed").pop().expect("one vector");
        let (lexical, _) = natural.search(&short, None, fusion.depth);
        let semantic = vectors.nearest(&qv, fusion.depth, |_| true);
        std::hint::black_box(hybrid::fuse(&lexical, &semantic, &fusion));
        short_times.push(started.elapsed());
    }
    for t in [&mut lexical_times, &mut hybrid_times, &mut embed_times, &mut short_times] {
        t.sort();
    }
    let (l50, l99) = (percentile(&lexical_times, 0.5), percentile(&lexical_times, 0.99));
    let (h50, h99) = (percentile(&hybrid_times, 0.5), percentile(&hybrid_times, 0.99));
    let (e50, e99) = (percentile(&embed_times, 0.5), percentile(&embed_times, 0.99));
    let (s50, s99) = (percentile(&short_times, 0.5), percentile(&short_times, 0.99));
    println!("{} queries over {} tools:", qs.len(), docs.len());
    println!("  without the model (lexical):   p50 {:.3} ms  p99 {:.3} ms   (target p99 ≤ 1 ms)", ms(l50), ms(l99));
    println!("  with the model (hybrid):       p50 {:.3} ms  p99 {:.3} ms   (target p99 ≤ 20 ms)", ms(h50), ms(h99));
    println!("    of which embedding the query: p50 {:.3} ms  p99 {:.3} ms (a repeated query is cached)", ms(e50), ms(e99));
    println!(
        "targets: {} texts/s ≥ 100: {}; resident {:.2}× ≤ 2×: {}",
        per_s.round(),
        per_s >= 100.0,
        resident as f64 / file as f64,
        resident <= 2 * file
    );

    json("load_ms", ms(load), "");
    json("model_file_bytes", file as f64, "");
    json("model_resident_bytes", resident as f64, "");
    json("texts_per_s", per_s, "");
    json("peak_rss_bytes", hwm as f64, "");
    let tools = format!(",\"tools\":{}", docs.len());
    json("p50_ms", ms(l50), &format!("{tools},\"ranker\":\"natural\""));
    json("p99_ms", ms(l99), &format!("{tools},\"ranker\":\"natural\""));
    json("p50_ms", ms(h50), &format!("{tools},\"ranker\":\"hybrid\""));
    json("p99_ms", ms(h99), &format!("{tools},\"ranker\":\"hybrid\""));
    json("query_embed_p99_ms", ms(e99), "");
    json("p50_ms", ms(s50), &format!("{tools},\"ranker\":\"hybrid\",\"queries\":\"six_words\""));
    json("p99_ms", ms(s99), &format!("{tools},\"ranker\":\"hybrid\",\"queries\":\"six_words\""));
}
