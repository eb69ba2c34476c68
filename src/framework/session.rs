//! Session supervision: the current ZooKeeper session, Curator's connection states derived from
//! its events, and the replacement of a lost session by a new one.
//!
//! `zookeeper-client` gives one session per `Client` and no way back after expiry; Curator's
//! framework hides that behind one logical client. [`Sessions`] is that logical client's session
//! half: it holds the current handle together with its [`SessionIdentity`], publishes
//! [`ConnectionState`]s, declares LOST early enough for lock holders (see [`lost_after_suspended`])
//! and opens the next session by itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::{broadcast, watch};
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::backoff::Backoff;
use super::config::SessionConfig;
use super::state::{ConnectionState, ConnectionStateStream};
use crate::error::{Error, Result};

/// `zookeeper-client`'s connection (and idle) timeout we ask for, as a fraction of the requested
/// session timeout: short enough to notice silence early and to leave room for several reconnect
/// attempts before LOST.
const ZK_CONNECTION_TIMEOUT_DIVISOR: u32 = 5;

/// How many state changes a [`ConnectionStateStream`] buffers before it skips the oldest.
const STATE_BUFFER: usize = 64;

/// How long after SUSPENDED the client declares LOST (Curator ≥ 3 "simulated expiration").
///
/// `zookeeper-client` reports a disconnect once nothing was received for its idle timeout, checked
/// every tick (idle/8). Its idle timeout is the connection timeout we configure (requested session
/// timeout / 5) unless that exceeds 3/5 of the negotiated timeout, in which case it is 2/5 of it.
/// So SUSPENDED comes at most `idle + tick` after the last reply, and LOST at most
/// `lost_fraction × negotiated` after it (by default 0.85, see
/// [`CuratorClientBuilder::simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent)): before the
/// server, which counts from the last request it received, can expire the session and hand our
/// locks to someone else. A fraction below the time SUSPENDED can take declares LOST with it.
pub(crate) fn lost_after_suspended(requested: Duration, negotiated: Duration, lost_fraction: f64) -> Duration {
    negotiated.mul_f64(lost_fraction).saturating_sub(suspended_within(requested, negotiated))
}

/// The longest time from the last reply the client received to `zookeeper-client` reporting the
/// disconnect (SUSPENDED): its idle timeout plus one tick; see [`lost_after_suspended`].
fn suspended_within(requested: Duration, negotiated: Duration) -> Duration {
    let configured = requested / ZK_CONNECTION_TIMEOUT_DIVISOR;
    let idle = if configured > negotiated * 3 / 5 { negotiated * 2 / 5 } else { configured };
    idle + idle / 8
}

/// Which ZooKeeper session a node or an operation belongs to.
///
/// `epoch` counts the sessions this client has opened (1 for the first); `id` is the server's
/// session id. A lock node created under one identity is dead once the client's current identity
/// differs: its session expired and the client replaced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SessionIdentity {
    /// The number of the session within this client, starting at 1.
    pub epoch: u64,
    /// ZooKeeper's session id.
    pub id: i64,
}

/// What recipes read about the connection, in one consistent snapshot.
#[derive(Clone, Debug)]
pub(crate) struct Status {
    pub state: ConnectionState,
    pub connected: bool,
    pub session: SessionIdentity,
    pub closed: bool,
    /// The earliest instants at which the server can expire sessions we cannot vouch for.
    pub expiry_bounds: ExpiryBounds,
}

/// Sessions the server may expire on its own, each with the earliest instant it can.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExpiryBounds {
    /// The current session, while its connection is suspended — and while it is served read-only
    /// (a read-only server cannot renew the session with the quorum).
    current: Option<(SessionIdentity, Instant)>,
    /// The last session given up (LOST) while suspended: the server may still hold it until then.
    given_up: Option<(SessionIdentity, Instant)>,
}

