//! Panics of in-process servers, re-raised in the test that owns them (see the comment at
//! `pub mod panics` in tests/common/mod.rs).

use std::sync::{Mutex, Once, PoisonError};
use std::thread::ThreadId;

use tokio::runtime::{Handle, Id};

/// How a re-raised panic's message starts; the hook does not record such panics again, so a
/// test that catches one (tests/harness.rs) does not see it in its other watches.
pub const RERAISED: &str = "panicked in an in-process server of this test";

/// One panic, as the hook saw it.
struct Recorded {
    thread: ThreadId,
    thread_name: String,
    /// The tokio runtime the panicking thread belonged to (a worker, a blocking-pool thread or
    /// the thread inside `block_on`), if any.
    runtime: Option<Id>,
    location: String,
    message: String,
}

/// Every panic of the process since the hook was installed, in order; never shrinks.
static PANICS: Mutex<Vec<Recorded>> = Mutex::new(Vec::new());

fn panics() -> std::sync::MutexGuard<'static, Vec<Recorded>> {
    PANICS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs (once per process) a panic hook that records the panic, then runs the hook that
/// was there before (the default one prints the panic as usual).
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = payload_text(info.payload());
            if !message.starts_with(RERAISED) {
                let thread = std::thread::current();
                let recorded = Recorded {
                    thread: thread.id(),
                    thread_name: thread.name().unwrap_or("<unnamed>").to_string(),
                    runtime: Handle::try_current().ok().map(|h| h.id()),
                    location: info.location().map(|l| l.to_string()).unwrap_or_default(),
                    message,
                };
                panics().push(recorded);
            }
            previous(info);
        }));
    });
}

/// A panic payload's text (`panic!` with a literal or with arguments), or a placeholder.
pub fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<a panic payload that is not text>".to_string()
    }
}

/// Watches for panics that belong to the test that made it: those since `start` on the same
/// tokio runtime (each `#[tokio::test]` has its own; any of its threads counts) or, for a
/// panic outside any runtime, on the same thread. When dropped it panics with their messages
/// (or, if the thread is already panicking, prints them).
pub struct PanicWatch {
    what: String,
    from: usize,
    thread: ThreadId,
    runtime: Option<Id>,
}

impl PanicWatch {
    /// Starts watching for `what` (named in the re-raised message, e.g. "the fake executor on
    /// 127.0.0.1:4000").
    pub fn start(what: impl Into<String>) -> Self {
        install_hook();
        PanicWatch {
            what: what.into(),
            from: panics().len(),
            thread: std::thread::current().id(),
            runtime: Handle::try_current().ok().map(|h| h.id()),
        }
    }

    /// The panics seen so far, one text each (thread, location, message).
    pub fn seen(&self) -> Vec<String> {
        panics()[self.from..]
            .iter()
            .filter(|p| match (p.runtime, self.runtime) {
                (Some(theirs), Some(ours)) => theirs == ours,
                _ => p.thread == self.thread,
            })
            .map(|p| format!("thread '{}' panicked at {}:\n{}", p.thread_name, p.location, p.message))
            .collect()
    }

    /// Panics now if any panic was seen (for a watch that is never dropped).
    pub fn check(&self) {
        if let Some(text) = self.report() {
            panic!("{text}");
        }
    }

    fn report(&self) -> Option<String> {
        let seen = self.seen();
        (!seen.is_empty()).then(|| format!("{RERAISED} ({} saw {} panic(s)):\n{}", self.what, seen.len(), seen.join("\n")))
    }
}

impl Drop for PanicWatch {
    fn drop(&mut self) {
        let Some(text) = self.report() else { return };
        if std::thread::panicking() {
            // A second panic would abort the test binary; the test fails already.
            eprintln!("{text}");
        } else {
            panic!("{text}");
        }
    }
}

/// Something that serves in the test process (a `RunningServer` without `TestServer`'s
/// plaintext channel, say) and the watch started before it; dropped after it, the watch
/// re-raises the panics of the test.
pub struct Watched<T> {
    pub inner: T,
    _watch: PanicWatch,
}

impl<T> Watched<T> {
    pub fn new(watch: PanicWatch, inner: T) -> Self {
        Watched { inner, _watch: watch }
    }
}

impl<T> std::ops::Deref for Watched<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner
    }
}
