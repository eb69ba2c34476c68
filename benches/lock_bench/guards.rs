//! What the guard-style modes share: counting the waiters that joined the queue, timing hand-offs,
//! and the nodes a run should leave in line.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zk_curator::locks::{FencingToken, InterProcessMutex};
use zk_curator::CuratorClient;

use crate::BenchResult;

/// Awaits `fut`, counting its first poll in `polled`: after it the task has joined the lock's
/// queue (the local queue, or the create of its own node has been sent). The future comes boxed:
/// an argument of an async fn is kept in its state next to the pinned copy, which would count the
/// lock future twice in every task's memory.
pub(crate) async fn counting_first_poll<F: std::future::Future>(
    mut fut: std::pin::Pin<Box<F>>,
    polled: &AtomicUsize,
) -> F::Output {
    let mut first = true;
    std::future::poll_fn(|cx| {
        let out = fut.as_mut().poll(cx);
        if first {
            first = false;
            polled.fetch_add(1, Ordering::SeqCst);
        }
        out
    })
    .await
}

/// Session index of a holder outside the measured sessions (the blocking holder).
pub(crate) const OUTSIDE: usize = usize::MAX;

/// Times hand-offs between holders and checks fencing tokens, trusting the lock (the [`Witness`]
/// checks that trust): the holder that releases notes who it is and when it asked to release,
/// the next holder reads that when it is granted.
#[derive(Default)]
pub(crate) struct HandoffClock {
    last: std::sync::Mutex<Option<(usize, Instant)>>,
    token: std::sync::Mutex<Option<FencingToken>>,
    pub(crate) token_violations: AtomicU64,
}

impl HandoffClock {
    /// Called by a holder just granted: the time since the previous holder's release call, and
    /// whether that holder was on the same session.
    pub(crate) fn granted(&self, session: usize, at: Instant) -> Option<(Duration, bool)> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).take();
        last.map(|(s, released)| (at.saturating_duration_since(released), s == session))
    }

    /// Called by a holder just before it releases.
    pub(crate) fn releasing(&self, session: usize) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((session, Instant::now()));
    }

    /// Checks that `token` is larger than every token seen before; counts and reports it if not.
    pub(crate) fn check_token(&self, token: FencingToken) {
        let mut last = self.token.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = *last {
            if token <= previous && self.token_violations.fetch_add(1, Ordering::SeqCst) < 10 {
                eprintln!("lock_bench: FENCING TOKEN DID NOT INCREASE: {previous:?} then {token:?}");
            }
        }
        *last = Some(token);
    }
}

/// What one guard-style waiter measured.
#[derive(Default)]
pub(crate) struct GuardSample {
    /// Release call of the previous holder to our grant, and whether that holder was on our session.
    pub(crate) handoff: Option<(Duration, bool)>,
    /// How long `fencing_token()` took, when asked.
    pub(crate) token_call: Option<Duration>,
}

/// How many lock nodes W guard waiters on S sessions create while queued behind another holder:
/// one per session (the local queue), or one per waiter with `node_per_task`.
pub(crate) fn guard_nodes_expected(waiters: usize, sessions: usize, node_per_task: bool) -> usize {
    if node_per_task {
        waiters
    } else {
        sessions.min(waiters)
    }
}

/// A mutex for one task: sharing the client's local queue, or with a node of its own.
pub(crate) fn task_mutex(client: &CuratorClient, path: &str, node_per_task: bool) -> BenchResult<InterProcessMutex> {
    let mutex = InterProcessMutex::new(client, path)?;
    Ok(if node_per_task { mutex.with_node_per_task() } else { mutex })
}

/// How the tasks of `mutex-many-waiters --guards` take the lock.
#[derive(Clone, Copy)]
pub(crate) struct GuardStyle {
    /// Every holder asks for its fencing token.
    pub(crate) token: bool,
    /// A node per task (`with_node_per_task`).
    pub(crate) node_per_task: bool,
    /// Clones of one `InterProcessMutex` per session instead of one instance per task.
    pub(crate) one_instance: bool,
}

/// How contending tasks take the lock.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    /// Guard-style `lock()` instead of Curator-style `acquire()`.
    pub(crate) guards: bool,
    /// A node per task (`with_node_per_task`).
    pub(crate) node_per_task: bool,
}
