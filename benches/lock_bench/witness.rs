//! The in-process check of mutual exclusion the mutex modes share.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// In-process witness of mutual exclusion: a flag that must be clear on entry, and a counter
/// updated with a load / yield / store that loses updates if two holders overlap.
#[derive(Default)]
pub(crate) struct Witness {
    pub(crate) inside: AtomicBool,
    pub(crate) counter: AtomicU64,
    pub(crate) violations: AtomicU64,
}

impl Witness {
    pub(crate) async fn critical_section(&self) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let v = self.counter.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.counter.store(v + 1, Ordering::SeqCst);
        self.inside.store(false, Ordering::SeqCst);
    }
}
