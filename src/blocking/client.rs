//! [`CuratorClient`]: the blocking client.

use std::future::IntoFuture;
use std::sync::Arc;

use super::Core;
use crate::error::Result;
use crate::{CreateMode, CuratorClientBuilder, OpResult, Stat, Transaction};

/// A blocking [`CuratorClient`](crate::CuratorClient): the same client, with a tokio runtime of
/// its own on a background thread, for use from plain threads. Cheap to clone (clones share the
/// client and the runtime).
///
/// The client is closed when the last clone — and the last recipe or guard made through it — is
/// dropped (in the background: pending deletes may finish within `max_close_wait`), or by
/// [`close`](Self::close), which waits for that.
///
/// Everything the async client offers without waiting (connection state, session, namespace)
/// works from any thread through [`async_client`](Self::async_client); what waits, through
/// [`block_on`](Self::block_on).
#[derive(Clone, Debug)]
pub struct CuratorClient {
    core: Arc<Core>,
}

impl CuratorClient {
    /// Connects with every default (Curator's `CuratorFrameworkFactory.newClient` + `start` +
    /// `blockUntilConnected`), as [`CuratorClient::connect`](crate::CuratorClient::connect).
    ///
    /// # Errors
    /// As [`CuratorClientBuilder::connect`] ([`Error::Connect`](crate::Error::Connect) when no
    /// session could be established within the connection timeout, 15 s by default);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn connect(connect_string: &str) -> Result<CuratorClient> {
        Self::from_builder(crate::CuratorClient::builder(connect_string))
    }

    /// Connects a client configured with the async [`CuratorClientBuilder`] (namespace, timeouts,
    /// retry policy, credentials, TLS, ...), as [`CuratorClientBuilder::connect`].
    ///
    /// # Errors
    /// As [`connect`](Self::connect); the builder's argument errors.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use zk_curator::{blocking, CuratorClient};
    ///
    /// let builder = CuratorClient::builder("zk1:2181,zk2:2181").namespace("billing");
    /// let client = blocking::CuratorClient::from_builder(builder.session_timeout(Duration::from_secs(30)))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn from_builder(builder: CuratorClientBuilder) -> Result<CuratorClient> {
        Ok(CuratorClient { core: Core::start(|| builder.connect())? })
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// The async client inside: its synchronous methods work from any thread
    /// ([`connection_state`](crate::CuratorClient::connection_state),
    /// [`session_id`](crate::CuratorClient::session_id), ...); its async ones run through
    /// [`block_on`](Self::block_on), or in async code while this client is alive (its background
    /// work runs on this client's runtime, which stops when the last blocking handle is dropped).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// println!("state {:?}, session {:#x}", client.async_client().connection_state(), client.async_client().session_id());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn async_client(&self) -> &crate::CuratorClient {
        self.core.client()
    }

    /// Waits until the client is connected (Curator's `blockUntilConnected`), at most `timeout` (a
    /// [`Duration`](std::time::Duration) or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is,
    /// `Ok(false)` if the time ran out first.
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) once the client is closed;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// if !client.block_until_connected(std::time::Duration::from_secs(5))? {
    ///     eprintln!("ZooKeeper not reachable yet");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn block_until_connected(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.core.client().block_until_connected(timeout))?
    }

    /// Waits for a future of the async API on the calling thread — for what this facade does not
    /// wrap (the data API, guarded writes, `Hold::lost`, ...). It takes anything `.await` takes
    /// ([`IntoFuture`]), so the data API's builders go in as they are. The future runs on this
    /// client's runtime as the calling thread: Curator-style holds taken in it belong to the
    /// thread, as with this module's recipes. It may borrow; it must not block its thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context (the future is dropped unpolled); otherwise `Ok` with the
    /// future's output.
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// let guard = mutex.lock()?;
    /// // Wait up to 10 s for the lock to be lost (a watchdog thread, say).
    /// let lost = client.block_on(tokio::time::timeout(Duration::from_secs(10), guard.hold().lost()))?.is_ok();
    /// // A data-API builder, as it would be awaited.
    /// let (config, _stat) = client.block_on(client.async_client().get_data("/config/app"))??;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn block_on<F: IntoFuture>(&self, future: F) -> Result<F::Output> {
        self.core.block_on(future.into_future())
    }

    /// Closes the client and waits for it, as [`CuratorClient::close`](crate::CuratorClient::close):
    /// pending background deletes may finish (bounded by `max_close_wait`), then the session is
    /// closed. Every later operation fails with [`Error::Closed`](crate::Error::Closed), also
    /// through clones, recipes and guards; waiting acquires stop with that error.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context (nothing is closed).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// client.close()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.core.client().close())
    }

    /// Runs a call of the async data API and returns its result — the builders with every
    /// option: `client.call(client.async_client().create("/a").mode(CreateMode::Container))`.
    ///
    /// # Errors
    /// The call's error; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let (_, _, changed) = client.call(client.async_client().get_data("/config").watch())?;
    /// let event = client.block_on(changed)?;
    /// println!("{:?}", event.event_type);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn call<T>(&self, call: impl std::future::IntoFuture<Output = Result<T>>) -> Result<T> {
        self.core.block_on(call.into_future())?
    }

    /// Creates `path` with `data` and `mode`, making missing parents as containers (see
    /// [`CuratorClient::create`](crate::CuratorClient::create)); returns the created path.
    ///
    /// # Errors
    /// As the async create; `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let job = client.create("/jobs/job-", b"payload", zk_curator::CreateMode::PersistentSequential)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn create(&self, path: &str, data: impl Into<Vec<u8>>, mode: CreateMode) -> Result<String> {
        self.call(self.async_client().create(path).data(data).mode(mode).creating_parent_containers_if_needed())
    }

    /// `path`'s data and stat (see [`CuratorClient::get_data`](crate::CuratorClient::get_data)).
    ///
    /// # Errors
    /// As the async call (`ErrorCode::NoNode` for a missing node); `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let (data, stat) = client.get_data("/config")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.call(self.async_client().get_data(path))
    }

    /// Writes `path`'s data, only at `version` if given (see
    /// [`CuratorClient::set_data`](crate::CuratorClient::set_data)); returns the new stat.
    ///
    /// # Errors
    /// As the async call (`ErrorCode::BadVersion`, `NoNode`); `runtime` inside a tokio runtime
    /// context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let (_, stat) = client.get_data("/config")?;
    /// client.set_data("/config", b"v2", Some(stat.version))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn set_data(&self, path: &str, data: impl Into<Vec<u8>>, version: Option<i32>) -> Result<Stat> {
        let set = self.async_client().set_data(path, data);
        match version {
            Some(version) => self.call(set.version(version)),
            None => self.call(set),
        }
    }

    /// `path`'s stat, or `None` (see [`CuratorClient::exists`](crate::CuratorClient::exists)).
    ///
    /// # Errors
    /// As the async call; `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let ready = client.exists("/ready")?.is_some();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn exists(&self, path: &str) -> Result<Option<Stat>> {
        self.call(self.async_client().exists(path))
    }

    /// `path`'s children (see [`CuratorClient::get_children`](crate::CuratorClient::get_children)).
    ///
    /// # Errors
    /// As the async call; `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let workers = client.get_children("/workers")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn get_children(&self, path: &str) -> Result<Vec<String>> {
        self.call(self.async_client().get_children(path))
    }

    /// Every lock under `root`, with its holders and waiters (see [`crate::inspect::inspect_with`]).
    ///
    /// # Errors
    /// As the async call; `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let found = client.inspect("/locks", &zk_curator::inspect::InspectOptions::default())?;
    /// for lock in &found.locks {
    ///     println!("{} {}: {} waiting", lock.path, lock.kind, lock.waiters.len());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn inspect(&self, root: &str, options: &crate::inspect::InspectOptions) -> Result<crate::inspect::Inspection> {
        self.call(crate::inspect::inspect_with(self.async_client(), root, options))
    }

    /// Deletes `path`, only at `version` if given (see
    /// [`CuratorClient::delete`](crate::CuratorClient::delete); [`call`](Self::call) gives
    /// the other options).
    ///
    /// # Errors
    /// As the async call (`NoNode`, `BadVersion`, `NotEmpty`); `runtime` inside a tokio runtime
    /// context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// client.delete("/jobs/job-0000000007", None)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        let delete = self.async_client().delete(path);
        match version {
            Some(version) => self.call(delete.version(version)),
            None => self.call(delete),
        }
    }

    /// Commits `transaction` atomically (see [`CuratorClient::commit`](crate::CuratorClient::commit)).
    ///
    /// # Errors
    /// As the async call (`Error::TransactionFailed`); `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// use zk_curator::{CreateMode, Transaction};
    /// client.commit(Transaction::new().create("/a", b"", CreateMode::Persistent).set_data("/b", b"x", None))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn commit(&self, transaction: Transaction) -> Result<Vec<OpResult>> {
        self.call(self.async_client().commit(transaction))
    }
}
