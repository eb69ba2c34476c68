//! [`FaultProxy`]: a TCP proxy owned by the test, to cut, blackhole or delay client traffic.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::isolation::split_chroot;
use super::{TestingError, TestingResult};

/// Buffer size of each forwarding direction.
const BUFFER: usize = 16 * 1024;
/// The most bytes one direction of a connection holds back under [`Latency`]: beyond it the proxy
/// stops reading that direction until some are delivered (TCP's own back-pressure then applies).
const MAX_DELAYED: usize = 4 * 1024 * 1024;

/// One way traffic flows through a [`FaultProxy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server: requests.
    ToServer,
    /// From the server to the client: replies, watch events, pings' answers.
    ToClient,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::ToServer => 0,
            Direction::ToClient => 1,
        }
    }
}

/// How long a [`FaultProxy`] holds back the bytes of one [`Direction`] before forwarding them
/// (see [`FaultProxy::set_latency`]): a fixed delay, or one drawn anew, uniformly, for each chunk
/// the proxy reads. Bytes are never reordered: a chunk that drew a shorter delay than the chunk
/// before it waits for that one (it is one TCP stream), so the delay of a chunk is at least the
/// one it drew.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use zk_curator::testing::Latency;
///
/// let jittery = Latency::uniform(Duration::from_millis(20), Duration::from_millis(300));
/// assert_eq!((jittery.min(), jittery.max()), (Duration::from_millis(20), Duration::from_millis(300)));
/// assert!(Latency::fixed(Duration::ZERO).is_none());
/// assert_eq!(Latency::default(), Latency::NONE);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Latency {
    min: Duration,
    max: Duration,
}

impl Latency {
    /// No delay: bytes are forwarded as soon as they are read (the default).
    pub const NONE: Latency = Latency { min: Duration::ZERO, max: Duration::ZERO };

    /// Every chunk waits `delay`.
    pub const fn fixed(delay: Duration) -> Self {
        Latency { min: delay, max: delay }
    }

    /// Each chunk waits a delay drawn uniformly between the two bounds, given in either order.
    pub fn uniform(a: Duration, b: Duration) -> Self {
        Latency { min: a.min(b), max: a.max(b) }
    }

    /// The shortest delay.
    pub fn min(self) -> Duration {
        self.min
    }

    /// The longest delay.
    pub fn max(self) -> Duration {
        self.max
    }

    /// True for no delay at all.
    pub fn is_none(self) -> bool {
        self.max.is_zero()
    }

    fn sample(self, rng: &mut impl rand::Rng) -> Duration {
        if self.min == self.max {
            self.min
        } else {
            rng.gen_range(self.min..=self.max)
        }
    }

    /// A delay drawn under another latency, brought within this one's bounds.
    fn clamp(self, delay: Duration) -> Duration {
        delay.clamp(self.min, self.max)
    }
}

/// What a [`FaultProxy`] does with traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProxyMode {
    /// Forward bytes both ways (the default).
    #[default]
    Pass,
    /// Close every open connection now, and close new connections right after accepting them,
    /// until the mode changes. Clients see a connection loss at once.
    Cut,
    /// Keep connections (old and new) open but silently drop every byte both ways: the client
    /// gets no answers and the server hears nothing, so the server expires the session after its
    /// timeout (the client only learns of it once it reaches the server again). Connections that
    /// dropped bytes are closed when the mode leaves `Blackhole`, since their byte streams are
    /// no longer consistent; new connections start clean.
    Blackhole,
    /// Forward the client's bytes to the server but drop every byte of the server's replies: a
    /// request is applied, its reply is lost (the outcome is unknown to the client). New
    /// connections reach the server the same way, so they never complete a handshake. Like
    /// `Blackhole`, connections that dropped bytes are closed when the mode changes.
    DropReplies,
}

/// State shared by the proxy handle and its tasks.
struct Shared {
    mode: watch::Sender<ProxyMode>,
    /// Per [`Direction::index`].
    latency: watch::Sender<[Latency; 2]>,
    upstream: Mutex<String>,
    connections: Mutex<HashMap<u64, AbortHandle>>,
    next_id: AtomicU64,
}

