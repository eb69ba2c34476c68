//! [`FaultProxy`]: a TCP proxy owned by the test, to cut or blackhole client traffic.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::isolation::split_chroot;
use super::{TestingError, TestingResult};

/// Buffer size of each forwarding direction.
const BUFFER: usize = 16 * 1024;

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
        let shared = Arc::new(Shared {
            mode,
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
        // Register under the lock before the task can finish, so its Registration removes it.
        let mut connections = shared.connections.lock();
        let task = tokio::spawn(async move {
            let _registration = registration;
            serve_connection(client, upstream, mode_rx).await;
        });
        connections.insert(id, task.abort_handle());
    }
}

/// Forwards one connection until either side closes, the mode becomes `Cut`, or the mode
/// leaves `Blackhole` after bytes were dropped.
async fn serve_connection(client: TcpStream, upstream: String, mut mode_rx: watch::Receiver<ProxyMode>) {
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
    loop {
        let mode = *mode_rx.borrow_and_update();
        match mode {
            ProxyMode::Cut => return,
            ProxyMode::Pass if dirty => return,
            _ => {}
        }
        let blackhole = mode == ProxyMode::Blackhole;
        let drop_replies = blackhole || mode == ProxyMode::DropReplies;
        let both_open = client_open && server_open;
        let neither_open = !client_open && !server_open;
        // Half-open connections linger only while blackholed.
        if neither_open || (!blackhole && !both_open) {
            return;
        }
        tokio::select! {
            // A mode change must win over bytes that are ready at the same time: once `set_mode`
            // has returned, nothing read afterwards may be forwarded under the old mode.
            biased;
            changed = mode_rx.changed() => {
                if changed.is_err() {
                    return; // proxy dropped
                }
            },
            read = client_rx.read(&mut to_server), if client_open => match read {
                Ok(0) | Err(_) if blackhole => {
                    // A real partition would not carry the FIN either: keep the server side open.
                    client_open = false;
                },
                Ok(0) | Err(_) => return,
                Ok(_) if blackhole => dirty = true,
                Ok(n) => {
                    let Some(tx) = server_tx.as_mut() else { return };
                    if tx.write_all(&to_server[..n]).await.is_err() {
                        return;
                    }
                },
            },
            read = read_opt(&mut server_rx, &mut to_client), if server_open => match read {
                Ok(0) | Err(_) if blackhole => server_open = false,
                Ok(0) | Err(_) => return,
                Ok(_) if drop_replies => dirty = true,
                Ok(n) => {
                    if client_tx.write_all(&to_client[..n]).await.is_err() {
                        return;
                    }
                },
            },
        }
    }
}

async fn read_opt(rx: &mut Option<tokio::net::tcp::OwnedReadHalf>, buf: &mut [u8]) -> std::io::Result<usize> {
    match rx {
        Some(rx) => rx.read(buf).await,
        None => std::future::pending().await,
    }
}
