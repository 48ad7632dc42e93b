//! Re-reads a mounted file (API keys, JWKS) when its contents change.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Polls `path` every `interval` until `stop`. When the contents differ from the last seen
/// ones, `apply` parses and installs them (returning how many entries) or refuses them with a
/// message that must not quote the file; the last good contents stay in force. Contents are
/// compared, not modification times: a Kubernetes Secret volume swaps its `..data` symlink,
/// which a read through the path follows.
pub fn watch_file<F>(what: &'static str, path: PathBuf, interval: Duration, stop: CancellationToken, apply: F)
where
    F: Fn(&[u8]) -> Result<usize, String> + Send + 'static,
{
    tokio::spawn(async move {
        let mut seen = tokio::fs::read(&path).await.ok();
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut read_failed = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let text = match tokio::fs::read(&path).await {
                Ok(t) => {
                    read_failed = false;
                    t
                }
                Err(e) => {
                    if !read_failed {
                        tracing::error!(file = what, path = %path.display(), error = %e.kind(), "file unreadable; keeping the version in force");
                    }
                    read_failed = true;
                    continue;
                }
            };
            if seen.as_deref() == Some(text.as_slice()) {
                continue;
            }
            match apply(&text) {
                Ok(n) => tracing::info!(file = what, path = %path.display(), entries = n, "reloaded"),
                Err(e) => tracing::error!(file = what, path = %path.display(), error = %e, "{what} file rejected; keeping the version in force"),
            }
            seen = Some(text);
        }
    });
}