impl Shared {
    fn abort_all(&self) {
        let connections = std::mem::take(&mut *self.connections.lock());
        for handle in connections.values() {
            handle.abort();
        }
    }
}

/// A fault-injecting TCP proxy on a free `127.0.0.1` port, placed between a client and a
/// ZooKeeper server by connecting the client to [`connect_string`](Self::connect_string).
///
/// Switch its [`ProxyMode`] to simulate a network cut ([`ProxyMode::Cut`]: disconnect without
/// session loss, if short) or a partition ([`ProxyMode::Blackhole`]: the *server* expires the
/// session after its timeout, the honest way to test expiry). [`set_upstream`](Self::set_upstream)
/// redirects new connections, e.g. to another ensemble member.
///
/// [`set_latency`](Self::set_latency) delays the traffic that passes, both ways or
/// [one way](Self::set_direction_latency), by a [fixed](Latency::fixed) or
/// [random](Latency::uniform) amount — to widen a race window (a reply or a watch event that
/// arrives late, a grant decided just before a suspension) instead of hoping to hit it. Latency
/// combines with every mode: it delays what [`ProxyMode::Pass`] forwards (and the requests
/// [`ProxyMode::DropReplies`] forwards); bytes held back when the mode turns to
/// [`Cut`](ProxyMode::Cut), [`Blackhole`](ProxyMode::Blackhole) (both ways) or
/// [`DropReplies`](ProxyMode::DropReplies) (replies) are dropped with the rest, as bytes in flight
/// on a failing network are.
///
/// The proxy runs on the tokio runtime it was started on. Dropping it stops the listener and
/// closes all connections; it never panics.
pub struct FaultProxy {
    shared: Arc<Shared>,
    local: SocketAddr,
    /// The upstream connect string's chroot (`""` when none): a client of the proxy keeps it.
    chroot: String,
    acceptor: AbortHandle,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("listen", &self.local)
            .field("upstream", &*self.shared.upstream.lock())
            .field("mode", &self.mode())
            .field("latency", &*self.shared.latency.borrow())
            .field("connections", &self.connections())
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy in [`ProxyMode::Pass`] forwarding to `upstream` (`"host:port"`, e.g. a
    /// [`TestingServer::connect_string`](super::TestingServer::connect_string)). A chroot at the
    /// end of `upstream` (`"host:port/app"`) is kept for the proxy's own
    /// [`connect_string`](Self::connect_string). Must be called within a tokio runtime.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] for an empty upstream; [`TestingError::Io`] if no local
    /// port can be bound.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing outlives a dropped call.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
    /// # use zk_curator::CuratorClient;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = TestingServer::start().await?;
    /// let proxy = FaultProxy::start(&server.connect_string()).await?;
    /// let client = CuratorClient::builder(&proxy.connect_string())
    ///     .session_timeout(Duration::from_secs(2))
    ///     .connect()
    ///     .await?;
    /// proxy.set_mode(ProxyMode::Blackhole); // the server expires the session after 2 s
    /// # Ok(()) }
    /// ```
    pub async fn start(upstream: &str) -> TestingResult<FaultProxy> {
        let (upstream, chroot) = split_chroot(upstream.trim());
        if upstream.is_empty() {
            return Err(TestingError::InvalidArgument { message: "FaultProxy upstream is empty".into() });
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|source| TestingError::Io { context: "binding the FaultProxy listener".into(), source })?;
        let local = listener
            .local_addr()
            .map_err(|source| TestingError::Io { context: "reading the FaultProxy address".into(), source })?;
        let (mode, _) = watch::channel(ProxyMode::Pass);
        let (latency, _) = watch::channel([Latency::NONE; 2]);
        let shared = Arc::new(Shared {
            mode,
            latency,
            upstream: Mutex::new(upstream.to_owned()),
            connections: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        });
        let acceptor = tokio::spawn(accept_loop(listener, Arc::clone(&shared))).abort_handle();
        Ok(FaultProxy { shared, local, chroot: chroot.to_owned(), acceptor })
    }

    /// Where clients connect to: `127.0.0.1:PORT` of the proxy, followed by the upstream's chroot
    /// if it had one.
    pub fn connect_string(&self) -> String {
        format!("{}{}", self.local, self.chroot)
    }

    /// Switches the mode; see [`ProxyMode`] for the effect on open and new connections.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.shared.mode.send_replace(mode);
        if mode == ProxyMode::Cut {
            self.shared.abort_all();
        }
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        *self.shared.mode.borrow()
    }

