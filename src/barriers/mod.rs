//! Barriers (Curator's `recipes/barriers`).
//!
//! * [`DistributedBarrier`] (Curator's `DistributedBarrier`): start from it — a node whose
//!   presence holds everyone back until it is removed;
//! * [`DistributedDoubleBarrier`] (Curator's `DistributedDoubleBarrier`): a set number of members
//!   enter together and leave together, round after round on one path ([`READY_NODE_NAME`] marks
//!   a full round).
//!
//! ```no_run
//! use zk_curator::barriers::DistributedBarrier;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let barrier = DistributedBarrier::new(&client, "/barriers/deploy")?;
//! barrier.wait_on_barrier().await?;
//! # Ok(()) }
//! ```
//!
//! Inside: the waits of both share one helper here, a oneshot watch raced against the caller's
//! deadline and the client's connection status, so that every wake-up (a watch event, a
//! reconnection, a session replaced) leads to a fresh look at the nodes, never to a conclusion by
//! itself.

mod barrier;
mod double_barrier;

pub use barrier::DistributedBarrier;
pub use double_barrier::{DistributedDoubleBarrier, READY_NODE_NAME};

use std::time::Instant;

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::framework::session::Status;

/// Why a [`wake_up`] returned.
pub(crate) enum Woken {
    /// The watch fired with this event.
    Event(zk::WatchedEvent),
    /// The connection status changed (disconnected, reconnected, a new session, closed).
    Status,
    /// The deadline passed.
    Deadline,
}

/// Waits for `watcher`, a change of the connection status since `status` was taken, or
/// `deadline`, whichever comes first.
///
/// `status` is taken (`CuratorClient::status`) before the look that set the watch, so that
/// a change in between still wakes: a session given up then leaves the watch that will never
/// fire, and no later change comes until the link heals.
pub(crate) async fn wake_up(
    status: &mut watch::Receiver<Status>,
    watcher: zk::OneshotWatcher,
    deadline: Option<Instant>,
) -> Woken {
    let woken = async {
        tokio::select! {
            event = watcher.changed() => Woken::Event(event),
            _ = status.changed() => Woken::Status,
        }
    };
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), woken).await.unwrap_or(Woken::Deadline),
        None => woken.await,
    }
}
