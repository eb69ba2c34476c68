//! How long recorded outcomes are kept, and who removes them: [`Retention`].

use std::time::Duration;

use crate::CreateMode;

/// How long recorded outcomes are kept, and who removes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retention {
    /// Outcomes are TTL nodes (`CreateMode::PersistentWithTtl`): the server removes each one this
    /// long after it was recorded. Needs a server with `zookeeper.extendedTypesEnabled=true`;
    /// otherwise [`IdempotencyClaim::complete`](super::IdempotencyClaim::complete) fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `retention`.
    Ttl(Duration),
    /// Outcomes are plain persistent nodes;
    /// [`IdempotencyKeys::sweep_expired`](super::IdempotencyKeys::sweep_expired) removes those
    /// recorded longer ago than this (run it periodically).
    Sweep(Duration),
}

impl Retention {
    pub(super) fn duration(self) -> Duration {
        match self {
            Retention::Ttl(d) | Retention::Sweep(d) => d,
        }
    }

    pub(super) fn outcome_mode(self) -> CreateMode {
        match self {
            Retention::Ttl(ttl) => CreateMode::PersistentWithTtl(ttl),
            Retention::Sweep(_) => CreateMode::Persistent,
        }
    }
}