    /// Delays the traffic of both directions by `latency` ([`Latency::NONE`] restores normal
    /// speed). Applies at once to open and new connections, and to bytes already held back: each
    /// keeps the delay it drew, brought within the new bounds (so clearing the latency forwards
    /// them at once, in order). Each direction is delayed on its own: a round trip through the
    /// proxy takes at least twice the minimum.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::{FaultProxy, Latency, TestingServer};
    /// # use zk_curator::CuratorClient;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = TestingServer::start().await?;
    /// let proxy = FaultProxy::start(&server.connect_string()).await?;
    /// let client = CuratorClient::connect(&proxy.connect_string()).await?;
    /// // Every reply and watch event now arrives 50 to 300 ms late, in order.
    /// proxy.set_latency(Latency::uniform(Duration::from_millis(50), Duration::from_millis(300)));
    /// client.get_data("/").await?;
    /// proxy.set_latency(Latency::NONE);
    /// # Ok(()) }
    /// ```
    pub fn set_latency(&self, latency: Latency) {
        self.shared.latency.send_replace([latency; 2]);
    }

    /// Delays the traffic of one `direction` by `latency`, leaving the other's as it is; otherwise
    /// as [`set_latency`](Self::set_latency).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::{Direction, FaultProxy, Latency};
    /// # async fn demo(proxy: FaultProxy) {
    /// // Requests reach the server at once; their replies arrive 200 ms late.
    /// proxy.set_direction_latency(Direction::ToClient, Latency::fixed(Duration::from_millis(200)));
    /// # }
    /// ```
    pub fn set_direction_latency(&self, direction: Direction, latency: Latency) {
        self.shared.latency.send_modify(|both| both[direction.index()] = latency);
    }

    /// The latency of one direction now.
    pub fn latency(&self, direction: Direction) -> Latency {
        self.shared.latency.borrow()[direction.index()]
    }

    /// Sends *new* connections to `upstream` (`"host:port"`; a chroot there is ignored: clients
    /// keep the one of [`connect_string`](Self::connect_string)); open ones keep their server.
    pub fn set_upstream(&self, upstream: &str) {
        *self.shared.upstream.lock() = split_chroot(upstream.trim()).0.to_owned();
    }

    /// Number of client connections currently open through the proxy.
    pub fn connections(&self) -> usize {
        self.shared.connections.lock().len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.shared.abort_all();
    }
}

/// Removes a connection from the registry when its task ends (normally or aborted).
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.connections.lock().remove(&self.id);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // E.g. EMFILE; back off instead of spinning.
                tracing::debug!(%err, "FaultProxy accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let mode = *shared.mode.borrow();
        if mode == ProxyMode::Cut {
            tracing::debug!(%peer, "FaultProxy cut: closing new connection");
            drop(client);
            continue;
        }
        let _ = client.set_nodelay(true);
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let registration = Registration { shared: Arc::clone(&shared), id };
        let upstream = shared.upstream.lock().clone();
        let mode_rx = shared.mode.subscribe();
        let latency_rx = shared.latency.subscribe();
        // Register under the lock before the task can finish, so its Registration removes it.
        let mut connections = shared.connections.lock();
        let task = tokio::spawn(async move {
            let _registration = registration;
            serve_connection(client, upstream, mode_rx, latency_rx).await;
        });
        connections.insert(id, task.abort_handle());
    }
}

/// Bytes of one direction held back under [`Latency`], oldest first.
#[derive(Default)]
struct Delayed {
    chunks: VecDeque<Chunk>,
    bytes: usize,
}

