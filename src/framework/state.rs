//! Connection states with Curator's names and meanings, and the stream that delivers them.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::broadcast;

/// The connection state of a [`CuratorClient`](crate::CuratorClient), as Curator defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Not connected yet: a client made with
    /// [`CuratorClientBuilder::start`](crate::CuratorClientBuilder::start) is still establishing
    /// its first session (Curator's `LATENT` client). Requests wait for it within their deadlines.
    Latent,
    /// The first read-write connection of this client (sent once; a read-only one before it is
    /// `ReadOnly`, as in Curator).
    Connected,
    /// The connection was lost. The session may still be alive: a lock holder can no longer be
    /// sure it holds its lock until `Reconnected`.
    Suspended,
    /// Connected to a read-write server again after `Suspended` or `Lost`. After `Lost` this is a
    /// *new* session (see [`CuratorClient::session_id`](crate::CuratorClient::session_id)).
    Reconnected,
    /// The session is gone: the server expired it, or the client gave it up because the
    /// connection stayed suspended so long that the server could soon expire it — at most
    /// [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent)
    /// (85% by default) of the negotiated session timeout after the last reply from the server,
    /// before the server can (Curator ≥ 3 declares this a full session timeout after `Suspended`
    /// by default). Every ephemeral node
    /// of the old session, lock nodes included, is (or soon will be) deleted; the client opens a
    /// new session by itself.
    Lost,
    /// Connected to a read-only server (only when the builder allows it): reads are served, writes
    /// fail, no hold is `Held`, and the session is given up (`Lost`) like a suspended one — and
    /// when a read-write server is found again (see [docs/failure-semantics.md](crate::guide::failure_semantics)).
    ReadOnly,
}

impl ConnectionState {
    /// True for the states in which requests are served (`Connected`, `Reconnected`, `ReadOnly`).
    pub fn is_connected(self) -> bool {
        matches!(self, ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly)
    }
}

/// Which connection states the recipes treat as errors: the states in which a leader gives its
/// leadership up (Curator's `ConnectionStateErrorPolicy`); set with
/// [`CuratorClientBuilder::connection_state_error_policy`](crate::CuratorClientBuilder::connection_state_error_policy).
///
/// | | [`Standard`](Self::Standard) | [`Session`](Self::Session) (zk-curator's default) |
/// |---|---|---|
/// | error states | `SUSPENDED`, `LOST` | `LOST` |
/// | Curator | `StandardConnectionStateErrorPolicy`, Curator's default | `SessionConnectionStateErrorPolicy` |
/// | [`LeaderLatch`](crate::leader::LeaderLatch) on `SUSPENDED` | gives leadership up (`NotLeader`), releases its node and queues again with a new one, as Curator's latch | leadership suspended (`has_leadership()` false — Curator's says true), the same node leads again if the session survives |
/// | [`LeaderSelector`](crate::leader::LeaderSelector) on `SUSPENDED` | the work is cancelled, as Curator's `LeaderSelectorListenerAdapter` interrupts it | the work goes on and is told ([`Leadership::state`](crate::leader::Leadership::state)) |
/// | on `LOST` | leadership given up, work cancelled | the same |
///
/// A leader reacts to its hold being suspended, so under `Standard` a connection served
/// read-only (`READ_ONLY`, where no hold is `Held`) ends leadership too; Curator's latch keeps
/// reporting leadership there.
///
/// Locks and the other recipes report `SUSPENDED` through their holds
/// ([`HoldState::Suspended`](crate::locks::HoldState::Suspended): never `Held` while suspended) under
/// either policy, as Curator's locks do not react to connection states at all.
///
/// **Why zk-curator defaults to `Session`:** its `LOST` comes before the server can expire the
/// session (see
/// [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent)),
/// so a leader that waits out `SUSPENDED` can never overlap with the next one — while under
/// Curator's timing (`LOST` a full session timeout after `SUSPENDED`) it could, which is why
/// Curator defaults to `Standard`. `Standard` costs a new election (and a storm of node
/// re-creations on a flapping connection) for every short disconnect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionStateErrorPolicy {
    /// `SUSPENDED` and `LOST` are errors (Curator's `StandardConnectionStateErrorPolicy`, Curator's
    /// default): leaders give leadership up as soon as the connection is suspended.
    Standard,
    /// Only `LOST` is an error (Curator's `SessionConnectionStateErrorPolicy`): leaders wait a
    /// suspended connection out. zk-curator's default.
    #[default]
    Session,
}