impl ExpiryBounds {
    /// True when `session` is the last session given up (LOST) while suspended, rather than
    /// ended by the server.
    pub(crate) fn given_up(&self, session: SessionIdentity) -> bool {
        self.given_up.is_some_and(|(s, _)| s == session)
    }

    pub(crate) fn of(&self, session: SessionIdentity) -> Option<Instant> {
        [self.current, self.given_up].into_iter().flatten().find(|(s, _)| *s == session).map(|(_, at)| at)
    }

    /// The current session's connection is suspended: the server can expire it at `at`, or
    /// earlier if an earlier bound of this session still stands (read-only in between).
    fn suspended(&mut self, session: SessionIdentity, at: Instant) {
        let earlier = self.current.filter(|(s, _)| *s == session).map_or(at, |(_, before)| before.min(at));
        self.current = Some((session, earlier));
    }
}

impl Status {
    /// True when requests on `session` are served now: connected, on that very session, and the
    /// session not given up (LOST is declared before the replacement exists).
    pub(crate) fn serves(&self, session: SessionIdentity) -> bool {
        // A read-only server is cut off from the quorum: it answers reads but cannot renew the
        // session, which the quorum may expire meanwhile — so a hold is only `Suspended` there.
        self.connected
            && !self.closed
            && self.session == session
            && !matches!(self.state, ConnectionState::Lost | ConnectionState::ReadOnly)
    }

    /// True once `session` can never serve again: replaced, given up (LOST) or the client closed.
    pub(crate) fn has_ended(&self, session: SessionIdentity) -> bool {
        self.closed || self.session != session || self.state == ConnectionState::Lost
    }
}

struct Slot {
    zk: Option<zk::Client>,
    session: SessionIdentity,
    /// The current session's keep (see [`SessionKeep`]): the slot's share of it.
    keep: Option<Arc<SessionKeep>>,
}

/// A share in keeping one session open: `zookeeper-client` closes a session (CloseSession, which
/// deletes its ephemeral nodes) once the last handle on it is dropped, also after we gave it up
/// (LOST) and replaced it — as soon as it reaches the server again. A hold keeps the keep of the
/// session it was granted on, so nothing of ours ends that session, and frees the hold's node, while
/// the hold lives: its holder was told it is lost and must have stopped first (the CLI drops its hold
/// once the command's process group is gone; `LeaderSelector` once its work has stopped).
///
/// The session ends when the client lets go of it (replaced, or closed) and the last hold on it is
/// dropped — or, for a session given up while suspended, at the earliest instant the server could
/// have expired it on its own, whichever comes first: a lost hold kept for ever does not keep its
/// node for ever.
pub(crate) struct SessionKeep {
    session: SessionIdentity,
    zk: Mutex<Option<zk::Client>>,
}

impl std::fmt::Debug for SessionKeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeep").field("session", &self.session).field("kept", &self.zk.lock().is_some()).finish()
    }
}

impl SessionKeep {
    fn new(session: SessionIdentity, zk: &zk::Client) -> Arc<SessionKeep> {
        Arc::new(SessionKeep { session, zk: Mutex::new(Some(zk.clone())) })
    }

    /// Drops the kept handle: the session closes once no other handle is left.
    fn let_go(&self) {
        let zk = self.zk.lock().take();
        drop(zk);
    }
}

/// The session half of a client; see the module docs.
pub(crate) struct Sessions {
    config: SessionConfig,
    /// The handle and its identity, always read and replaced together.
    slot: RwLock<Slot>,
    status: watch::Sender<Status>,
    events: broadcast::Sender<ConnectionState>,
    /// Serialises publishing a state with subscribing, so a new subscriber's first state and the
    /// buffered changes after it neither overlap nor leave a gap.
    publishing: Mutex<()>,
    closing: AtomicBool,
    /// CONNECTED was published (or was the first state): later read-write connections are
    /// RECONNECTED. Until then the first one is CONNECTED, also after `ReadOnly` or `Lost`, as
    /// Curator's `ConnectionStateManager` rewrites its first non-negative state.
    announced_connected: AtomicBool,
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The keeps of replaced sessions still held by holds: closing the client lets go of them.
    retired: Mutex<Vec<std::sync::Weak<SessionKeep>>>,
}

