//! `toolrouter-eval`: retrieval quality and latency of the rankers on the labelled tool sets
//! (see `eval.rs`).
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
mod eval;
mod hybrid;
mod loso;
#[cfg(test)]
mod tests;

use eval::{EvalOptions, Half, Ranker};
use toolrouter::search::embed::Embedder;
use toolrouter::search::hybrid::Fusion;
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
    /// Comma-separated rankers to run (hybrid and embedding need --embedding-model; with it,
    /// they are added to the default list).
    #[arg(long, value_delimiter = ',')]
    rankers: Option<Vec<RankerArg>>,
    /// A sentence-transformers BERT model directory: adds the hybrid and embedding rankers
    /// and the leave-one-set-out choice of the fusion.
    #[arg(long)]
    embedding_model: Option<PathBuf>,
    /// Instead of the ranker table: the leave-one-set-out check of the natural ranker's
    /// constants.
    #[arg(long)]
    loso_natural: bool,
    /// Exit with status 1 when a recall target fails (for CI; latency targets are checked by
    /// eye, in release builds).
    #[arg(long)]
    fail_on_targets: bool,
    /// Fusion settings as JSON (missing fields keep the defaults).
    #[arg(long)]
    fusion: Option<PathBuf>,
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
    Hybrid,
    Embedding,
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
    let fusion = match &args.fusion {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<Fusion>(&text).with_context(|| format!("parsing {}", p.display()))?
        }
        None => Fusion::default(),
    };
    let embedder = match &args.embedding_model {
        Some(dir) => Some(std::sync::Arc::new(Embedder::load(dir)?)),
        None => None,
    };
    let default_rankers: &[RankerArg] = if embedder.is_some() {
        &[RankerArg::Keyword, RankerArg::Natural, RankerArg::Hybrid, RankerArg::Bm25, RankerArg::Embedding]
    } else {
        &[RankerArg::Keyword, RankerArg::Natural, RankerArg::Bm25]
    };
    let rankers = args.rankers.clone().unwrap_or_else(|| default_rankers.to_vec());
    if embedder.is_none() && rankers.iter().any(|r| matches!(r, RankerArg::Hybrid | RankerArg::Embedding)) {
        anyhow::bail!("the hybrid and embedding rankers need --embedding-model DIR");
    }
    let opts = EvalOptions {
        max_queries: args.max_queries,
        half: args.half.map(|h| match h {
            HalfArg::A => Half::A,
            HalfArg::B => Half::B,
        }),
        natural,
        rankers: rankers
            .iter()
            .map(|r| match r {
                RankerArg::Keyword => Ranker::Keyword,
                RankerArg::Natural => Ranker::Natural,
                RankerArg::Bm25 => Ranker::Bm25,
                RankerArg::Hybrid => Ranker::Hybrid,
                RankerArg::Embedding => Ranker::Embedding,
            })
            .collect(),
        per_query: args.per_query,
        embedder,
        fusion,
    };
    if args.loso_natural {
        let sets = eval::load_sets(&args.data, args.sets.as_deref())?;
        print!("{}", loso::render(&loso::run(&sets, &opts), &opts.natural));
        return Ok(());
    }
    let report = eval::run(&args.data, args.sets.as_deref(), &opts)?;
    print!("{}", eval::render(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.fail_on_targets && report.targets.iter().any(|t| !t.recall_ok()) {
        anyhow::bail!("a recall target failed (see the lines marked FAIL)");
    }
    Ok(())
}
