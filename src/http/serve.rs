//! Serving the HTTP listener's connections with hyper directly: `axum::serve` gives hyper no
//! timer, so an HTTP/1 request head would have no deadline. Here a head (the first, or the
//! next on a kept-alive connection) must arrive within the header timeout, HTTP/2 peers are
//! pinged, and shutdown is graceful: connections finish the responses in progress.

use std::time::Duration;

use futures::{Stream, StreamExt};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::listen::Places;

/// HTTP/2 streams one connection may have open at once.
const MAX_STREAMS: u32 = 256;

/// Serves `incoming` connections with `app` until `stop`, then lets every connection finish
/// its responses in progress (long-lived ones are cut by the caller's own deadline).
pub async fn serve<IO, S>(incoming: S, app: axum::Router, places: Places, stop: CancellationToken)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Stream<Item = IO> + Send,
{
    let header_timeout = places.limits().header_timeout;
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut incoming = std::pin::pin!(incoming);
    loop {
        let io = tokio::select! {
            _ = stop.cancelled() => break,
            next = incoming.next() => match next {
                Some(io) => io,
                None => break,
            },
        };
        let service = TowerToHyperService::new(app.clone());
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
            builder
                .http2()
                .timer(TokioTimer::new())
                .keep_alive_interval(Some(Duration::from_secs(30)))
                .keep_alive_timeout(Duration::from_secs(20))
                .max_concurrent_streams(MAX_STREAMS);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                served = conn.as_mut() => if let Err(e) = served {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                },
                _ = async { drop(closed.wait_for(|c| *c).await) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    places.all_closed().await;
}