struct Chunk {
    read_at: Instant,
    /// The delay it drew.
    delay: Duration,
    /// When it is forwarded: its read plus its delay, but never before the chunk ahead of it.
    due: Instant,
    data: Vec<u8>,
}

impl Delayed {
    fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    fn has_room(&self) -> bool {
        self.bytes < MAX_DELAYED
    }

    fn push(&mut self, data: &[u8], delay: Duration) {
        let read_at = Instant::now();
        let due = self.chunks.back().map_or(read_at + delay, |last| last.due.max(read_at + delay));
        self.bytes += data.len();
        self.chunks.push_back(Chunk { read_at, delay, due, data: data.to_vec() });
    }

    /// When the oldest chunk is due (far ahead when there is none: a disabled branch).
    fn next_due(&self) -> Instant {
        self.chunks.front().map_or_else(|| Instant::now() + Duration::from_secs(3600), |chunk| chunk.due)
    }

    /// The chunks due now, oldest first, taken out.
    fn take_due(&mut self) -> Vec<u8> {
        let now = Instant::now();
        let mut due = Vec::new();
        while self.chunks.front().is_some_and(|chunk| chunk.due <= now) {
            let chunk = self.chunks.pop_front().expect("a front chunk");
            self.bytes -= chunk.data.len();
            due.extend_from_slice(&chunk.data);
        }
        due
    }

    /// The latency changed: each chunk keeps its delay, brought within the new bounds.
    fn retime(&mut self, latency: Latency) {
        let mut previous: Option<Instant> = None;
        for chunk in &mut self.chunks {
            chunk.delay = latency.clamp(chunk.delay);
            let due = chunk.read_at + chunk.delay;
            chunk.due = previous.map_or(due, |p| p.max(due));
            previous = Some(chunk.due);
        }
    }

    /// Drops what is held back: true if there was anything.
    fn drop_all(&mut self) -> bool {
        let had = !self.chunks.is_empty();
        self.chunks.clear();
        self.bytes = 0;
        had
    }
}

