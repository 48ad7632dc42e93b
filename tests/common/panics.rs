//! Panics of in-process servers, re-raised in the test that owns them (see the comment at
//! `pub mod panics` in tests/common/mod.rs).

use std::sync::{Mutex, Once, PoisonError};
use std::thread::ThreadId;

use tokio::runtime::{Handle, Id};

/// How a re-raised panic's message starts; watches do not count such panics, so a test that
/// catches one (tests/harness.rs) does not see it again in its other watches.
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
    /// A watch's panic (its message starts with `RERAISED`).
    reraised: bool,
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
            let thread = std::thread::current();
            let recorded = Recorded {
                thread: thread.id(),
                thread_name: thread.name().unwrap_or("<unnamed>").to_string(),
                runtime: Handle::try_current().ok().map(|h| h.id()),
                location: info.location().map(|l| l.to_string()).unwrap_or_default(),
                reraised: message.starts_with(RERAISED),
                message,
            };
            panics().push(recorded);
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
/// (or, if the thread is already panicking, prints those before the one unwinding).
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

    /// The panics seen so far, one text each (thread, location, message); without the last
    /// one of this thread if `unwinding` (the panic this thread is unwinding from).
    fn seen(&self, unwinding: bool) -> Vec<String> {
        let panics = panics();
        let me = std::thread::current().id();
        let unwinding_from = if unwinding { panics.iter().rposition(|p| p.thread == me) } else { None };
        panics
            .iter()
            .enumerate()
            .skip(self.from)
            .filter(|&(i, p)| Some(i) != unwinding_from && !p.reraised)
            .filter(|(_, p)| match (p.runtime, self.runtime) {
                (Some(theirs), Some(ours)) => theirs == ours,
                _ => p.thread == self.thread,
            })
            .map(|(_, p)| format!("thread '{}' panicked at {}:\n{}", p.thread_name, p.location, p.message))
            .collect()
    }

    /// Panics now if any panic was seen (for a watch that is never dropped).
    pub fn check(&self) {
        if let Some(text) = self.report(false) {
            panic!("{text}");
        }
    }

    fn report(&self, unwinding: bool) -> Option<String> {
        let seen = self.seen(unwinding);
        (!seen.is_empty()).then(|| format!("{RERAISED} ({} saw {} panic(s)):\n{}", self.what, seen.len(), seen.join("\n")))
    }
}

impl Drop for PanicWatch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The test fails already, and a second panic would abort the test binary: print
            // the panics before the one unwinding (they may be why the test fails).
            if let Some(text) = self.report(true) {
                eprintln!("{text}");
            }
        } else if let Some(text) = self.report(false) {
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