impl ConnectionStateErrorPolicy {
    /// True when recipes treat `state` as an error (Curator's `isErrorState`).
    pub fn is_error_state(self, state: ConnectionState) -> bool {
        match self {
            ConnectionStateErrorPolicy::Standard => {
                matches!(state, ConnectionState::Suspended | ConnectionState::Lost)
            }
            ConnectionStateErrorPolicy::Session => state == ConnectionState::Lost,
        }
    }

    /// True when a leader gives its leadership up once its hold is suspended (the connection
    /// `SUSPENDED`, or served read-only).
    pub(crate) fn gives_up_when_suspended(self) -> bool {
        self.is_error_state(ConnectionState::Suspended)
    }
}

impl ConnectionState {
    /// Curator's name of the state (`SUSPENDED`, `READ_ONLY`, ...): its `Display` and its metrics label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Latent => "LATENT",
            ConnectionState::Connected => "CONNECTED",
            ConnectionState::Suspended => "SUSPENDED",
            ConnectionState::Reconnected => "RECONNECTED",
            ConnectionState::Lost => "LOST",
            ConnectionState::ReadOnly => "READ_ONLY",
        }
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subscription to connection-state changes; see
/// [`CuratorClient::connection_states`](crate::CuratorClient::connection_states).
///
/// A [`futures_core::Stream`] of [`ConnectionState`]s (use `futures::StreamExt` or
/// `tokio_stream::StreamExt` with it), and [`next`](Self::next) / [`try_next`](Self::try_next)
/// for code without those traits. The first item is the state at the moment of subscribing (so a
/// subscriber made after connecting still sees [`ConnectionState::Connected`]), then every change
/// after it, in order. The stream ends once the client is closed and dropped.
///
/// **Bounded, lossy on overflow:** each subscriber buffers the last 64 changes, so a slow
/// subscriber never blocks the client or another subscriber. One that falls further behind skips
/// the oldest changes; [`missed`](Self::missed) counts them. A subscriber that must not miss a
/// `Lost` between two reads should compare [`CuratorClient::session`](crate::CuratorClient::session)
/// too: a new session identity means LOST happened.
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) {
/// use futures::StreamExt;
///
/// // Curator's ConnectionStateListener.
/// let mut states = client.connection_states();
/// tokio::spawn(async move {
///     while let Some(state) = states.next().await {
///         tracing::info!(%state, "ZooKeeper connection");
///     }
/// });
/// # }
/// ```
pub struct ConnectionStateStream {
    first: Option<ConnectionState>,
    /// Exactly one of `rx` and `receiving` is set: the receiver lives inside the receive in flight.
    rx: Option<broadcast::Receiver<ConnectionState>>,
    receiving: Option<Receiving>,
    missed: u64,
}

/// A receive in flight, owning the receiver (`broadcast::Receiver` has no poll method).
type Receiving = Pin<
    Box<
        dyn Future<
                Output = (Result<ConnectionState, broadcast::error::RecvError>, broadcast::Receiver<ConnectionState>),
            > + Send
            + Sync,
    >,
>;

impl fmt::Debug for ConnectionStateStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionStateStream")
            .field("first", &self.first)
            .field("receiving", &self.receiving.is_some())
            .field("missed", &self.missed)
            .finish()
    }
}

