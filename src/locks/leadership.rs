//! What the two election recipes ([`LeaderLatch`](crate::LeaderLatch) and
//! [`LeaderSelector`](crate::LeaderSelector)) share: the leadership state and its stream
//! (Curator's `LeaderLatchListener` / `ConnectionStateListener` for a selector), close modes, and
//! reading the participants in line.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, watch};

use super::driver::LockDriver;
use super::hold::{Hold, HoldState};
use super::mutex::InterProcessMutex;
use crate::error::{ErrorCode, Result};

/// Where a participant of an election stands.
///
/// Leadership is a [`Hold`]: `Leader` is reported only while the hold is [`HoldState::Held`] —
/// connected, on the session that created the node, the node not deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeadershipState {
    /// Queued (or not taking part): someone else leads, or nobody yet.
    NotLeader,
    /// Leading: the hold is `Held`.
    Leader,
    /// Leading, but the connection is lost: the leadership may or may not survive. Stop doing
    /// what two leaders must not do at once, until `Leader` again.
    Suspended,
    /// The leadership is certainly gone (session ended or given up before the server could expire
    /// it, or someone deleted our node). A participant that goes on queues again, and so reports
    /// `NotLeader` next.
    Lost,
}

impl LeadershipState {
    pub(crate) fn of_hold(state: HoldState) -> LeadershipState {
        match state {
            HoldState::Held => LeadershipState::Leader,
            HoldState::Suspended => LeadershipState::Suspended,
            HoldState::Lost => LeadershipState::Lost,
        }
    }
}

/// What closing a latch or a selector tells its leadership listeners (Curator's `CloseMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseMode {
    /// Streams end without a last state (Curator's default).
    #[default]
    Silent,
    /// A participant that leads (or is suspended) when closed sends `NotLeader` before its
    /// streams end.
    NotifyLeader,
}

/// One participant of an election as seen in ZooKeeper (Curator's `Participant`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Participant {
    /// The participant id: the node's data as UTF-8 (lossy).
    pub id: String,
    /// Whether this participant's node is first in line.
    pub is_leader: bool,
}

/// The state of one participant, and every listener's queue of its changes.
#[derive(Debug)]
pub(crate) struct LeadershipSignal {
    state: watch::Sender<LeadershipState>,
    /// `None` once ended (closed): no new listener gets anything but the end.
    listeners: parking_lot::Mutex<Option<Vec<mpsc::UnboundedSender<LeadershipState>>>>,
}

impl LeadershipSignal {
    pub(crate) fn new() -> Self {
        Self {
            state: watch::Sender::new(LeadershipState::NotLeader),
            listeners: parking_lot::Mutex::new(Some(Vec::new())),
        }
    }

    pub(crate) fn get(&self) -> LeadershipState {
        *self.state.borrow()
    }

    /// Records `state`; listeners hear of it if it is a change.
    pub(crate) fn set(&self, state: LeadershipState) {
        // Under the listeners' lock, so that every listener sees the changes in one order.
        let mut listeners = self.listeners.lock();
        let Some(listeners) = listeners.as_mut() else {
            return;
        };
        if !self.state.send_if_modified(|now| std::mem::replace(now, state) != state) {
            return;
        }
        listeners.retain(|listener| listener.send(state).is_ok());
    }

    /// Ends every stream; with `notify`, a leader (or suspended leader) first hears `NotLeader`.
    pub(crate) fn end(&self, notify: bool) {
        if notify && matches!(self.get(), LeadershipState::Leader | LeadershipState::Suspended) {
            self.set(LeadershipState::NotLeader);
        }
        let mut listeners = self.listeners.lock();
        listeners.take();
        self.state.send_replace(LeadershipState::NotLeader);
    }

    pub(crate) fn watch(&self) -> watch::Receiver<LeadershipState> {
        self.state.subscribe()
    }

    /// A stream that starts with the state now.
    pub(crate) fn stream(&self) -> LeadershipStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut listeners = self.listeners.lock();
        if let Some(listeners) = listeners.as_mut() {
            // Forget streams dropped since the last change, so that they do not pile up while the
            // state stays the same.
            listeners.retain(|listener| !listener.is_closed());
            // Cannot fail: `rx` is alive.
            let _ = tx.send(self.get());
            listeners.push(tx);
        }
        LeadershipStream { rx }
    }
}

/// Leadership changes of one latch or selector, from `leadership_changes()`: a
/// [`futures_core::Stream`] of [`LeadershipState`]s, starting with the state when it was made,
/// then every change once, in order. It ends when the participant is closed (or dropped).
///
/// It is a notification: the authority is `has_leadership()`, computed when asked.
#[derive(Debug)]
pub struct LeadershipStream {
    rx: mpsc::UnboundedReceiver<LeadershipState>,
}

impl LeadershipStream {
    /// The next state; `None` once the participant is closed. The same as `StreamExt::next`.
    ///
    /// # Cancel safety
    /// Cancel safe: a state not yet returned is returned by the next call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::LeaderLatch) -> zk_curator::Result<()> {
    /// use zk_curator::LeadershipState;
    /// let mut changes = latch.leadership_changes();
    /// while let Some(state) = changes.next().await {
    ///     match state {
    ///         LeadershipState::Leader => println!("leading: start the scheduler"),
    ///         _ => println!("{state:?}: pause the scheduler"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<LeadershipState> {
        self.rx.recv().await
    }
}

impl futures_core::Stream for LeadershipStream {
    type Item = LeadershipState;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LeadershipState>> {
        self.get_mut().rx.poll_recv(cx)
    }
}

/// Every participant in line, the leader first: the node data of the mutex's nodes in sort order.
/// Nodes that vanish while being read are left out; the first one read is flagged leader.
pub(crate) async fn read_participants<D: LockDriver>(mutex: &InterProcessMutex<D>) -> Result<Vec<Participant>> {
    let client = mutex.client();
    let mut participants = Vec::new();
    for node in mutex.participant_nodes().await? {
        match client.get_data(&node).await {
            Ok((data, _)) => participants.push(Participant {
                id: String::from_utf8_lossy(&data).into_owned(),
                is_leader: participants.is_empty(),
            }),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(participants)
}

/// The leading hold among `hold`, if it is `Held`.
pub(crate) fn held(hold: &Option<Arc<Hold>>) -> Option<Arc<Hold>> {
    hold.clone().filter(|hold| hold.hold_state() == HoldState::Held)
}
