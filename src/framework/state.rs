//! Connection states with Curator's names and meanings, and the stream that delivers them.

use std::fmt;

use tokio::sync::broadcast;

/// The connection state of a [`CuratorClient`](crate::CuratorClient), as Curator defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Not connected yet: a client made with
    /// [`CuratorClientBuilder::start`](crate::CuratorClientBuilder::start) is still establishing
    /// its first session (Curator's `LATENT` client). Requests wait for it within their deadlines.
    Latent,
    /// The first successful connection of this client (sent once).
    Connected,
    /// The connection was lost. The session may still be alive: a lock holder can no longer be
    /// sure it holds its lock until `Reconnected`.
    Suspended,
    /// Connected again after `Suspended`, `Lost` or `ReadOnly`. After `Lost` this is a *new*
    /// session (see [`CuratorClient::session_id`](crate::CuratorClient::session_id)).
    Reconnected,
    /// The session is gone: the server expired it, or the client gave it up because the
    /// connection stayed suspended so long that the server could soon expire it — at most 0.85 of
    /// the negotiated session timeout after the last reply from the server, before the server can
    /// (Curator ≥ 3 declares this a full session timeout after `Suspended`). Every ephemeral node
    /// of the old session, lock nodes included, is (or soon will be) deleted; the client opens a
    /// new session by itself.
    Lost,
    /// Connected to a read-only server (only when the builder allows it).
    ReadOnly,
}

impl ConnectionState {
    /// True for the states in which requests are served (`Connected`, `Reconnected`, `ReadOnly`).
    pub fn is_connected(self) -> bool {
        matches!(self, ConnectionState::Connected | ConnectionState::Reconnected | ConnectionState::ReadOnly)
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ConnectionState::Latent => "LATENT",
            ConnectionState::Connected => "CONNECTED",
            ConnectionState::Suspended => "SUSPENDED",
            ConnectionState::Reconnected => "RECONNECTED",
            ConnectionState::Lost => "LOST",
            ConnectionState::ReadOnly => "READ_ONLY",
        };
        f.write_str(name)
    }
}

/// A subscription to connection-state changes; see
/// [`CuratorClient::connection_states`](crate::CuratorClient::connection_states).
///
/// The first item is the state at the moment of subscribing (so a subscriber made after connecting
/// still sees [`ConnectionState::Connected`]), then every change after it, in order.
///
/// **Bounded, lossy on overflow:** each subscriber buffers the last 64 changes, so a slow
/// subscriber never blocks the client or another subscriber. One that falls further behind skips
/// the oldest changes; [`missed`](Self::missed) counts them. A subscriber that must not miss a
/// `Lost` between two reads should compare [`CuratorClient::session`](crate::CuratorClient::session)
/// too: a new session identity means LOST happened.
#[derive(Debug)]
pub struct ConnectionStateStream {
    first: Option<ConnectionState>,
    rx: broadcast::Receiver<ConnectionState>,
    missed: u64,
}

impl ConnectionStateStream {
    pub(crate) fn new(current: ConnectionState, rx: broadcast::Receiver<ConnectionState>) -> Self {
        Self { first: Some(current), rx, missed: 0 }
    }

    /// The next state: the current one on the first call, then each change; `None` once the
    /// client is closed and dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: a state not yet returned stays queued for the next call.
    pub async fn recv(&mut self) -> Option<ConnectionState> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            match self.rx.recv().await {
                Ok(state) => return Some(state),
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// A state that is already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<ConnectionState> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            match self.rx.try_recv() {
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
        assert_eq!(stream.try_recv(), Some(ConnectionState::Connected));
        assert_eq!(stream.missed(), 0);
        // 6 sent into a buffer of 4: the 2 oldest are skipped, and said to be.
        assert_eq!(stream.try_recv(), Some(ConnectionState::Suspended));
        assert_eq!(stream.missed(), 2);
        let rest: Vec<_> = std::iter::from_fn(|| stream.try_recv()).collect();
        assert_eq!(rest, [ConnectionState::Reconnected, ConnectionState::Suspended, ConnectionState::Reconnected]);
    }
}
