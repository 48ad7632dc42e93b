//! What the binary does: serve, or run the demo executor.

use crate::config::{Cli, Command, ServerConfig};

pub fn run(cli: Cli) -> anyhow::Result<()> {
    crate::telemetry::init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(args.into()).await,
            Command::DemoExecutor { addr } => crate::demo::serve(addr).await,
        }
    })
}

async fn serve(cfg: ServerConfig) -> anyhow::Result<()> {
    let server = crate::server::start(cfg.clone()).await?;
    println!(
        "toolrouter listening: grpc={} http={} store={}",
        server.grpc_addr,
        server.http_addr,
        crate::store::redact_url(&cfg.store)
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
