//! What the two election recipes ([`LeaderLatch`](crate::leader::LeaderLatch) and
//! [`LeaderSelector`](crate::leader::LeaderSelector)) share: the leadership state and its stream
//! (Curator's `LeaderLatchListener` / `ConnectionStateListener` for a selector), close modes, and
//! reading the participants in line.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::watch;

use crate::error::{ErrorCode, Result};
use crate::feed::DropOldest;
use crate::locks::driver::LockDriver;
use crate::locks::hold::{Hold, HoldState};
use crate::locks::mutex::InterProcessMutex;

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
    listeners: parking_lot::Mutex<Option<Vec<Arc<DropOldest<LeadershipState>>>>>,
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
        self.set_with(state, || {});
    }

    /// Runs `publish` (which makes what `state` describes visible, e.g. grants the hold), then
    /// records `state`; listeners hear of it if it is a change. `publish` runs also once ended.
    ///
    /// Both happen under the listeners' lock and the state's write lock: a listener told `state`
    /// (stream or watch) finds what `publish` made visible, and whoever saw that first and then
    /// reads the state or makes a stream waits for `state` — neither trails the other.
    pub(crate) fn set_with(&self, state: LeadershipState, publish: impl FnOnce()) {
        // Under the listeners' lock, so that every listener sees the changes in one order.
        let mut listeners = self.listeners.lock();
        match listeners.as_mut() {
            Some(listeners) => self.record(listeners, state, publish),
            None => publish(),
        }
    }

    /// [`set_with`](Self::set_with) under the listeners' lock, taken by the caller.
    fn record(
        &self,
        listeners: &mut Vec<Arc<DropOldest<LeadershipState>>>,
        state: LeadershipState,
        publish: impl FnOnce(),
    ) {
        // The closure runs under the state's write lock: a read of the state waits for it.
        let changed = self.state.send_if_modified(|now| {
            publish();
            std::mem::replace(now, state) != state
        });
        if !changed {
            return;
        }
        // A listener whose stream was dropped is only referenced here.
        listeners.retain(|listener| {
            listener.push(state);
            Arc::strong_count(listener) > 1
        });
    }

    /// Ends every stream; with `notify`, a leader (or suspended leader) first hears `NotLeader`.
    pub(crate) fn end(&self, notify: bool) {
        // The state is looked at under the listeners' lock: a grant recorded concurrently either
        // comes before (and is followed by `NotLeader`) or finds the streams ended.
        let mut guard = self.listeners.lock();
        if let Some(mut listeners) = guard.take() {
            if notify && matches!(self.get(), LeadershipState::Leader | LeadershipState::Suspended) {
                self.record(&mut listeners, LeadershipState::NotLeader, || {});
            }
            for listener in listeners {
                listener.end();
            }
        }
        self.state.send_replace(LeadershipState::NotLeader);
    }

    pub(crate) fn watch(&self) -> watch::Receiver<LeadershipState> {
        self.state.subscribe()
    }

    /// A stream that starts with the state now.
    pub(crate) fn stream(&self) -> LeadershipStream {
        let queue = Arc::new(DropOldest::new(LEADERSHIP_BUFFER));
        let mut listeners = self.listeners.lock();
        match listeners.as_mut() {
            Some(listeners) => {
                // Forget streams dropped since the last change, so that they do not pile up while
                // the state stays the same.
                listeners.retain(|listener| Arc::strong_count(listener) > 1);
                queue.push(self.get());
                listeners.push(queue.clone());
            }
            None => queue.end(),
        }
        LeadershipStream { queue }
    }
}

/// How many leadership changes a [`LeadershipStream`] keeps for a reader that does not read.
const LEADERSHIP_BUFFER: usize = 64;

/// Leadership changes of one latch or selector, from `leadership_changes()`: a
/// [`futures_core::Stream`] of [`LeadershipState`]s, starting with the state when it was made,
/// then every change once, in order. It ends when the participant is closed (or dropped).
///
/// It is a notification: the authority is `has_leadership()`, computed when asked. A `Leader`
/// it yields is visible there already (unless lost since); a loss may show there first.
///
/// **Bounded, drop-oldest:** it keeps the last 64 changes for a reader that does not read; one
/// that falls further behind skips the oldest ([`missed`](Self::missed) counts them) and still
/// ends on the newest state. A reader that must not miss a `Lost` between two reads compares the
/// leadership's fencing token too: a new token means a new term.
///
/// ```no_run
/// # async fn demo(latch: zk_curator::leader::LeaderLatch) {
/// use futures::StreamExt;
/// use zk_curator::leader::LeadershipState;
///
/// // Only the moments leadership starts.
/// let mut terms = latch.leadership_changes().filter(|s| std::future::ready(*s == LeadershipState::Leader));
/// while terms.next().await.is_some() {
///     println!("leading again");
/// }
/// # }
/// ```
pub struct LeadershipStream {
    queue: Arc<DropOldest<LeadershipState>>,
}

impl std::fmt::Debug for LeadershipStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadershipStream")
            .field("buffered", &self.queue.len())
            .field("missed", &self.queue.missed())
            .finish()
    }
}

impl LeadershipStream {
    /// The next state; `None` once the participant is closed. The same as `StreamExt::next`.
    ///
    /// # Cancel safety
    /// Cancel safe: a state not yet returned is returned by the next call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// use zk_curator::leader::LeadershipState;
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
        std::future::poll_fn(|cx| self.queue.poll_pop(Some(cx))).await
    }

    /// The next state if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<LeadershipState> {
        match self.queue.poll_pop(None) {
            Poll::Ready(state) => state,
            Poll::Pending => None,
        }
    }

    /// How many changes this reader skipped because it fell more than 64 behind.
    pub fn missed(&self) -> u64 {
        self.queue.missed()
    }
}

impl futures_core::Stream for LeadershipStream {
    type Item = LeadershipState;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LeadershipState>> {
        self.get_mut().queue.poll_pop(Some(cx))
    }
}

/// Every participant in line, the leader first: the node data of the mutex's nodes in sort order.
/// Nodes that vanish while being read are left out; the first one read is flagged leader.
pub(crate) async fn read_participants<D: LockDriver>(mutex: &InterProcessMutex<D>) -> Result<Vec<Participant>> {
    let client = mutex.client();
    let mut participants = Vec::new();
    for node in mutex.participant_nodes().await? {
        match client.get_data(&node).undecompressed().await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_that_falls_behind_keeps_the_newest_changes_and_is_told_how_many_it_skipped() {
        let signal = LeadershipSignal::new();
        let mut stream = signal.stream();
        // The first item is the state when the stream was made; 100 changes follow.
        for i in 0..100 {
            signal.set(if i % 2 == 0 { LeadershipState::Leader } else { LeadershipState::Suspended });
        }
        signal.set(LeadershipState::Lost);
        let queued: Vec<_> = std::iter::from_fn(|| stream.try_next()).collect();
        assert_eq!(queued.len(), LEADERSHIP_BUFFER, "bounded");
        assert_eq!(stream.missed(), 101 + 1 - LEADERSHIP_BUFFER as u64, "every skipped change counted");
        assert_eq!(queued.last(), Some(&LeadershipState::Lost), "the newest state is never skipped");
        signal.end(false);
        assert_eq!(stream.try_next(), None);
    }
}