impl Sessions {
    /// Opens the first session and starts supervising it (on the current tokio runtime).
    pub(crate) async fn open(config: SessionConfig) -> std::result::Result<Arc<Sessions>, zk::Error> {
        let zk = open_session(&config).await?;
        let session = SessionIdentity { epoch: 1, id: zk.session_id().0 };
        // The watcher first: a change after the state read below is reported to it.
        let watcher = zk.state_watcher();
        let read_only = (zk.state() == zk::SessionState::ConnectedReadOnly).then(Instant::now);
        let state = if read_only.is_some() { ConnectionState::ReadOnly } else { ConnectionState::Connected };
        info!(connect = %config.connect_string, session = %zk.session_id(), "zk-curator client connected");
        // The first state is set, not published: counted here like every published one.
        crate::metrics::connection_state(state);
        let sessions = Self::new(config, Some(zk), session, state, true);
        if let Some(since) = read_only {
            let bound = sessions.read_only_bound(since);
            sessions.status.send_modify(|s| s.expiry_bounds.suspended(session, bound));
        }
        let supervisor = tokio::spawn(supervise(Arc::downgrade(&sessions), watcher, read_only));
        *sessions.supervisor.lock() = Some(supervisor);
        Ok(sessions)
    }

    /// Starts without a session (`Latent`); a background task keeps trying to open the first one,
    /// then supervises it. Must be called within a tokio runtime.
    pub(crate) fn open_in_background(config: SessionConfig) -> Arc<Sessions> {
        let sessions = Self::new(config, None, SessionIdentity { epoch: 0, id: 0 }, ConnectionState::Latent, false);
        let weak = Arc::downgrade(&sessions);
        let supervisor = tokio::spawn(async move {
            if let Some((watcher, read_only)) = replace_session(&weak).await {
                supervise(weak, watcher, read_only).await;
            }
        });
        *sessions.supervisor.lock() = Some(supervisor);
        sessions
    }

    fn new(
        config: SessionConfig,
        zk: Option<zk::Client>,
        session: SessionIdentity,
        state: ConnectionState,
        connected: bool,
    ) -> Arc<Sessions> {
        let (status, _) =
            watch::channel(Status { state, connected, session, closed: false, expiry_bounds: ExpiryBounds::default() });
        let (events, _) = broadcast::channel(STATE_BUFFER);
        let keep = zk.as_ref().map(|zk| SessionKeep::new(session, zk));
        Arc::new(Sessions {
            config,
            slot: RwLock::new(Slot { zk, session, keep }),
            status,
            events,
            publishing: Mutex::new(()),
            closing: AtomicBool::new(false),
            announced_connected: AtomicBool::new(state == ConnectionState::Connected),
            supervisor: Mutex::new(None),
            retired: Mutex::new(Vec::new()),
        })
    }

    /// The current handle and the identity of its session, read together.
    pub(crate) fn current(&self) -> Option<(zk::Client, SessionIdentity)> {
        let slot = self.slot.read();
        slot.zk.clone().map(|zk| (zk, slot.session))
    }

    pub(crate) fn session(&self) -> SessionIdentity {
        self.slot.read().session
    }

    /// A share in keeping `session` open (see [`SessionKeep`]), while it is the current one.
    pub(crate) fn keep(&self, session: SessionIdentity) -> Option<Arc<SessionKeep>> {
        let slot = self.slot.read();
        slot.keep.clone().filter(|_| slot.session == session)
    }

