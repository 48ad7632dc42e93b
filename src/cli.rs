//! What the binary does: serve, or run the demo executor.

use crate::config::{Cli, Command, ServerConfig};
use crate::telemetry::TelemetryConfig;

pub fn run(cli: Cli) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        // Inside the runtime: the OTLP exporter's channel runs on it.
        let telemetry = crate::telemetry::init(&TelemetryConfig::from_env())?;
        let result = match cli.command {
            Command::Serve(args) => serve(args.into()).await,
            Command::DemoExecutor { addr } => crate::demo::serve(addr).await,
        };
        // Exports the spans still batched.
        telemetry.shutdown().await;
        result
    })
}

async fn serve(cfg: ServerConfig) -> anyhow::Result<()> {
    let server = crate::server::start(cfg.clone()).await?;
    println!(
        "toolrouter listening: grpc={} http={} store={}{}",
        server.grpc_addr,
        server.http_addr,
        crate::store::redact_url(&cfg.store),
        if cfg.tls.is_some() { " tls=on" } else { "" }
    );
    shutdown_signal().await;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
