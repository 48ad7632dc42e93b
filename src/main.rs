use clap::Parser;

fn main() -> anyhow::Result<()> {
    toolrouter::cli::run(toolrouter::config::Cli::parse())
}