    /// Lets go of the current session's keep (replaced or closed). A session given up while
    /// suspended is let go of by the holds still on it at `expiry` at the latest, when the server
    /// can expire it anyway.
    fn retire(&self, keep: Option<Arc<SessionKeep>>, expiry: Option<Instant>) {
        let Some(keep) = keep else { return };
        let weak = Arc::downgrade(&keep);
        // Ours is the only share left: nobody holds the session; it closes now.
        drop(keep);
        if weak.strong_count() == 0 {
            return;
        }
        if let (Some(at), Ok(runtime)) = (expiry, tokio::runtime::Handle::try_current()) {
            let held = weak.clone();
            runtime.spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                if let Some(keep) = held.upgrade() {
                    debug!(epoch = keep.session.epoch, "the server can expire the given-up session now: letting go");
                    keep.let_go();
                }
            });
        }
        let mut retired = self.retired.lock();
        retired.retain(|w| w.strong_count() > 0);
        // Closing marks the client closed before it takes the retired keeps (under this lock): a
        // keep retired by a replacement racing the close is let go of here instead.
        if self.status.borrow().closed {
            drop(retired);
            if let Some(keep) = weak.upgrade() {
                keep.let_go();
            }
            return;
        }
        retired.push(weak);
    }

    pub(crate) fn status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    pub(crate) fn status_now(&self) -> Status {
        self.status.borrow().clone()
    }

    pub(crate) fn negotiated_timeout(&self) -> Duration {
        self.slot.read().zk.as_ref().map(|z| z.session_timeout()).unwrap_or(self.config.session_timeout)
    }

    pub(crate) fn connection_timeout(&self) -> Duration {
        self.config.connection_timeout
    }

    pub(crate) fn connect_string(&self) -> &str {
        &self.config.connect_string
    }

    /// A subscription whose first item is the current state, followed by every later change.
    pub(crate) fn subscribe(&self) -> ConnectionStateStream {
        let _publishing = self.publishing.lock();
        ConnectionStateStream::new(self.status.borrow().state, self.events.subscribe())
    }

    fn publish(&self, state: ConnectionState, connected: bool) {
        self.publish_with_bound(state, connected, |_| {});
    }

    /// Publishes `state` with the expiry bound changed by `bound` in the same status update.
    fn publish_with_bound(&self, state: ConnectionState, connected: bool, bound: impl FnOnce(&mut ExpiryBounds)) {
        let _publishing = self.publishing.lock();
        // Curator: the first read-write connection is CONNECTED, whatever came before it.
        let state = match state {
            ConnectionState::Reconnected | ConnectionState::Connected
                if !self.announced_connected.swap(true, Ordering::SeqCst) =>
            {
                ConnectionState::Connected
            }
            ConnectionState::Connected => ConnectionState::Reconnected,
            state => state,
        };
        info!(%state, "connection state");
        crate::metrics::connection_state(state);
        self.status.send_modify(|s| {
            s.state = state;
            s.connected = connected;
            bound(&mut s.expiry_bounds);
        });
        let _ = self.events.send(state);
    }

    /// The earliest instant at which the quorum can expire the current session when it is served
    /// read-only since `since` (counted as from a suspension at `since`: the last reply the quorum
    /// saw came at most `suspended_within` before).
    fn read_only_bound(&self, since: Instant) -> Instant {
        let negotiated = self.negotiated_timeout();
        let within = suspended_within(self.config.session_timeout, negotiated);
        since.checked_add(negotiated.saturating_sub(within)).unwrap_or(since)
    }

    /// The earliest instant at which the server can expire `session`, while its connection is
    /// suspended (see [`CuratorClient::earliest_expiry`](crate::CuratorClient::earliest_expiry)).
    pub(crate) fn earliest_expiry(&self, session: SessionIdentity) -> Option<Instant> {
        self.status.borrow().expiry_bounds.of(session)
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Marks the client as closing; false if it already was.
    pub(crate) fn begin_close(&self) -> bool {
        !self.closing.swap(true, Ordering::SeqCst)
    }

    /// Ends the current session and the supervision, and waits (up to 2 s) until the current
    /// session's handle saw it closed. A replacement that finishes afterwards finds the client
    /// closing and closes itself (see [`replace_session`]).
    pub(crate) async fn finish_close(&self) {
        if let Some(mut watcher) = self.end_now() {
            // The session task sends CloseSession once the last handle is gone.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while !watcher.changed().await.is_terminated() {}
            })
            .await;
        }
    }

    /// The part of [`finish_close`](Self::finish_close) that needs no waiting (nor a runtime):
    /// marks the client closed, lets go of every session of ours — the current one and those lost
    /// holds still keep — and stops the supervision. Idempotent. Returns a watcher of the current
    /// session's handle, if there was one.
    pub(crate) fn end_now(&self) -> Option<zk::StateWatcher> {
        self.status.send_modify(|s| {
            s.closed = true;
            s.connected = false;
        });
        let (zk, keep) = {
            let mut slot = self.slot.write();
            (slot.zk.take(), slot.keep.take())
        };
        // Closing ends every session of ours, also those lost holds still keep.
        if let Some(keep) = keep {
            keep.let_go();
        }
        for retired in std::mem::take(&mut *self.retired.lock()) {
            if let Some(keep) = retired.upgrade() {
                keep.let_go();
            }
        }
        let watcher = zk.map(|zk| {
            let watcher = zk.state_watcher();
            drop(zk);
            watcher
        });
        if let Some(supervisor) = self.supervisor.lock().take() {
            supervisor.abort();
        }
        watcher
    }

    /// Waits until the client is connected, then returns the current handle and its session.
    ///
    /// Waits at most the connection timeout (and never past `deadline`); then fails with a
    /// retryable `ConnectionLoss`, as Curator's `blockUntilConnected` does.
    pub(crate) async fn connected(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(zk::Client, SessionIdentity)> {
        let mut status = self.status();
        let limit = crate::deadline::deadline_after(self.config.connection_timeout);
        let limit = deadline.map_or(limit, |d| d.min(limit));
        loop {
            let connected = {
                let s = status.borrow_and_update();
                if s.closed {
                    return Err(Error::Closed { path: path.to_string() });
                }
                s.connected
            };
            if connected {
                if let Some((zk, session)) = self.current() {
                    // LOST may have come between the status read and the handle read: a session
                    // given up is never handed out, even while its handle is still in the slot.
                    if !status.borrow().has_ended(session) {
                        return Ok((zk, session));
                    }
                }
            }
            match tokio::time::timeout_at(limit.into(), status.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(Error::Closed { path: path.to_string() }),
                Err(_) => return Err(Error::zk(path, zk::Error::ConnectionLoss)),
            }
        }
    }
}