/// Forwards one connection until either side closes (what the other side sent before is
/// delivered first), the mode becomes `Cut`, or the mode leaves `Blackhole` after bytes were
/// dropped.
async fn serve_connection(
    client: TcpStream,
    upstream: String,
    mut mode_rx: watch::Receiver<ProxyMode>,
    mut latency_rx: watch::Receiver<[Latency; 2]>,
) {
    let mut dirty = false;
    // A blackholed new connection never reaches the server.
    let mut server = None;
    let initial = *mode_rx.borrow_and_update();
    if matches!(initial, ProxyMode::Pass | ProxyMode::DropReplies) {
        match TcpStream::connect(upstream.as_str()).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                server = Some(stream);
            }
            Err(err) => {
                tracing::debug!(%err, upstream, "FaultProxy cannot reach upstream; closing client");
                return;
            }
        }
    }
    if initial != ProxyMode::Pass {
        dirty = true;
    }
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = match server {
        Some(server) => {
            let (rx, tx) = server.into_split();
            (Some(rx), Some(tx))
        }
        None => (None, None),
    };
    let mut client_open = true;
    let mut server_open = server_rx.is_some();
    let mut to_server = vec![0u8; BUFFER];
    let mut to_client = vec![0u8; BUFFER];
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::from_entropy();
    let mut latency = *latency_rx.borrow_and_update();
    let (mut delayed_to_server, mut delayed_to_client) = (Delayed::default(), Delayed::default());
    loop {
        let mode = *mode_rx.borrow_and_update();
        match mode {
            ProxyMode::Cut => return,
            ProxyMode::Pass if dirty => return,
            _ => {}
        }
        let blackhole = mode == ProxyMode::Blackhole;
        let drop_replies = blackhole || mode == ProxyMode::DropReplies;
        // Bytes held back are in flight: a partition drops them too.
        if blackhole && delayed_to_server.drop_all() {
            dirty = true;
        }
        if drop_replies && delayed_to_client.drop_all() {
            dirty = true;
        }
        let both_open = client_open && server_open;
        let neither_open = !client_open && !server_open;
        let held_back = !delayed_to_server.is_empty() || !delayed_to_client.is_empty();
        // Half-open connections linger only while blackholed, or until what the closing side
        // sent before its close was delivered.
        if neither_open || (!blackhole && !both_open && !held_back) {
            return;
        }
        // Once a side closed (outside a blackhole), nothing more is read: what is held back drains.
        let reading = both_open || blackhole;
        tokio::select! {
            // A mode change must win over bytes that are ready at the same time: once `set_mode`
            // has returned, nothing read afterwards may be forwarded under the old mode.
            biased;
            changed = mode_rx.changed() => {
                if changed.is_err() {
                    return; // proxy dropped
                }
            },
            changed = latency_rx.changed() => {
                if changed.is_err() {
                    return; // proxy dropped
                }
                latency = *latency_rx.borrow_and_update();
                delayed_to_server.retime(latency[Direction::ToServer.index()]);
                delayed_to_client.retime(latency[Direction::ToClient.index()]);
            },
            () = tokio::time::sleep_until(delayed_to_server.next_due().into()), if !delayed_to_server.is_empty() => {
                let due = delayed_to_server.take_due();
                let Some(tx) = server_tx.as_mut() else { return };
                if tx.write_all(&due).await.is_err() {
                    return;
                }
            },
            () = tokio::time::sleep_until(delayed_to_client.next_due().into()), if !delayed_to_client.is_empty() => {
                if client_tx.write_all(&delayed_to_client.take_due()).await.is_err() {
                    return;
                }
            },
            read = client_rx.read(&mut to_server), if client_open && reading && delayed_to_server.has_room() => match read {
                Ok(0) | Err(_) if blackhole => {
                    // A real partition would not carry the FIN either: keep the server side open.
                    client_open = false;
                },
                // Closed: deliver what it sent before (a ZooKeeper client's close request).
                Ok(0) => client_open = false,
                Err(_) => return,
                Ok(_) if blackhole || !forwards(*mode_rx.borrow(), Direction::ToServer, dirty) => dirty = true,
                Ok(n) => {
                    let delay = latency[Direction::ToServer.index()];
                    if delay.is_none() && delayed_to_server.is_empty() {
                        let Some(tx) = server_tx.as_mut() else { return };
                        if tx.write_all(&to_server[..n]).await.is_err() {
                            return;
                        }
                    } else {
                        delayed_to_server.push(&to_server[..n], delay.sample(&mut rng));
                    }
                },
            },
            read = read_opt(&mut server_rx, &mut to_client), if server_open && reading && delayed_to_client.has_room() => match read {
                Ok(0) | Err(_) if blackhole => server_open = false,
                Ok(0) => server_open = false,
                Err(_) => return,
                Ok(_) if drop_replies || !forwards(*mode_rx.borrow(), Direction::ToClient, dirty) => dirty = true,
                Ok(n) => {
                    let delay = latency[Direction::ToClient.index()];
                    if delay.is_none() && delayed_to_client.is_empty() {
                        if client_tx.write_all(&to_client[..n]).await.is_err() {
                            return;
                        }
                    } else {
                        delayed_to_client.push(&to_client[..n], delay.sample(&mut rng));
                    }
                },
            },
        }
    }
}

/// Whether `mode` forwards bytes going `direction`. Asked again once a read has completed: the
/// mode may have changed between the `select!`'s look at it and the read (a task descheduled on a
/// loaded machine), and bytes read after `set_mode` returned must follow the new mode. A
/// connection that dropped bytes forwards nothing once it is to close (`Pass`).
fn forwards(mode: ProxyMode, direction: Direction, dirty: bool) -> bool {
    match mode {
        ProxyMode::Pass => !dirty,
        ProxyMode::Cut | ProxyMode::Blackhole => false,
        ProxyMode::DropReplies => direction == Direction::ToServer,
    }
}

async fn read_opt(rx: &mut Option<tokio::net::tcp::OwnedReadHalf>, buf: &mut [u8]) -> std::io::Result<usize> {
    match rx {
        Some(rx) => rx.read(buf).await,
        None => std::future::pending().await,
    }
}
