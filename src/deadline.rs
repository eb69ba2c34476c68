//! Deadlines: every timed call of the crate turns its time limit into an [`Instant`] here.

use std::time::{Duration, Instant};

/// When a timed call gives up: a timeout from the call's start, or an instant — so that a caller
/// chaining several waits can give each the same end (`let end = Instant::now() + d;`, then
/// `lock.try_lock_for(end)`, `latch.await_leadership_timeout(end)`, ...).
///
/// Every timed wait of the crate takes `impl Into<Deadline>`: a [`Duration`] (from the call's
/// start, as before), a [`std::time::Instant`] or a [`tokio::time::Instant`]. A timeout too long
/// for the clock (`Duration::MAX`) saturates to a date a century away and an instant already past
/// means "do not wait": neither panics. What a call returns when its deadline passes is the crate's
/// one rule, in [docs/failure-semantics.md](crate::guide::failure_semantics) ("Time limits"): a wait for a state says whether it got
/// there (`Ok(false)` / `Ok(None)`), an operation fails with
/// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).
///
/// # Examples
/// ```no_run
/// # async fn demo(lock: zk_curator::locks::InterProcessMutex, latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
/// use std::time::{Duration, Instant};
///
/// // Both waits together take at most five seconds.
/// let end = Instant::now() + Duration::from_secs(5);
/// if latch.await_leadership_timeout(end).await? {
///     if let Some(guard) = lock.try_lock_for(end).await? {
///         // leader and holding the lock
///         # drop(guard);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(Limit);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Limit {
    After(Duration),
    At(Instant),
}

impl Deadline {
    /// `timeout` from the start of the call it is given to.
    pub const fn after(timeout: Duration) -> Deadline {
        Deadline(Limit::After(timeout))
    }

    /// At `instant`.
    pub const fn at(instant: Instant) -> Deadline {
        Deadline(Limit::At(instant))
    }

    /// The instant this deadline is for a call starting at `start` (saturating, never panicking).
    pub(crate) fn instant_from(self, start: Instant) -> Instant {
        match self.0 {
            Limit::After(timeout) => saturating_add(start, timeout),
            Limit::At(instant) => instant,
        }
    }

    /// The time limit of a call starting now: the timeout given, or what is left until the
    /// instant (zero once it has passed). What the crate's timed calls wait and name in their
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).
    pub fn remaining(self) -> Duration {
        match self.0 {
            Limit::After(timeout) => timeout,
            Limit::At(instant) => instant.saturating_duration_since(Instant::now()),
        }
    }
}

impl From<Duration> for Deadline {
    fn from(timeout: Duration) -> Deadline {
        Deadline::after(timeout)
    }
}

impl From<Instant> for Deadline {
    fn from(instant: Instant) -> Deadline {
        Deadline::at(instant)
    }
}

impl From<tokio::time::Instant> for Deadline {
    fn from(instant: tokio::time::Instant) -> Deadline {
        Deadline::at(instant.into_std())
    }
}

fn saturating_add(now: Instant, timeout: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    now.checked_add(timeout).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}

/// The instant `timeout` from now; a timeout too long for the clock (`Duration::MAX`) saturates
/// to a date a century away rather than overflowing (and panicking).
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    saturating_add(Instant::now(), timeout)
}

/// Runs a call to which the caller gave `timeout` (none: untimed), started now: a deadline error
/// it returns names that timeout and the time since now, whichever inner step's deadline ended it
/// (an inner retry loop only knows the remainder it was given).
pub(crate) async fn naming_timeout<T>(
    timeout: Option<Duration>,
    call: impl std::future::Future<Output = crate::Result<T>>,
) -> crate::Result<T> {
    let Some(timeout) = timeout else { return call.await };
    let started = Instant::now();
    call.await.map_err(|e| e.naming_timeout(timeout, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_never_panics_and_a_past_instant_leaves_nothing() {
        let now = Instant::now();
        assert!(Deadline::from(Duration::MAX).instant_from(now) > now);
        assert_eq!(Deadline::from(Duration::MAX).remaining(), Duration::MAX);
        assert_eq!(Deadline::from(now - Duration::from_millis(1).min(now.elapsed())).remaining(), Duration::ZERO);
        let soon = now + Duration::from_secs(60);
        assert_eq!(Deadline::from(soon).instant_from(now), soon);
        assert_eq!(Deadline::from(tokio::time::Instant::from_std(soon)).instant_from(now), soon);
        assert!(Deadline::from(soon).remaining() <= Duration::from_secs(60));
    }
}
