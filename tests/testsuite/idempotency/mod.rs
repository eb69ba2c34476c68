//! Idempotency keys (`IdempotencyKeys`) against a real server: one `Started` among concurrent
//! duplicates, a crashed claimant's key free again, a lost claim's `complete` refused, retention
//! (TTL nodes, sweep), bad keys, cancelled or dropped calls leaving nothing behind, and a claim
//! whose session the client gave up neither recorded nor kept once the old session comes back.

mod claims;
mod connection_cuts;
mod given_up_sessions;
mod lifecycle;
mod lost_replies;
mod retention;
mod states;
mod suspended_releases;

use std::time::Duration;

use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention};
use zk_curator::CuratorClient;

/// Keys under a fresh base path, outcomes kept a day (TTL nodes: the testing server enables them).
pub fn keys(client: &CuratorClient, name: &str) -> IdempotencyKeys {
    IdempotencyKeys::new(client, &crate::support::unique_path(name), Retention::Ttl(Duration::from_secs(86_400)))
        .expect("valid base")
}

/// What `begin` answered, without the claim: "started", "in-progress" or "done:<result>".
pub fn kind(begun: &Begin) -> String {
    match begun {
        Begin::Started(_) => "started".into(),
        Begin::InProgress { .. } => "in-progress".into(),
        Begin::Done { result } => format!("done:{}", String::from_utf8_lossy(result)),
        _ => "other".into(),
    }
}

/// The claim of a `Started`, or a panic naming what was answered.
pub fn started(begun: Begin, what: &str) -> zk_curator::idempotency::IdempotencyClaim {
    match begun {
        Begin::Started(claim) => claim,
        other => panic!("{what}: expected Started, got {}", kind(&other)),
    }
}
