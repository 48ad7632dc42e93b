//! The drain gate: work in flight holds a [`Ticket`]; once draining starts, new work is
//! refused and shutdown waits until the last ticket is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

#[derive(Default)]
pub struct Gate {
    draining: AtomicBool,
    inflight: AtomicUsize,
    idle: Notify,
}

/// One piece of work in flight; dropping it ends the work.
pub struct Ticket(Arc<Gate>);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ticket")
    }
}

impl Gate {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// A ticket, unless the gate is draining.
    pub fn enter(self: &Arc<Self>) -> Option<Ticket> {
        // Count first, then check: `wait_idle` (which sets the flag first) cannot miss it.
        self.inflight.fetch_add(1, Ordering::SeqCst);
        let ticket = Ticket(self.clone());
        (!self.is_draining()).then_some(ticket)
    }

    /// Work in flight right now.
    pub fn in_flight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// Refuses new work from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Returns once no work is in flight.
    pub async fn wait_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.inflight.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn draining_refuses_new_work_and_waits_for_work_in_flight() {
        let gate = Arc::new(Gate::default());
        let ticket = gate.enter().expect("open");
        gate.start_draining();
        assert!(gate.enter().is_none(), "refused while draining");
        assert_eq!(gate.in_flight(), 1, "a refused ticket is not counted");
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.wait_idle().await }
        });
        crate::settle().await;
        assert!(!waiting.is_finished());
        drop(ticket);
        waiting.await.expect("idle once the ticket is gone");
    }
}
