//! The retry loop (Curator's `RetryLoop`) that follows a [`RetryPolicy`].
//!
//! The loop decides which errors are worth retrying (connection loss, timeouts, session moves and
//! expiry) and always lets the caller's deadline win over the policy.
//! [`CuratorClient::with_retry`](crate::CuratorClient::with_retry) is its public face; the
//! recipes' own loops (protected create, `LockInternals`) share its
//! [`Retrying::backoff_or_fail`] step, so there is one back-off for foreground work, and its
//! [`Retrying::connected`] wait, so that waiting for a connection is an attempt like any other:
//! a wait that ends without one (the connection timeout) is retried under the policy, never
//! returned on its own (as Curator's `RetryLoop` counts `blockUntilConnected`'s failure).

use std::future::Future;
use std::time::Instant;

use tracing::debug;
use zookeeper_client as zk;

use super::retry::RetryPolicy;
use super::session::{SessionIdentity, Sessions};
use crate::error::{Error, ErrorKind, Result};

/// One operation's retry bookkeeping: its policy, when it started, its deadline, its retries.
pub(crate) struct Retrying<'a> {
    policy: &'a dyn RetryPolicy,
    path: &'a str,
    start: Instant,
    deadline: Option<Instant>,
    retries: u32,
}

impl<'a> Retrying<'a> {
    pub(crate) fn new(policy: &'a dyn RetryPolicy, path: &'a str, deadline: Option<Instant>) -> Self {
        Self { policy, path, start: Instant::now(), deadline, retries: 0 }
    }

    /// True once the deadline (if any) has passed.
    pub(crate) fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// [`Error::DeadlineExceeded`] for this operation.
    pub(crate) fn deadline_exceeded(&self, during: &'static str) -> Error {
        Error::deadline_exceeded(self.path, during, self.start.elapsed())
    }

    /// Sleeps as the policy says before the next attempt, or returns `err` (or a deadline error
    /// when the sleep would end past the deadline). Only retryable and session-lost errors are
    /// retried.
    pub(crate) async fn backoff_or_fail(&mut self, err: Error) -> Result<()> {
        if !matches!(err.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
            return Err(err);
        }
        let Some(sleep) = self.policy.allow_retry(self.retries, self.start.elapsed()) else {
            return Err(err);
        };
        self.retries += 1;
        debug!(%err, retry_count = self.retries, ?sleep, "retrying");
        if self.deadline.is_some_and(|d| Instant::now().checked_add(sleep).is_none_or(|wake| wake >= d)) {
            return Err(self.deadline_exceeded("retrying"));
        }
        tokio::time::sleep(sleep).await;
        Ok(())
    }

    /// Waits for a connection as one step of this operation and returns the current handle with
    /// its session. Each wait is bounded by the connection timeout; one that ends without a
    /// connection is a retryable failure of this operation, retried under the policy (whose
    /// back-off it then sleeps), so the operation rides out a cut for as long as the policy allows.
    /// The deadline wins: past it, [`Error::DeadlineExceeded`].
    ///
    /// Recipes that run their own loop (claims, idempotency keys, locks, ...) wait here rather than
    /// on [`Sessions::connected`] alone, which gives up after one connection timeout.
    pub(crate) async fn connected(&mut self, sessions: &Sessions) -> Result<(zk::Client, SessionIdentity)> {
        loop {
            if self.expired() {
                return Err(self.deadline_exceeded("waiting for a connection for"));
            }
            match sessions.connected(self.path, self.deadline).await {
                Ok(connected) => return Ok(connected),
                // The deadline ended the wait: it is what the caller hears about.
                Err(e) if e.is_retryable() && self.expired() => {
                    return Err(self.deadline_exceeded("waiting for a connection for"))
                }
                Err(e) => self.backoff_or_fail(e).await?,
            }
        }
    }
}

/// Runs `op` on the current session until it succeeds, the policy gives up, or the deadline
/// passes. Each attempt first waits for a connection ([`Retrying::connected`]).
pub(crate) async fn retry_loop<T, F, Fut>(
    sessions: &Sessions,
    policy: &dyn RetryPolicy,
    path: &str,
    deadline: Option<Instant>,
    mut op: F,
) -> Result<T>
where
    F: FnMut(zk::Client) -> Fut,
    Fut: Future<Output = std::result::Result<T, zk::Error>>,
{
    let mut retrying = Retrying::new(policy, path, deadline);
    loop {
        // A deadline already passed sends nothing: a request sent now would report a deadline
        // error and could still be applied.
        if retrying.expired() {
            return Err(retrying.deadline_exceeded("waiting for"));
        }
        let (zk, _) = retrying.connected(sessions).await?;
        let attempt = op(zk);
        let result = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), attempt).await {
                Ok(r) => r.map_err(|e| Error::zk(path, e)),
                Err(_) => return Err(retrying.deadline_exceeded("waiting for")),
            },
            None => attempt.await.map_err(|e| Error::zk(path, e)),
        };
        match result {
            Ok(v) => return Ok(v),
            Err(err) => retrying.backoff_or_fail(err).await?,
        }
    }
}
