//! Deadlines: every timed call of the crate turns its timeout into an [`Instant`] here.

use std::time::{Duration, Instant};

/// The instant `timeout` from now; a timeout too long for the clock (`Duration::MAX`) saturates
/// to a date a century away rather than overflowing (and panicking).
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    let now = Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}
