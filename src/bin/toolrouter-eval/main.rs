//! `toolrouter-eval`: retrieval quality and latency of the rankers on the labelled tool sets
//! (see `eval.rs`).
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
mod eval;
#[cfg(test)]
mod tests;

use eval::{EvalOptions, Half, Ranker};
use toolrouter::search::natural::NaturalConfig;

#[derive(Parser)]
#[command(about = "Evaluate toolrouter's search rankers on labelled tool-retrieval sets")]
struct Args {
    /// Directory holding one sub-directory per set (tools.jsonl + queries.jsonl).
    #[arg(long, default_value = "../shared/data/retrieval")]
    data: PathBuf,
    /// Also write the full report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Comma-separated set names (default: every set with queries).
    #[arg(long, value_delimiter = ',')]
    sets: Option<Vec<String>>,
    /// At most this many queries per set, evenly spaced.
    #[arg(long)]
    max_queries: Option<usize>,
    /// Only one half of the queries (hash of the query id), to check generalization.
    #[arg(long)]
    half: Option<HalfArg>,
    /// Comma-separated rankers to run.
    #[arg(long, value_delimiter = ',', default_value = "keyword,natural,bm25")]
    rankers: Vec<RankerArg>,
    /// Keep every query's top 10 per ranker in the JSON report.
    #[arg(long)]
    per_query: bool,
    /// Natural-ranker settings as JSON (missing fields keep the defaults), for tuning.
    #[arg(long)]
    natural_config: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum RankerArg {
    Keyword,
    Natural,
    Bm25,
}

#[derive(Clone, Copy, ValueEnum)]
enum HalfArg {
    A,
    B,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let natural = match &args.natural_config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<NaturalConfig>(&text).with_context(|| format!("parsing {}", p.display()))?
        }
        None => NaturalConfig::default(),
    };
    let opts = EvalOptions {
        max_queries: args.max_queries,
        half: args.half.map(|h| match h {
            HalfArg::A => Half::A,
            HalfArg::B => Half::B,
        }),
        natural,
        rankers: args
            .rankers
            .iter()
            .map(|r| match r {
                RankerArg::Keyword => Ranker::Keyword,
                RankerArg::Natural => Ranker::Natural,
                RankerArg::Bm25 => Ranker::Bm25,
            })
            .collect(),
        per_query: args.per_query,
    };
    let report = eval::run(&args.data, args.sets.as_deref(), &opts)?;
    print!("{}", eval::render(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