async fn open_session(config: &SessionConfig) -> std::result::Result<zk::Client, zk::Error> {
    // zookeeper-client's connection timeout is also its idle timeout, which bounds how late a
    // disconnect is noticed; `lost_after_suspended` relies on that bound.
    let connector = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_connection_timeout(config.session_timeout / ZK_CONNECTION_TIMEOUT_DIVISOR)
        .with_readonly(config.can_be_read_only);
    // In the connector, not added to a session later: zookeeper-client sends them in every
    // handshake of this session, and each replacement session gets its own connector.
    let connector = config.credentials.iter().fold(connector, |connector, c| connector.with_auth(&c.scheme, &c.auth));
    // Likewise: zookeeper-client runs the SASL exchange in every handshake of this session.
    #[cfg(feature = "sasl")]
    let connector = match &config.sasl {
        Some(sasl) => connector.with_sasl(sasl.0.clone()),
        None => connector,
    };
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let connect = connector.with_tls(tls.0.clone()).secure_connect(&config.connect_string);
        return match tokio::time::timeout(config.connection_timeout, connect).await {
            Ok(result) => result,
            Err(_) => Err(zk::Error::Timeout),
        };
    }
    match tokio::time::timeout(config.connection_timeout, connector.connect(&config.connect_string)).await {
        Ok(result) => result,
        Err(_) => Err(zk::Error::Timeout),
    }
}

