//! Re-reads mounted files (API keys, JWKS, the TLS certificate and key) when their contents
//! change. The one file watcher of the server.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Polls `path` every `interval` until `stop`. When the contents differ from `in_force` (those
/// read and applied at start-up) or from the last seen ones, `apply` parses and installs them
/// (returning how many entries) or refuses them with a message that must not quote the file;
/// the last good contents stay in force. Contents are compared, not modification times: a
/// Kubernetes Secret volume swaps its `..data` symlink, which a read through the path follows.
pub fn watch_file<F>(what: &'static str, path: PathBuf, in_force: Vec<u8>, interval: Duration, stop: CancellationToken, apply: F)
where
    F: Fn(&[u8]) -> Result<usize, String> + Send + 'static,
{
    watch_files(what, vec![path], vec![in_force], interval, stop, move |texts| apply(&texts[0]));
}

/// [`watch_file`] over files that only make sense together (a certificate and its key):
/// `apply` gets all their contents whenever any of them changed. `in_force` are the contents
/// already applied: the watcher starts from them, not from its own first read, so a change
/// made before its first tick is still applied. A set seen half-replaced is refused and
/// applied once the files agree again.
pub fn watch_files<F>(what: &'static str, paths: Vec<PathBuf>, in_force: Vec<Vec<u8>>, interval: Duration, stop: CancellationToken, apply: F)
where
    F: Fn(&[Vec<u8>]) -> Result<usize, String> + Send + 'static,
{
    let shown = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    tokio::spawn(async move {
        let mut seen = in_force;
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut read_failed = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let texts = match read_all(&paths).await {
                Ok(t) => {
                    read_failed = false;
                    t
                }
                Err(e) => {
                    if !read_failed {
                        tracing::error!(file = what, path = %shown, error = %e.kind(), "file unreadable; keeping the version in force");
                    }
                    read_failed = true;
                    continue;
                }
            };
            if seen == texts {
                continue;
            }
            match apply(&texts) {
                Ok(n) => tracing::info!(file = what, path = %shown, entries = n, "reloaded"),
                Err(e) => tracing::error!(file = what, path = %shown, error = %e, "{what} file rejected; keeping the version in force"),
            }
            seen = texts;
        }
    });
}

async fn read_all(paths: &[PathBuf]) -> std::io::Result<Vec<Vec<u8>>> {
    let mut texts = Vec::with_capacity(paths.len());
    for p in paths {
        texts.push(tokio::fs::read(p).await?);
    }
    Ok(texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_made_before_the_first_tick_is_applied() {
        let dir = std::env::temp_dir().join(format!("toolrouter-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys");
        // Loaded "old" at start-up; the file changed before the watcher first read it.
        std::fs::write(&path, b"new").unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        watch_file("test", path, b"old".to_vec(), Duration::from_millis(10), stop.clone(), move |text| {
            tx.send(text.to_vec()).map_err(|e| e.to_string())?;
            Ok(1)
        });
        let applied = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        stop.cancel();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(applied.expect("the new contents are applied").as_deref(), Some(&b"new"[..]));
    }
}
