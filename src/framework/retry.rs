//! Retry policies with Curator's names and formulas.
//!
//! A policy only answers "may I try again, and after how long?"; the loop that asks it is in
//! [`retry_loop`](super::retry_loop).

use std::fmt::Debug;
use std::time::Duration;

use rand::Rng;

/// Decides whether a failed operation may be retried, and how long to sleep first.
///
/// Set with [`CuratorClientBuilder::retry_policy`](crate::CuratorClientBuilder::retry_policy);
/// Curator's six policies are here, and any other is a small implementation.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use zk_curator::RetryPolicy;
///
/// /// Retries 5 times, 200 ms apart, but only during the first 2 s of an operation.
/// #[derive(Debug)]
/// struct Brief;
///
/// impl RetryPolicy for Brief {
///     fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
///         (retry_count < 5 && elapsed < Duration::from_secs(2)).then_some(Duration::from_millis(200))
///     }
/// }
///
/// let builder = zk_curator::CuratorClient::builder("zk1:2181").retry_policy(Brief);
/// ```
pub trait RetryPolicy: Debug + Send + Sync + 'static {
    /// `retry_count` is 0 for the first retry; `elapsed` is the time since the operation started.
    /// Returns the sleep before the next attempt, or `None` to give up.
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration>;
}

/// Curator's cap on exponential retries, so `2^(n+1)` cannot overflow.
const MAX_EXPONENTIAL_RETRIES: u32 = 29;

fn exponential_sleep(base: Duration, retry_count: u32, max_sleep: Duration) -> Duration {
    // Curator: base * max(1, random(0 .. 2^(retryCount+1) - 1)), capped.
    let bound = 1u64 << (retry_count.min(MAX_EXPONENTIAL_RETRIES) + 1);
    let factor = rand::thread_rng().gen_range(0..bound).max(1);
    base.saturating_mul(factor.min(u32::MAX as u64) as u32).min(max_sleep)
}

/// Retries up to `max_retries` times with a randomised, growing sleep (Curator's `ExponentialBackoffRetry`).
///
/// Retry *n* (from 0) sleeps `base_sleep` times a random factor from 1 to 2<sup>n+1</sup> − 1.
///
/// ```
/// use std::time::Duration;
/// use zk_curator::{CuratorClient, ExponentialBackoffRetry};
///
/// // Curator: new ExponentialBackoffRetry(1000, 3)
/// let builder = CuratorClient::builder("zk1:2181")
///     .retry_policy(ExponentialBackoffRetry::new(Duration::from_secs(1), 3));
/// ```
#[derive(Clone, Debug)]
pub struct ExponentialBackoffRetry {
    base_sleep: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

impl ExponentialBackoffRetry {
    /// `max_retries` is capped at 29, as in Curator.
    pub fn new(base_sleep: Duration, max_retries: u32) -> Self {
        Self::with_max_sleep(base_sleep, max_retries, Duration::MAX)
    }

    /// Like [`new`](Self::new) with every sleep capped at `max_sleep`.
    pub fn with_max_sleep(base_sleep: Duration, max_retries: u32, max_sleep: Duration) -> Self {
        Self { base_sleep, max_retries: max_retries.min(MAX_EXPONENTIAL_RETRIES), max_sleep }
    }
}

impl RetryPolicy for ExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        (retry_count < self.max_retries).then(|| exponential_sleep(self.base_sleep, retry_count, self.max_sleep))
    }
}

/// Exponential back-off whose sleep never exceeds a bound (Curator's `BoundedExponentialBackoffRetry`).
#[derive(Clone, Debug)]
pub struct BoundedExponentialBackoffRetry(ExponentialBackoffRetry);

impl BoundedExponentialBackoffRetry {
    /// Same argument order as Curator: base sleep, maximum sleep, maximum retries.
    pub fn new(base_sleep: Duration, max_sleep: Duration, max_retries: u32) -> Self {
        Self(ExponentialBackoffRetry::with_max_sleep(base_sleep, max_retries, max_sleep))
    }
}