/// Watches the current session and turns its events into Curator's connection states; replaces
/// the session when it is lost. `read_only_since`: the session is served read-only since then.
async fn supervise(sessions: Weak<Sessions>, mut watcher: zk::StateWatcher, read_only_since: Option<Instant>) {
    // While read-only the LOST timer runs as if suspended: a read-only server cannot renew the
    // session with the quorum.
    let mut suspended_since: Option<Instant> = read_only_since;
    // This handle was served read-only: `zookeeper-client` then re-connects to a read-write
    // server without the session (read-only sessions are local to their server), so it gets a
    // new session whose id the handle does not tell (`Client::session_id` stays the old one).
    let mut handle_was_read_only = read_only_since.is_some();
    loop {
        let Some(this) = sessions.upgrade() else { return };
        let negotiated = this.negotiated_timeout();
        // Curator ≥ 3: a connection suspended for (about) the session timeout is LOST, even if the
        // server is unreachable and never says "expired"; we fire early enough that the holder of
        // a lock learns before the server can expire the session (see `lost_after_suspended`).
        let lost_at = suspended_since.map(|since| {
            since + lost_after_suspended(this.config.session_timeout, negotiated, this.config.lost_fraction)
        });
        let mut status_rx = this.status();
        drop(this);
        let event = tokio::select! {
            state = watcher.changed() => Some(state),
            _ = sleep_until_opt(lost_at) => None,
            _ = status_rx.wait_for(|s| s.closed) => return,
        };
        let Some(this) = sessions.upgrade() else { return };
        // Why the session is given up, if it is: `None` for "not given up".
        let ended: Option<Ended> = match event {
            Some(zk::SessionState::Disconnected) => {
                if suspended_since.is_none() {
                    let now = Instant::now();
                    suspended_since = Some(now);
                    // The last reply came at most `suspended_within` ago; the server counts the
                    // session timeout from no later than that.
                    let bound = this.read_only_bound(now);
                    let session = this.session();
                    this.publish_with_bound(ConnectionState::Suspended, false, |b| b.suspended(session, bound));
                }
                None
            }
            Some(zk::SessionState::SyncConnected) if handle_was_read_only => {
                // A read-write server again, but on a session that is not ours (see
                // `handle_was_read_only`): ours is gone — or the quorum expires it, with our
                // ephemeral nodes — so it is LOST, and a new session replaces the handle.
                Some(Ended::LeftReadOnly)
            }
            Some(zk::SessionState::SyncConnected) => {
                if suspended_since.is_some() {
                    // zookeeper-client reports SyncConnected on the connect response, before the
                    // session is established (its ping and watch re-registration answered). A
                    // connection that fails in between is reported Disconnected only at the next
                    // TCP connect, up to the whole reconnect backoff later (or never, on a
                    // partition): believing it, a hold would be `Held` on a dead connection, the
                    // LOST timer stopped, while the server expires the session. So a reconnect
                    // counts once a request has been answered on it (zookeeper-client sends
                    // requests only on an established session).
                    let zk = this.slot.read().zk.clone();
                    drop(this);
                    let Some(zk) = zk else { continue };
                    let mut closed = status_rx.clone();
                    let confirmed = tokio::select! {
                        answered = zk.check_stat("/") => match answered {
                            // Any answer from the server proves the connection; only a failure to
                            // get one does not.
                            Ok(_) => true,
                            Err(e) => !matches!(
                                e,
                                zk::Error::ConnectionLoss
                                    | zk::Error::Timeout
                                    | zk::Error::SessionExpired
                                    | zk::Error::ClientClosed
                                    | zk::Error::SessionMoved
                            ),
                        },
                        _ = sleep_until_opt(lost_at) => false,
                        _ = closed.wait_for(|s| s.closed) => return,
                    };
                    let Some(this) = sessions.upgrade() else { return };
                    if !confirmed {
                        // Still suspended: the LOST timer runs on; the next event decides.
                        continue;
                    }
                    suspended_since = None;
                    this.publish_with_bound(ConnectionState::Reconnected, true, |b| b.current = None);
                }
                continue;
            }
            Some(zk::SessionState::ConnectedReadOnly) => {
                // Reads are served, but nothing renews the session with the quorum: the LOST
                // timer keeps running from the suspension (or starts now), as its expiry bound.
                handle_was_read_only = true;
                let since = *suspended_since.get_or_insert_with(Instant::now);
                let bound = this.read_only_bound(since);
                let session = this.session();
                if this.status.borrow().state == ConnectionState::ReadOnly {
                    // Read-only again after a disconnect from a read-only server (which published
                    // nothing: the LOST timer already ran): no second READ_ONLY in a row, as
                    // Curator never repeats a state.
                    this.status.send_modify(|s| s.expiry_bounds.suspended(session, bound));
                } else {
                    this.publish_with_bound(ConnectionState::ReadOnly, true, |b| b.suspended(session, bound));
                }
                None
            }
            Some(zk::SessionState::Closed) if this.is_closing() => return,
            Some(state) => Some(Ended::ByServer(state)),
            None => Some(Ended::GivenUp),
        };
        let Some(ended) = ended else { continue };
        match ended {
            Ended::ByServer(state) => warn!(?state, "zookeeper session ended; opening a new one"),
            Ended::GivenUp => warn!(?negotiated, "connection suspended (or read-only) too long: session LOST"),
            Ended::LeftReadOnly => warn!("read-write server found after read-only: session LOST, opening a new one"),
        }
        // Given up (while suspended or read-only): the bound stays, the quorum may still hold the
        // session until then. Ended by the server (expired, ...): no bound any more.
        let given_up = !matches!(ended, Ended::ByServer(_));
        this.publish_with_bound(ConnectionState::Lost, false, |b| {
            let current = b.current.take();
            if given_up {
                b.given_up = current;
            }
        });
        drop(this);
        match replace_session(&sessions).await {
            Some((w, read_only)) => {
                watcher = w;
                suspended_since = read_only;
                handle_was_read_only = read_only.is_some();
            }
            None => return,
        }
    }
}

