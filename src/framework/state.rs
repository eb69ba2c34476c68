//! Connection states with Curator's names and meanings, and the stream that delivers them.

use std::fmt;

use tokio::sync::broadcast;

/// The connection state of a [`CuratorClient`](crate::CuratorClient), as Curator defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// The first successful connection of this client (sent once).
    Connected,
    /// The connection was lost. The session may still be alive: a lock holder can no longer be
    /// sure it holds its lock until `Reconnected`.
    Suspended,
    /// Connected again after `Suspended`, `Lost` or `ReadOnly`. After `Lost` this is a *new*
    /// session (see [`CuratorClient::session_id`](crate::CuratorClient::session_id)).
    Reconnected,
    /// The session is gone: the server expired it, or the connection stayed suspended for the
    /// negotiated session timeout (Curator ≥ 3 semantics). Every ephemeral node of the old session,
    /// lock nodes included, is (or soon will be) deleted; the client opens a new session by itself.
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
/// Every subscriber has its own bounded buffer, so a slow subscriber never blocks the client or
/// another subscriber; one that falls more than 64 changes behind skips the oldest ones.
#[derive(Debug)]
pub struct ConnectionStateStream {
    pub(crate) rx: broadcast::Receiver<ConnectionState>,
}

impl ConnectionStateStream {
    /// The next state change, or `None` once the client is closed and dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: a state not yet returned stays queued for the next call.
    pub async fn recv(&mut self) -> Option<ConnectionState> {
        loop {
            match self.rx.recv().await {
                Ok(state) => return Some(state),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// A state change that is already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<ConnectionState> {
        loop {
            match self.rx.try_recv() {
                Ok(state) => return Some(state),
                Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    }
}