impl RetryPolicy for BoundedExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries `n` times with a fixed sleep (Curator's `RetryNTimes`).
#[derive(Clone, Debug)]
pub struct RetryNTimes {
    n: u32,
    sleep: Duration,
}

impl RetryNTimes {
    /// `n` retries, `sleep` between them.
    pub fn new(n: u32, sleep: Duration) -> Self {
        Self { n, sleep }
    }
}

impl RetryPolicy for RetryNTimes {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        (retry_count < self.n).then_some(self.sleep)
    }
}

/// Retries exactly once (Curator's `RetryOneTime`).
#[derive(Clone, Debug)]
pub struct RetryOneTime(RetryNTimes);

impl RetryOneTime {
    /// One retry after `sleep`.
    pub fn new(sleep: Duration) -> Self {
        Self(RetryNTimes::new(1, sleep))
    }
}

impl RetryPolicy for RetryOneTime {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries with a fixed sleep until `max_elapsed` has passed (Curator's `RetryUntilElapsed`).
#[derive(Clone, Debug)]
pub struct RetryUntilElapsed {
    max_elapsed: Duration,
    sleep: Duration,
}

impl RetryUntilElapsed {
    /// Give up once `max_elapsed` has passed since the operation started.
    pub fn new(max_elapsed: Duration, sleep: Duration) -> Self {
        Self { max_elapsed, sleep }
    }
}

impl RetryPolicy for RetryUntilElapsed {
    fn allow_retry(&self, _retry_count: u32, elapsed: Duration) -> Option<Duration> {
        (elapsed < self.max_elapsed).then_some(self.sleep)
    }
}

/// Retries forever with a fixed sleep (Curator's `RetryForever`). Pair it with deadlines.
#[derive(Clone, Debug)]
pub struct RetryForever {
    interval: Duration,
}

impl RetryForever {
    /// Sleep `interval` between attempts.
    pub fn new(interval: Duration) -> Self {
        Self { interval }
    }
}

impl RetryPolicy for RetryForever {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn exponential_bounds_follow_curator() {
        let p = ExponentialBackoffRetry::new(10 * MS, 3);
        for retry in 0..3 {
            for _ in 0..200 {
                let sleep = p.allow_retry(retry, Duration::ZERO).unwrap();
                let max = 10 * MS * ((1 << (retry + 1)) - 1);
                assert!(sleep >= 10 * MS && sleep <= max, "retry {retry}: {sleep:?} not in [10ms, {max:?}]");
            }
        }
        assert_eq!(p.allow_retry(3, Duration::ZERO), None);
        // The random factor actually varies (a constant sleep would be a different policy).
        let samples: std::collections::HashSet<_> = (0..200).map(|_| p.allow_retry(2, Duration::ZERO)).collect();
        assert!(samples.len() > 1);
    }

    #[test]
    fn exponential_caps_retries_and_sleep() {
        let p = ExponentialBackoffRetry::new(MS, 1000);
        assert!(p.allow_retry(28, Duration::ZERO).is_some());
        assert_eq!(p.allow_retry(29, Duration::ZERO), None);
        let b = BoundedExponentialBackoffRetry::new(10 * MS, 25 * MS, 10);
        for _ in 0..200 {
            assert!(b.allow_retry(9, Duration::ZERO).unwrap() <= 25 * MS);
        }
        assert_eq!(b.allow_retry(10, Duration::ZERO), None);
    }

    #[test]
    fn fixed_policies() {
        let n = RetryNTimes::new(2, 5 * MS);
        assert_eq!(n.allow_retry(0, Duration::ZERO), Some(5 * MS));
        assert_eq!(n.allow_retry(1, Duration::ZERO), Some(5 * MS));
        assert_eq!(n.allow_retry(2, Duration::ZERO), None);
        let one = RetryOneTime::new(7 * MS);
        assert_eq!(one.allow_retry(0, Duration::ZERO), Some(7 * MS));
        assert_eq!(one.allow_retry(1, Duration::ZERO), None);
        let until = RetryUntilElapsed::new(100 * MS, MS);
        assert_eq!(until.allow_retry(1000, 99 * MS), Some(MS));
        assert_eq!(until.allow_retry(0, 100 * MS), None);
        let forever = RetryForever::new(3 * MS);
        assert_eq!(forever.allow_retry(u32::MAX, Duration::MAX), Some(3 * MS));
    }
}