/// Why [`supervise`] gives a session up.
enum Ended {
    /// The handle reported a terminal state (expired, authentication failed, closed).
    ByServer(zk::SessionState),
    /// Suspended, or served read-only, past [`lost_after_suspended`].
    GivenUp,
    /// The handle moved from a read-only server to a read-write one: on a new session.
    LeftReadOnly,
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Abandons the current session (if any) and opens a new one, retrying until it works or the
/// client closes.
/// Returns the new session's watcher and, if it is served read-only, since when.
async fn replace_session(sessions: &Weak<Sessions>) -> Option<(zk::StateWatcher, Option<Instant>)> {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        let this = sessions.upgrade()?;
        if this.is_closing() {
            return None;
        }
        // Drop our handle on the old session first: the session closes once in-flight users, and
        // the holds granted on it, let go (see `SessionKeep`).
        let (old, keep) = {
            let mut slot = this.slot.write();
            (slot.zk.take(), slot.keep.take())
        };
        drop(old);
        let expiry = keep.as_ref().and_then(|keep| this.earliest_expiry(keep.session));
        this.retire(keep, expiry);
        match open_session(&this.config).await {
            Ok(zk) => {
                // The watcher first: a change after the state read below is reported to it.
                let watcher = zk.state_watcher();
                let read_only = (zk.state() == zk::SessionState::ConnectedReadOnly).then(Instant::now);
                let session = {
                    let mut slot = this.slot.write();
                    // Checked under the slot lock that close() takes the handle under: either
                    // close() finds this session and closes it, or we see `closing` and drop it.
                    if this.is_closing() {
                        drop(slot);
                        drop(zk);
                        return None;
                    }
                    let session = SessionIdentity { epoch: slot.session.epoch + 1, id: zk.session_id().0 };
                    slot.session = session;
                    slot.keep = Some(SessionKeep::new(session, &zk));
                    slot.zk = Some(zk);
                    session
                };
                info!(epoch = session.epoch, session = format!("{:#x}", session.id), "new zookeeper session");
                this.status.send_modify(|s| s.session = session);
                match read_only {
                    // Never reported fully connected: no hold is `Held` on it, and the LOST timer
                    // runs (see `supervise`), as Curator reports READ_ONLY for a read-only
                    // connection whatever came before.
                    Some(since) => {
                        let bound = this.read_only_bound(since);
                        this.publish_with_bound(ConnectionState::ReadOnly, true, |b| b.suspended(session, bound));
                    }
                    // CONNECTED if it is the client's first read-write connection (see `publish`).
                    None => this.publish(ConnectionState::Reconnected, true),
                }
                return Some((watcher, read_only));
            }
            Err(err) => {
                debug!(%err, "could not open a new session yet");
                drop(this);
                backoff.wait().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default fraction of the session timeout at which a suspended session is LOST.
    const LOST_BY_FRACTION_OF_SESSION: f64 = crate::framework::DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT / 100.0;

    #[test]
    fn a_read_only_connection_serves_no_hold() {
        let session = SessionIdentity { epoch: 1, id: 7 };
        let status =
            |state| Status { state, connected: true, session, closed: false, expiry_bounds: ExpiryBounds::default() };
        assert!(status(ConnectionState::Connected).serves(session));
        assert!(status(ConnectionState::Reconnected).serves(session));
        assert!(!status(ConnectionState::ReadOnly).serves(session), "cut off from the quorum");
        assert!(!status(ConnectionState::ReadOnly).has_ended(session), "suspended, not lost");
    }

    #[test]
    fn lost_fires_before_the_server_can_expire_the_session() {
        let s = Duration::from_secs;
        for (requested, negotiated) in [(s(60), s(60)), (s(2), s(2)), (s(60), s(40)), (s(10), s(4)), (s(4), s(20))] {
            let lost = lost_after_suspended(requested, negotiated, LOST_BY_FRACTION_OF_SESSION);
            // SUSPENDED at most idle + tick after the last reply:
            let configured = requested / 5;
            let idle = if configured > negotiated * 3 / 5 { negotiated * 2 / 5 } else { configured };
            let latest_suspended = idle + idle / 8;
            assert!(latest_suspended + lost <= negotiated.mul_f64(0.85) + Duration::from_millis(1));
            // ... and LOST is not declared absurdly early either (a blip is not a lost session).
            assert!(lost >= negotiated / 4, "{requested:?}/{negotiated:?}: {lost:?}");
        }
        assert_eq!(lost_after_suspended(s(60), s(60), 0.85), s(60).mul_f64(0.85) - s(12) - Duration::from_millis(1500));
        // A smaller fraction gives up sooner; one below the time SUSPENDED takes, with it.
        for (requested, negotiated) in [(s(60), s(60)), (s(2), s(2)), (s(4), s(20))] {
            let sooner = lost_after_suspended(requested, negotiated, 0.5);
            assert!(sooner < lost_after_suspended(requested, negotiated, LOST_BY_FRACTION_OF_SESSION));
            assert_eq!(lost_after_suspended(requested, negotiated, 0.01), Duration::ZERO);
        }
        // The expiry bound published at SUSPENDED comes 0.15 of the session timeout after LOST.
        for (requested, negotiated) in [(s(15), s(15)), (s(2), s(2)), (s(60), s(40)), (s(4), s(20))] {
            let bound = negotiated - suspended_within(requested, negotiated);
            let lost = lost_after_suspended(requested, negotiated, LOST_BY_FRACTION_OF_SESSION);
            let gap = bound - lost;
            assert!(gap.abs_diff(negotiated.mul_f64(0.15)) < Duration::from_millis(1), "{requested:?}: {gap:?}");
        }
    }
}
