//! Deadlines: every timed call of the crate turns its timeout into an [`Instant`] here.

use std::time::{Duration, Instant};

/// The instant `timeout` from now; a timeout too long for the clock (`Duration::MAX`) saturates
/// to a date a century away rather than overflowing (and panicking).
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
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