impl ConnectionStateStream {
    pub(crate) fn new(current: ConnectionState, rx: broadcast::Receiver<ConnectionState>) -> Self {
        Self { first: Some(current), rx: Some(rx), receiving: None, missed: 0 }
    }

    /// The next state: the current one on the first call, then each change; `None` once the
    /// client is closed and dropped. The same as `StreamExt::next` (this was `recv` before).
    ///
    /// # Cancel safety
    /// Cancel safe: a state not yet returned stays queued for the next call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) {
    /// use zk_curator::ConnectionState;
    ///
    /// let mut states = client.connection_states();
    /// while let Some(state) = states.next().await {
    ///     if state == ConnectionState::Lost {
    ///         eprintln!("session lost: every lock it held is gone");
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<ConnectionState> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next state.
    ///
    /// # Cancel safety
    /// As [`next`](Self::next).
    #[deprecated(note = "use `next`, the name of every feed's (and `StreamExt`'s) next item")]
    pub async fn recv(&mut self) -> Option<ConnectionState> {
        self.next().await
    }

    /// A state that is already queued, without waiting.
    #[deprecated(note = "use `try_next`")]
    pub fn try_recv(&mut self) -> Option<ConnectionState> {
        self.try_next()
    }

    /// A state that is already queued, without waiting.
    pub fn try_next(&mut self) -> Option<ConnectionState> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.receiving.is_some() {
            // A receive is in flight (a `recv` was cancelled): it is ready if a state is queued.
            // Unconstrained, so that the task's cooperative budget cannot hide a queued state.
            let waker = Waker::from(Arc::new(NoWake));
            let mut cx = Context::from_waker(&waker);
            let once = std::pin::pin!(tokio::task::unconstrained(std::future::poll_fn(|cx| self.poll_recv(cx))));
            return match once.poll(&mut cx) {
                Poll::Ready(state) => state,
                Poll::Pending => None,
            };
        }
        let rx = self.rx.as_mut()?;
        loop {
            match rx.try_recv() {
                Ok(state) => return Some(state),
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
    }

    /// How many state changes this subscriber skipped because it fell more than 64 behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<ConnectionState>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(first));
        }
        loop {
            let receiving = match &mut self.receiving {
                Some(receiving) => receiving,
                None => {
                    let Some(mut rx) = self.rx.take() else {
                        return Poll::Ready(None);
                    };
                    self.receiving.insert(Box::pin(async move {
                        let result = rx.recv().await;
                        (result, rx)
                    }))
                }
            };
            let (result, rx) = std::task::ready!(receiving.as_mut().poll(cx));
            self.receiving = None;
            self.rx = Some(rx);
            match result {
                Ok(state) => return Poll::Ready(Some(state)),
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return Poll::Ready(None),
            }
        }
    }
}

impl futures_core::Stream for ConnectionStateStream {
    type Item = ConnectionState;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ConnectionState>> {
        self.get_mut().poll_recv(cx)
    }
}

/// The waker of [`ConnectionStateStream::try_next`]'s single poll: nobody waits on it.
struct NoWake;

impl std::task::Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_with_the_current_state_and_counts_what_a_laggard_missed() {
        let (tx, rx) = broadcast::channel(4);
        let mut stream = ConnectionStateStream::new(ConnectionState::Connected, rx);
        for _ in 0..3 {
            tx.send(ConnectionState::Suspended).unwrap();
            tx.send(ConnectionState::Reconnected).unwrap();
        }
        assert_eq!(stream.try_next(), Some(ConnectionState::Connected));
        assert_eq!(stream.missed(), 0);
        // 6 sent into a buffer of 4: the 2 oldest are skipped, and said to be.
        assert_eq!(stream.try_next(), Some(ConnectionState::Suspended));
        assert_eq!(stream.missed(), 2);
        let rest: Vec<_> = std::iter::from_fn(|| stream.try_next()).collect();
        assert_eq!(rest, [ConnectionState::Reconnected, ConnectionState::Suspended, ConnectionState::Reconnected]);
    }
}
