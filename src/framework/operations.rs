//! The data API of [`CuratorClient`] (Curator's `create()`, `getData()`, `setData()`,
//! `checkExists()`, `getChildren()`, `delete()`, `transaction()`): one builder per operation,
//! awaited directly (`client.create("/a").data(b"x").await`). Every call is namespaced, validated
//! (typed errors naming the path), retried under the client's policy where a retry is safe, and
//! bounded by [`timeout`](CreateBuilder::timeout) when one is given.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use zookeeper_client as zk;

use super::acl::{self, Acl};
use super::client::CuratorClient;
use super::guaranteed_delete::DeleteTarget;
use super::node::{CreateMode, Stat, WatchedEvent};
use super::paths;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorCode, ErrorKind, Result};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A request started at its builder's first poll: the builder owns a clone of the client and its
/// arguments, so it is a `'static` future (spawnable as it is, as reqwest's requests are).
type Running<T> = Option<BoxFuture<'static, Result<T>>>;

/// Makes a request builder its own future: at the first poll its arguments move into the running
/// request (`take`), bounded by the builder's timeout (the field path given after `timeout`).
macro_rules! request_future {
    ($builder:ident, $output:ty, timeout: $($timeout:ident).+) => {
        impl Future for $builder {
            type Output = Result<$output>;

            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                let this = &mut *self;
                let running = match this.running.take() {
                    Some(running) => running,
                    None => {
                        let builder = this.take();
                        // The time limit as the caller gave it, named by a deadline error.
                        let timeout = builder.$($timeout).+.map(Deadline::remaining);
                        Box::pin(crate::deadline::naming_timeout(timeout, builder.run()))
                    }
                };
                this.running.insert(running).as_mut().poll(cx)
            }
        }
    };
}

/// Largest number of rounds a recursive delete makes when children keep appearing.
pub(super) const DELETE_CHILDREN_ROUNDS: u32 = 10;

fn deadline_of(timeout: Option<Deadline>) -> Option<Instant> {
    timeout.map(|deadline| deadline.instant_from(Instant::now()))
}

impl CuratorClient {
    /// Starts a create of `path` (Curator's `create().forPath(path)`): by default a PERSISTENT
    /// node with no data and the ACL of the client's [`AclProvider`](crate::framework::AclProvider); the
    /// builder sets data, mode, parents, protection, ACL and timeout. Awaiting it returns the
    /// created path (with the sequence number for sequential modes), without the namespace.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::CreateMode;
    ///
    /// let job = client
    ///     .create("/jobs/job-")
    ///     .data(b"payload")
    ///     .mode(CreateMode::PersistentSequential)
    ///     .creating_parents_if_needed()
    ///     .await?;
    /// assert!(job.starts_with("/jobs/job-"));
    /// # Ok(()) }
    /// ```
    pub fn create(&self, path: &str) -> CreateBuilder {
        CreateBuilder {
            client: self.clone(),
            path: path.to_string(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
            parents: Parents::None,
            protected: false,
            acls: None,
            timeout: None,
            compression: None,
            running: None,
        }
    }

    /// Starts a read of `path`'s data and [`Stat`] (Curator's `getData()`); `.watch()` also sets
    /// a watch.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let (config, stat) = client.get_data("/config/app").await?;
    /// println!("{} bytes at version {}", config.len(), stat.version);
    ///
    /// // Read and wait for the next change.
    /// let (_, _, changed) = client.get_data("/config/app").watch().await?;
    /// let event = changed.await;
    /// println!("{:?} on {}", event.event_type, event.path);
    /// # Ok(()) }
    /// ```
    pub fn get_data(&self, path: &str) -> GetDataBuilder {
        GetDataBuilder { op: Op::new(self, path), running: None }
    }

    /// Starts a write of `path`'s data (Curator's `setData()`); `.version(v)` makes it
    /// conditional. Awaiting it returns the node's new [`Stat`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::ErrorCode;
    ///
    /// let (old, stat) = client.get_data("/counter").await?;
    /// let next = (String::from_utf8_lossy(&old).parse::<u64>().unwrap_or(0) + 1).to_string();
    /// match client.set_data("/counter", next).version(stat.version).await {
    ///     Ok(_) => {}
    ///     Err(e) if e.code() == Some(ErrorCode::BadVersion) => { /* someone else won; read again */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn set_data(&self, path: &str, data: impl Into<Vec<u8>>) -> SetDataBuilder {
        SetDataBuilder { op: Op::new(self, path), data: data.into(), version: None, running: None }
    }

    /// Starts an existence check of `path` (Curator's `checkExists()`): its [`Stat`], or `None`;
    /// `.watch()` also sets a watch (which fires on creation if the node does not exist).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// if client.exists("/ready").await?.is_none() {
    ///     let (_, created) = client.exists("/ready").watch().await?;
    ///     created.await;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn exists(&self, path: &str) -> ExistsBuilder {
        ExistsBuilder { op: Op::new(self, path), running: None }
    }

    /// Starts a listing of `path`'s children (Curator's `getChildren()`), names only, in the
    /// server's order; `.watch()` also sets a child watch.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let (workers, changed) = client.get_children("/workers").watch().await?;
    /// println!("{} workers", workers.len());
    /// changed.await;
    /// # Ok(()) }
    /// ```
    pub fn get_children(&self, path: &str) -> GetChildrenBuilder {
        GetChildrenBuilder { op: Op::new(self, path), running: None }
    }

    /// Starts a delete of `path` (Curator's `delete()`): `.version(v)`, `.deleting_children_if_needed()`,
    /// `.guaranteed()`, `.quietly()`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// // Remove a whole subtree, and keep trying in the background if the connection fails.
    /// client.delete("/jobs").deleting_children_if_needed().guaranteed().quietly().await?;
    /// # Ok(()) }
    /// ```
    pub fn delete(&self, path: &str) -> DeleteBuilder {
        DeleteBuilder {
            op: Op::new(self, path),
            version: None,
            children: false,
            guaranteed: false,
            quietly: false,
            running: None,
        }
    }

    /// Starts a persistent watch on `path` (ZooKeeper 3.6's `addWatch`): a [`WatchStream`] of
    /// every change of the node (`.recursive()`: of the node and all its descendants), until
    /// the session ends.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use futures_core::Stream;
    ///
    /// let mut changes = client.watch("/config").recursive().await?;
    /// while let Some(event) = changes.next().await {
    ///     println!("{:?} {}", event.event_type, event.path);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, path: &str) -> PersistentWatchBuilder {
        PersistentWatchBuilder { op: Op::new(self, path), recursive: false, running: None }
    }

    /// Commits `transaction` atomically (Curator's `transaction().forOperations(...)`): all its
    /// operations apply, or none. `.timeout(d)` bounds the call; awaiting it returns one
    /// [`OpResult`] per operation.
    ///
    /// A transaction is sent once per connection, like a sequential create: when the connection
    /// fails after it was sent, its outcome is unknown and the retryable error is returned
    /// rather than a retry that could apply it twice.
    ///
    /// # Errors
    /// * [`Error::InvalidPath`] / [`Error::InvalidArgument`] for a bad operation, or data (all
    ///   operations' together) over the client's
    ///   [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (nothing sent);
    /// * [`Error::TransactionFailed`] naming the operation that failed and its code (nothing applied);
    /// * a retryable [`Error::ZooKeeper`] when the outcome is unknown; [`Error::Closed`];
    /// * [`Error::DeadlineExceeded`] past the timeout (nothing sent if it passed before sending;
    ///   otherwise the outcome is unknown).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped commit may still be applied (atomically).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::{CreateMode, OpResult, Transaction};
    ///
    /// let (_, stat) = client.get_data("/orders/next").await?;
    /// let results = client
    ///     .commit(
    ///         Transaction::new()
    ///             .check("/orders/next", stat.version)
    ///             .create("/orders/order-", b"42", CreateMode::PersistentSequential)
    ///             .set_data("/orders/next", b"43", Some(stat.version)),
    ///     )
    ///     .await?;
    /// if let OpResult::Created { path, .. } = &results[1] {
    ///     println!("created {path}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn commit(&self, transaction: Transaction) -> CommitBuilder {
        CommitBuilder { client: self.clone(), transaction, timeout: None, running: None }
    }

    /// Starts a read of `path`'s ACL (Curator's `getACL()`): awaiting it returns the ACL and the
    /// node's [`Stat`], whose [`aversion`](Stat::aversion) a conditional
    /// [`set_acl`](Self::set_acl) names.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let (acl, stat) = client.get_acl("/config").await?;
    /// for entry in &acl {
    ///     println!("{} may {}", entry.id(), entry.permissions());
    /// }
    /// println!("ACL version {}", stat.aversion);
    /// # Ok(()) }
    /// ```
    pub fn get_acl(&self, path: &str) -> GetAclBuilder {
        GetAclBuilder { op: Op::new(self, path), running: None }
    }

    /// Starts a write of `path`'s ACL (Curator's `setACL()`); `.version(v)` makes it conditional
    /// on the node's ACL version ([`Stat::aversion`]). Awaiting it returns the node's new
    /// [`Stat`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::{Acl, ErrorCode};
    ///
    /// let (_, stat) = client.get_acl("/config").await?;
    /// match client.set_acl("/config", Acl::read_unsafe()).version(stat.aversion).await {
    ///     Ok(_) => {}
    ///     Err(e) if e.code() == Some(ErrorCode::BadVersion) => { /* changed meanwhile */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn set_acl(&self, path: &str, acl: Vec<Acl>) -> SetAclBuilder {
        SetAclBuilder { op: Op::new(self, path), acl, version: None, running: None }
    }

    /// Starts a sync of `path` (Curator's `sync()`): awaiting it returns once the server this
    /// client is connected to has caught up with the leader as of the call, so that a read made
    /// after it sees every write completed before it (ZooKeeper's guarantee; see its
    /// ZOOKEEPER-1675 and ZOOKEEPER-2136 for the corner where a leader change in between weakens
    /// it).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// // Another process wrote /config and told us so out of band: read what it wrote.
    /// client.sync("/config").await?;
    /// let (config, _) = client.get_data("/config").await?;
    /// # Ok(()) }
    /// ```
    pub fn sync(&self, path: &str) -> SyncBuilder {
        SyncBuilder { op: Op::new(self, path), running: None }
    }

    /// Deletes every descendant of the namespace-fixed `fixed`, deepest first; true when it
    /// deleted at least one. `background`: for the guaranteed-delete queue (runs while closing).
    pub(super) async fn delete_children(
        &self,
        path: &str,
        fixed: &str,
        deadline: Option<Instant>,
        background: bool,
    ) -> Result<bool> {
        // Iterative depth-first walk: a stack of directories still to empty.
        let mut stack = vec![fixed.to_string()];
        let mut rounds = 0;
        let mut deleted_any = false;
        while let Some(dir) = stack.last().cloned() {
            let d = dir.as_str();
            let children =
                match self.retry_as(background, path, deadline, |zk| async move { zk.list_children(d).await }).await {
                    Ok(children) => children,
                    Err(e) if e.is(ErrorCode::NoNode) => Vec::new(),
                    Err(e) => return Err(e),
                };
            if children.is_empty() {
                stack.pop();
                if dir != fixed {
                    match self.retry_as(background, path, deadline, |zk| async move { zk.delete(d, None).await }).await
                    {
                        Ok(()) => deleted_any = true,
                        Err(e) if e.is(ErrorCode::NoNode) => {}
                        Err(e) if e.is(ErrorCode::NotEmpty) && rounds < DELETE_CHILDREN_ROUNDS => {
                            // A child appeared meanwhile: empty it again.
                            rounds += 1;
                            stack.push(dir);
                        }
                        Err(e) => return Err(e),
                    }
                }
            } else {
                stack.extend(children.iter().map(|child| paths::join(&dir, child)));
            }
        }
        Ok(deleted_any)
    }

    /// [`with_retry`](Self::with_retry), or its background form for the guaranteed-delete queue.
    async fn retry_as<T, F, Fut>(&self, background: bool, path: &str, deadline: Option<Instant>, op: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        if background {
            self.with_retry_in_background(path, deadline, op).await
        } else {
            self.with_retry(path, deadline, op).await
        }
    }
}

/// A commit of a [`Transaction`]: [`CuratorClient::commit`]. Await it for the results.
#[must_use = "a builder does nothing until awaited"]
pub struct CommitBuilder {
    client: CuratorClient,
    transaction: Transaction,
    timeout: Option<Deadline>,
    running: Running<Vec<OpResult>>,
}

impl CommitBuilder {
    /// Bounds the whole call: past `timeout` (a [`Duration`](std::time::Duration) from the first
    /// poll, or an `Instant`) it fails with [`Error::DeadlineExceeded`].
    /// Default: waiting for a connection is bounded by the connection timeout, the reply by the
    /// session's own failure detection.
    pub fn timeout(mut self, timeout: impl Into<Deadline>) -> Self {
        self.timeout = Some(timeout.into());
        self
    }

    fn take(&mut self) -> Self {
        CommitBuilder {
            client: self.client.clone(),
            transaction: std::mem::take(&mut self.transaction),
            timeout: self.timeout,
            running: None,
        }
    }

    async fn run(self) -> Result<Vec<OpResult>> {
        let (client, transaction) = (&self.client, self.transaction);
        let prepared = transaction.prepare(client)?;
        let path = transaction.first_path();
        let deadline = deadline_of(self.timeout);
        if client.is_closed() {
            return Err(Error::Closed { path });
        }
        // Nothing is sent yet: waiting for a connection is retried under the policy (the commit
        // itself is sent once, or again each time it found the namespace node missing).
        let mut retrying = client.retrying(&path, deadline);
        let mut namespace_rounds = 0;
        loop {
            let (zk, _) = client.connected_retrying(&mut retrying).await?;
            // Sent after its deadline, a commit would report an error and could still be applied.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(client.retrying(&path, deadline).deadline_exceeded("committing a transaction at"));
            }
            let mut writer = zk.new_multi_writer();
            prepared.add_to(&mut writer).map_err(|e| Error::zk(&path, e))?;
            let committed = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), writer.commit()).await {
                    Ok(committed) => committed,
                    Err(_) => {
                        return Err(client.retrying(&path, deadline).deadline_exceeded("committing a transaction at"))
                    }
                },
                None => writer.commit().await,
            };
            match committed {
                Ok(results) => return Ok(results.into_iter().map(|r| OpResult::of(client, r)).collect()),
                // The namespace node is made lazily, as for a create: a failed transaction
                // applied nothing, so it is sent once more after making it.
                Err(zk::MultiWriteError::OperationFailed { source: zk::Error::NoNode, .. })
                    if namespace_rounds < NAMESPACE_ROUNDS && client.ensure_namespace(deadline).await? =>
                {
                    namespace_rounds += 1;
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    return Err(transaction.failed_at(index, &source))
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => return Err(Error::zk(&path, source)),
            }
        }
    }
}

/// How many times a create or a transaction makes the namespace node again and is sent once more.
/// More than once: the server's container reaper deletes by path, so a namespace node made again
/// just after it emptied can be deleted by a reap decided before (seen with a short
/// `znode.container.checkIntervalMs`).
const NAMESPACE_ROUNDS: usize = 5;

request_future!(CommitBuilder, Vec<OpResult>, timeout: timeout);

/// What all single-node builders share: the client, the path and the timeout.
struct Op {
    client: CuratorClient,
    path: String,
    timeout: Option<Deadline>,
    /// `compressed()` / `uncompressed()` (or the read forms); `None`: the client's default.
    compression: Option<bool>,
}

impl Op {
    fn new(client: &CuratorClient, path: &str) -> Self {
        Op { client: client.clone(), path: path.to_string(), timeout: None, compression: None }
    }

    /// This op's arguments, moved out for the running request.
    fn take(&mut self) -> Self {
        Op {
            client: self.client.clone(),
            path: std::mem::take(&mut self.path),
            timeout: self.timeout,
            compression: self.compression,
        }
    }

    /// Whether this call compresses (or decompresses) its data.
    fn compresses(&self) -> bool {
        self.compression.unwrap_or_else(|| self.client.compression_enabled())
    }

    /// Validates the path and returns it namespace-fixed, with the call's deadline.
    fn start(&self) -> Result<(String, Option<Instant>)> {
        paths::validate_path(&self.path)?;
        if self.client.is_closed() {
            return Err(Error::Closed { path: self.path.clone() });
        }
        let fixed = self.client.fix_path(&self.path);
        self.client.check_path_size(&self.path, &fixed)?;
        Ok((fixed, deadline_of(self.timeout)))
    }
}

macro_rules! timeout_method {
    () => {
        /// Bounds the whole call, retries included: past `timeout` (a `Duration` from the first
        /// poll, or an `Instant`) it fails with
        /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded). Default: the retry
        /// policy alone bounds it.
        pub fn timeout(mut self, timeout: impl Into<crate::Deadline>) -> Self {
            self.op.timeout = Some(timeout.into());
            self
        }
    };
}

/// Where missing parents of a create come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parents {
    None,
    Persistent,
    Containers,
}

/// A create of one node: [`CuratorClient::create`]. Await it for the created path.
///
/// # Errors
/// * [`Error::InvalidPath`] naming the path; [`Error::InvalidArgument`] for a bad TTL, an
///   empty ACL, or data over the client's
///   [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (naming its size and the
///   path; nothing sent);
/// * [`Error::ZooKeeper`] with [`ErrorCode::NodeExists`], [`ErrorCode::NoNode`] (a parent is
///   missing and parents were not asked for), [`ErrorCode::NoAuth`],
///   [`ErrorCode::NoChildrenForEphemerals`], …;
/// * for an unprotected sequential create, a retryable error when the outcome is unknown (it
///   is sent once per connection: a retry could make a second node);
/// * [`Error::DeadlineExceeded`], [`Error::Closed`].
///
/// # Cancel safety
/// A protected create is cancel safe (a node it may have made is deleted in the background);
/// any other create is not: a dropped call, or one that failed with
/// [`Error::DeadlineExceeded`] after its request was sent (e.g. while the server was slow), may
/// still create the node. Use [`with_protection`](Self::with_protection) when that matters.
#[must_use = "a builder does nothing until awaited"]
pub struct CreateBuilder {
    client: CuratorClient,
    path: String,
    data: Vec<u8>,
    mode: CreateMode,
    parents: Parents,
    protected: bool,
    acls: Option<Vec<Acl>>,
    timeout: Option<Deadline>,
    compression: Option<bool>,
    running: Running<String>,
}

impl CreateBuilder {
    /// The node's data. Default: empty (Curator's `forPath(path)` writes the client's default
    /// data; pass [`CuratorClient::default_data`] for that).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The kind of node. Default: [`CreateMode::Persistent`].
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// Creates missing parents as PERSISTENT nodes (Curator's `creatingParentsIfNeeded`).
    pub fn creating_parents_if_needed(mut self) -> Self {
        self.parents = Parents::Persistent;
        self
    }

    /// Creates missing parents as CONTAINER nodes, which the server deletes once empty
    /// (Curator's `creatingParentContainersIfNeeded`); PERSISTENT if the client was built with
    /// [`dont_use_container_parents`](crate::CuratorClientBuilder::dont_use_container_parents).
    pub fn creating_parent_containers_if_needed(mut self) -> Self {
        self.parents = Parents::Containers;
        self
    }

    /// Curator's `withProtection`: the node is named `_c_<uuid>-<name>` so that, when the
    /// connection fails mid-create, the client finds the node it made instead of making another;
    /// a protected create (sequential ones included) is therefore retried under the policy.
    /// Protected creates make missing parents as containers.
    pub fn with_protection(mut self) -> Self {
        self.protected = true;
        self
    }

    /// The node's ACL instead of the client's [`AclProvider`](crate::framework::AclProvider)'s.
    pub fn with_acl(mut self, acls: Vec<Acl>) -> Self {
        self.acls = Some(acls);
        self
    }

    /// Bounds the whole call, retries included: past `timeout` (a `Duration` from the first
    /// poll, or an `Instant`) it fails with [`Error::DeadlineExceeded`]. Default: the retry policy alone bounds it.
    pub fn timeout(mut self, timeout: impl Into<Deadline>) -> Self {
        self.timeout = Some(timeout.into());
        self
    }

    /// Stores the data GZIP-compressed, as Curator's `compressed()` with its default
    /// `GzipCompressionProvider` does: Curator's `getData().decompressed()` and our
    /// [`decompressed`](GetDataBuilder::decompressed) read it. The client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) applies to the compressed
    /// size, what the server stores. Default: the client's
    /// [`enable_compression`](crate::CuratorClientBuilder::enable_compression) (off).
    ///
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let report = vec![b'x'; 4 << 20]; // 4 MiB, over the limit uncompressed
    /// client.create("/reports/today").data(report).compressed().await?;
    /// let (read, _) = client.get_data("/reports/today").decompressed().await?;
    /// # Ok(()) }
    /// ```
    pub fn compressed(mut self) -> Self {
        self.compression = Some(true);
        self
    }

    /// Stores the data as given, also when the client compresses by default (Curator's
    /// `uncompressed()`).
    pub fn uncompressed(mut self) -> Self {
        self.compression = Some(false);
        self
    }

    fn take(&mut self) -> Self {
        CreateBuilder {
            client: self.client.clone(),
            path: std::mem::take(&mut self.path),
            data: std::mem::take(&mut self.data),
            mode: self.mode,
            parents: self.parents,
            protected: self.protected,
            acls: self.acls.take(),
            timeout: self.timeout,
            compression: self.compression,
            running: None,
        }
    }

    async fn run(self) -> Result<String> {
        let client = &self.client;
        paths::validate_path(&self.path)?;
        self.mode.validate()?;
        if self.path == "/" {
            return Err(Error::InvalidPath { path: self.path, reason: "the root node always exists" });
        }
        let data = if self.compression.unwrap_or_else(|| client.compression_enabled()) {
            super::compression::compress(&self.data)
        } else {
            self.data
        };
        client.check_data_size("data", &self.path, data.len())?;
        if client.is_closed() {
            return Err(Error::Closed { path: self.path });
        }
        let deadline = deadline_of(self.timeout);
        if self.protected {
            let parent = paths::parent(&self.path).to_string();
            let name = paths::node_name(&self.path).to_string();
            let (created, _) =
                client.create_protected(&parent, &name, &data, self.mode, deadline, false, self.acls).await?;
            return Ok(created.path);
        }
        let fixed = client.fix_path(&self.path);
        let acls = match self.acls {
            Some(acls) => {
                validate_acl(&acls)?;
                acl::to_raw(&acls)
            }
            None => client.raw_acls_for(&fixed),
        };
        let options = &self.mode.options(&acls);
        let fixed = fixed.as_str();
        let data = data.as_slice();
        let path = self.path.as_str();
        let mut parent_rounds = 0;
        let mut namespace_rounds = 0;
        // A sequential create is sent once per connection; waiting for one is retried under the
        // policy.
        let mut waiting = client.retrying(path, deadline);
        loop {
            let result = if self.mode.is_sequential() {
                match client.connected_retrying(&mut waiting).await {
                    Ok(_) if deadline.is_some_and(|d| Instant::now() >= d) => {
                        // Sent now, the create would report a deadline error and could still be applied.
                        Err(client.retrying(path, deadline).deadline_exceeded("creating"))
                    }
                    Ok((zk, _)) => {
                        let create = zk.create(fixed, data, options);
                        match deadline {
                            Some(d) => match tokio::time::timeout_at(d.into(), create).await {
                                Ok(created) => created.map_err(|e| Error::zk(path, e)),
                                Err(_) => Err(client.retrying(path, deadline).deadline_exceeded("creating")),
                            },
                            None => create.await.map_err(|e| Error::zk(path, e)),
                        }
                    }
                    Err(e) => Err(e),
                }
            } else {
                client.with_retry(path, deadline, |zk| async move { zk.create(fixed, data, options).await }).await
            };
            match result {
                // The namespace node is made lazily, by the first create that misses it.
                Err(e)
                    if e.is(ErrorCode::NoNode)
                        && self.parents == Parents::None
                        && namespace_rounds < NAMESPACE_ROUNDS =>
                {
                    namespace_rounds += 1;
                    if !client.ensure_namespace(deadline).await? {
                        return Err(e);
                    }
                }
                Err(e) if e.is(ErrorCode::NoNode) && self.parents != Parents::None && parent_rounds < 5 => {
                    parent_rounds += 1;
                    let containers = self.parents == Parents::Containers;
                    match client.create_parents_as(paths::parent(fixed), deadline, containers).await {
                        Ok(()) => {}
                        Err(e) if e.is(ErrorCode::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
                Ok((_, seq)) => {
                    let sequence = seq.into_i64();
                    return Ok(if sequence >= 0 { format!("{path}{seq}") } else { path.to_string() });
                }
            }
        }
    }
}

request_future!(CreateBuilder, String, timeout: timeout);

/// A one-time watch (ZooKeeper's watcher): a future that resolves with the first event on the
/// watched node — or [`EventType::SessionEnded`](crate::EventType::SessionEnded) when the
/// session it was set on ends first.
///
/// Dropping it removes the watch: when no other watch of this client of the same kind (data or
/// children) on the path is left, the server is asked to remove its watch (ZooKeeper's
/// `removeWatches`), so a dropped watch does not stay on the server until the node changes.
/// [`remove`](Self::remove) does the same and waits for the server's answer.
///
/// # Cancel safety
/// Cancel safe (it is a plain future; awaiting a `&mut` of it again resumes the wait).
#[must_use = "a watch does nothing unless awaited"]
pub struct Watch {
    client: CuratorClient,
    /// The watched path as the caller gave it, for errors.
    path: String,
    /// Until the first poll: then it moves into `fired`.
    watcher: Option<zk::OneshotWatcher>,
    fired: Option<BoxFuture<'static, WatchedEvent>>,
}

impl Watch {
    fn new(client: &CuratorClient, path: &str, watcher: zk::OneshotWatcher) -> Watch {
        Watch { client: client.clone(), path: path.to_string(), watcher: Some(watcher), fired: None }
    }

    /// Removes the watch (Curator's `removeWatches()` of this one watcher): its event never
    /// comes, and when no other watch of this client of the same kind on the path is left, the
    /// server removes its watch too; returns once the server answered (at once when nothing
    /// had to be sent). A watch already polled is removed as by dropping it: the request is
    /// sent, its answer not waited for.
    ///
    /// zookeeper-client 0.11.2 offers no removal of a path's watches by kind alone (Curator's
    /// `removeWatches().ofType(..).forPath(..)`, which also removes other code's watchers of the
    /// path): this client's watches go with their handles, `Watch` and [`WatchStream`].
    ///
    /// # Errors
    /// [`Error::Closed`] when the client's session handle is gone; [`Error::ZooKeeper`] with
    /// the server's code ([`ErrorCode::NoWatcher`] when the server holds no such watch), or a
    /// connection error: then the server drops the watch with the session, or fires it once. A
    /// watch that already fired is no error (nothing is left to remove).
    ///
    /// # Cancel safety
    /// Cancel safe: the removal is sent at the first poll and goes on without the caller.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let (_, _, changed) = client.get_data("/config").watch().await?;
    /// // Not interested any more: remove it on the server now.
    /// changed.remove().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(mut self) -> Result<()> {
        let Some(watcher) = self.watcher.take() else {
            return Ok(());
        };
        // The deprecation says to drop instead; dropping does not tell when the server removed it.
        #[allow(deprecated)]
        watcher.remove().await.map_err(|e| Error::zk(&self.path, e))
    }
}

fn session_ended() -> WatchedEvent {
    WatchedEvent { event_type: crate::EventType::SessionEnded, path: String::new() }
}

/// Polls a zookeeper-client watcher future, turning a panic in it into `None`: its receivers
/// unwrap their channel, which panics when the session task is gone without having sent a
/// terminal event (its runtime shut down). For our caller that is the session ending.
struct NoPanic<F>(Pin<Box<F>>);

impl<F: Future> Future for NoPanic<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Some(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Future for Watch {
    type Output = WatchedEvent;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WatchedEvent> {
        let this = &mut *self;
        let fired = match this.fired.take() {
            Some(fired) => fired,
            None => {
                let Some(watcher) = this.watcher.take() else {
                    return Poll::Ready(session_ended());
                };
                let client = this.client.clone();
                Box::pin(async move {
                    match NoPanic(Box::pin(watcher.changed())).await {
                        Some(event) => WatchedEvent::of(&event, client.unfix_path(&event.path).to_string()),
                        None => session_ended(),
                    }
                })
            }
        };
        this.fired.insert(fired).as_mut().poll(cx)
    }
}

macro_rules! read_builder {
    ($builder:ident, $watched:ident, $output:ty, $watched_output:ty, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Errors
        /// [`Error::InvalidPath`] naming the path; [`Error::ZooKeeper`] (e.g. [`ErrorCode::NoNode`],
        /// [`ErrorCode::NoAuth`]) when the server refuses; retryable errors once the policy gives
        /// up; [`Error::DeadlineExceeded`]; [`Error::Closed`].
        ///
        /// # Cancel safety
        /// Cancel safe (a read).
        #[must_use = "a builder does nothing until awaited"]
        pub struct $builder {
            op: Op,
            running: Running<$output>,
        }

        impl $builder {
            timeout_method!();

            /// Also sets a one-time watch, returned as a [`Watch`] future.
            pub fn watch(self) -> $watched {
                $watched { op: self.op, running: None }
            }

            fn take(&mut self) -> Self {
                $builder { op: self.op.take(), running: None }
            }
        }

        #[doc = concat!("[`", stringify!($builder), "`] with a watch.")]
        ///
        /// # Errors
        /// As the unwatched read.
        ///
        /// # Cancel safety
        /// Cancel safe (a read; a dropped call may leave a server-side watch that fires
        /// unobserved).
        #[must_use = "a builder does nothing until awaited"]
        pub struct $watched {
            op: Op,
            running: Running<$watched_output>,
        }

        impl $watched {
            timeout_method!();

            fn take(&mut self) -> Self {
                $watched { op: self.op.take(), running: None }
            }
        }

        request_future!($builder, $output, timeout: op.timeout);
        request_future!($watched, $watched_output, timeout: op.timeout);
    };
}

read_builder!(
    GetDataBuilder,
    GetDataWatchBuilder,
    (Vec<u8>, Stat),
    (Vec<u8>, Stat, Watch),
    "A read of a node's data and stat: [`CuratorClient::get_data`]."
);
read_builder!(
    ExistsBuilder,
    ExistsWatchBuilder,
    Option<Stat>,
    (Option<Stat>, Watch),
    "An existence check: [`CuratorClient::exists`]."
);
read_builder!(
    GetChildrenBuilder,
    GetChildrenWatchBuilder,
    Vec<String>,
    (Vec<String>, Watch),
    "A listing of a node's children: [`CuratorClient::get_children`]."
);

macro_rules! decompression_methods {
    () => {
        /// Reads data stored GZIP-compressed (Curator's `decompressed()` with its default
        /// `GzipCompressionProvider`): what Curator's `compressed()` and ours
        /// ([`CreateBuilder::compressed`], [`SetDataBuilder::compressed`]) wrote. Default: the
        /// client's [`enable_compression`](crate::CuratorClientBuilder::enable_compression) (off).
        ///
        /// Data that is not one GZIP member fails with
        /// [`Error::MalformedData`](crate::Error::MalformedData) naming the path (data that
        /// would expand past 1 GiB with [`Error::LimitExceeded`](crate::Error::LimitExceeded)).
        ///
        /// ```no_run
        /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
        /// // Written by a Curator process with `setData().compressed()`.
        /// let (config, stat) = client.get_data("/config/app").decompressed().await?;
        /// # Ok(()) }
        /// ```
        pub fn decompressed(mut self) -> Self {
            self.op.compression = Some(true);
            self
        }

        /// Reads the data as stored, also when the client decompresses by default (Curator's
        /// `undecompressed()`).
        pub fn undecompressed(mut self) -> Self {
            self.op.compression = Some(false);
            self
        }
    };
}

impl GetDataBuilder {
    decompression_methods!();

    async fn run(self) -> Result<(Vec<u8>, Stat)> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let (data, stat) =
            self.op.client.with_retry(&self.op.path, deadline, |zk| async move { zk.get_data(f).await }).await?;
        Ok((self.op.stored_data(data)?, stat.into()))
    }
}

impl GetDataWatchBuilder {
    decompression_methods!();

    async fn run(self) -> Result<(Vec<u8>, Stat, Watch)> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let (data, stat, watcher) = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move { zk.get_and_watch_data(f).await })
            .await?;
        let watch = Watch::new(&self.op.client, &self.op.path, watcher);
        Ok((self.op.stored_data(data)?, stat.into(), watch))
    }
}

impl Op {
    /// The data a read returns for `data` as the server holds it: decompressed when asked.
    fn stored_data(&self, data: Vec<u8>) -> Result<Vec<u8>> {
        if self.compresses() {
            super::compression::decompress(&self.path, &data)
        } else {
            Ok(data)
        }
    }

    /// The data a write sends for `data`: compressed when asked.
    fn data_to_store(&self, data: Vec<u8>) -> Vec<u8> {
        if self.compresses() {
            super::compression::compress(&data)
        } else {
            data
        }
    }
}

impl ExistsBuilder {
    async fn run(self) -> Result<Option<Stat>> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let stat =
            self.op.client.with_retry(&self.op.path, deadline, |zk| async move { zk.check_stat(f).await }).await?;
        Ok(stat.map(Stat::from))
    }
}

impl ExistsWatchBuilder {
    async fn run(self) -> Result<(Option<Stat>, Watch)> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let (stat, watcher) = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move { zk.check_and_watch_stat(f).await })
            .await?;
        Ok((stat.map(Stat::from), Watch::new(&self.op.client, &self.op.path, watcher)))
    }
}

impl GetChildrenBuilder {
    async fn run(self) -> Result<Vec<String>> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        self.op.client.with_retry(&self.op.path, deadline, |zk| async move { zk.list_children(f).await }).await
    }
}

impl GetChildrenWatchBuilder {
    async fn run(self) -> Result<(Vec<String>, Watch)> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let (children, watcher) = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move { zk.list_and_watch_children(f).await })
            .await?;
        Ok((children, Watch::new(&self.op.client, &self.op.path, watcher)))
    }
}

/// A read of a node's ACL: [`CuratorClient::get_acl`]. Await it for the ACL and the [`Stat`].
///
/// # Errors
/// [`Error::InvalidPath`] naming the path; [`Error::ZooKeeper`] with [`ErrorCode::NoNode`] (and,
/// on servers that check it, [`ErrorCode::NoAuth`]); retryable errors once the policy gives up;
/// [`Error::DeadlineExceeded`]; [`Error::Closed`].
///
/// # Cancel safety
/// Cancel safe (a read).
#[must_use = "a builder does nothing until awaited"]
pub struct GetAclBuilder {
    op: Op,
    running: Running<(Vec<Acl>, Stat)>,
}

impl GetAclBuilder {
    timeout_method!();

    fn take(&mut self) -> Self {
        GetAclBuilder { op: self.op.take(), running: None }
    }

    async fn run(self) -> Result<(Vec<Acl>, Stat)> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        let (acl, stat) =
            self.op.client.with_retry(&self.op.path, deadline, |zk| async move { zk.get_acl(f).await }).await?;
        Ok((acl.iter().map(Acl::of_raw).collect(), stat.into()))
    }
}

request_future!(GetAclBuilder, (Vec<Acl>, Stat), timeout: op.timeout);

/// A write of a node's ACL: [`CuratorClient::set_acl`]. Await it for the new [`Stat`].
///
/// Retried under the policy. A retried versioned write whose first attempt did apply fails with
/// [`ErrorCode::BadVersion`] (as in Curator): read the ACL again to tell.
///
/// # Errors
/// * [`Error::InvalidPath`] naming the path; [`Error::InvalidArgument`] for an empty ACL or an
///   entry with an empty scheme (naming it; nothing sent);
/// * [`Error::ZooKeeper`] with [`ErrorCode::InvalidAcl`] (an ACL the server refuses: an
///   unknown scheme, a malformed `ip` or `digest` id, `auth` without credentials),
///   [`ErrorCode::NoNode`], [`ErrorCode::BadVersion`], [`ErrorCode::NoAuth`] (no ADMIN
///   permission);
/// * [`Error::DeadlineExceeded`]; [`Error::Closed`].
///
/// # Cancel safety
/// Not cancel safe: a dropped call may still change the ACL.
#[must_use = "a builder does nothing until awaited"]
pub struct SetAclBuilder {
    op: Op,
    acl: Vec<Acl>,
    version: Option<i32>,
    running: Running<Stat>,
}

impl SetAclBuilder {
    /// Writes only if the node's ACL version ([`Stat::aversion`]) is `version` (Curator's
    /// `withVersion`).
    pub fn version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    timeout_method!();

    fn take(&mut self) -> Self {
        SetAclBuilder { op: self.op.take(), acl: std::mem::take(&mut self.acl), version: self.version, running: None }
    }

    async fn run(self) -> Result<Stat> {
        let (fixed, deadline) = self.op.start()?;
        validate_acl(&self.acl)?;
        let raw = acl::to_raw(&self.acl);
        let (f, raw, version) = (fixed.as_str(), raw.as_slice(), self.version);
        let stat = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move { zk.set_acl(f, raw, version).await })
            .await?;
        Ok(stat.into())
    }
}

request_future!(SetAclBuilder, Stat, timeout: op.timeout);

/// Refuses an ACL no server takes, before sending it: an empty list, an entry without a scheme.
pub(crate) fn validate_acl(acl: &[Acl]) -> Result<()> {
    if acl.is_empty() {
        return Err(Error::invalid_argument("acl", "[]", "a node needs at least one ACL entry"));
    }
    if let Some(entry) = acl.iter().find(|entry| entry.id().scheme().is_empty()) {
        return Err(Error::invalid_argument("acl", entry.id(), "an ACL entry needs a scheme"));
    }
    Ok(())
}

/// A sync: [`CuratorClient::sync`]. Await it for `()`.
///
/// # Errors
/// [`Error::InvalidPath`] naming the path; retryable errors once the policy gives up;
/// [`Error::DeadlineExceeded`]; [`Error::Closed`]. The path need not exist (the server syncs
/// the whole tree).
///
/// # Cancel safety
/// Cancel safe (it changes nothing).
#[must_use = "a builder does nothing until awaited"]
pub struct SyncBuilder {
    op: Op,
    running: Running<()>,
}

impl SyncBuilder {
    timeout_method!();

    fn take(&mut self) -> Self {
        SyncBuilder { op: self.op.take(), running: None }
    }

    async fn run(self) -> Result<()> {
        let (fixed, deadline) = self.op.start()?;
        let f = fixed.as_str();
        self.op.client.with_retry(&self.op.path, deadline, |zk| async move { zk.sync(f).await }).await
    }
}

request_future!(SyncBuilder, (), timeout: op.timeout);

/// A write of a node's data: [`CuratorClient::set_data`]. Await it for the new [`Stat`].
///
/// Retried under the policy. A retried versioned write whose first attempt did apply fails with
/// [`ErrorCode::BadVersion`] (as in Curator): read again to tell.
///
/// # Errors
/// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for data over the client's
/// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (naming its size and the path;
/// nothing sent); [`Error::ZooKeeper`] with [`ErrorCode::NoNode`], [`ErrorCode::BadVersion`],
/// [`ErrorCode::NoAuth`], …; [`Error::DeadlineExceeded`]; [`Error::Closed`].
///
/// # Cancel safety
/// Not cancel safe: a dropped call may still write.
#[must_use = "a builder does nothing until awaited"]
pub struct SetDataBuilder {
    op: Op,
    data: Vec<u8>,
    version: Option<i32>,
    running: Running<Stat>,
}

impl SetDataBuilder {
    /// Writes only if the node's data version is `version` (Curator's `withVersion`).
    pub fn version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Stores the data GZIP-compressed, as Curator's `setData().compressed()` with its default
    /// `GzipCompressionProvider` does (see [`CreateBuilder::compressed`]); the size limit
    /// applies to the compressed size.
    ///
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// client.set_data("/config/app", br#"{"workers": 8}"#.to_vec()).compressed().await?;
    /// # Ok(()) }
    /// ```
    pub fn compressed(mut self) -> Self {
        self.op.compression = Some(true);
        self
    }

    /// Stores the data as given, also when the client compresses by default (Curator's
    /// `uncompressed()`).
    pub fn uncompressed(mut self) -> Self {
        self.op.compression = Some(false);
        self
    }

    timeout_method!();

    fn take(&mut self) -> Self {
        SetDataBuilder {
            op: self.op.take(),
            data: std::mem::take(&mut self.data),
            version: self.version,
            running: None,
        }
    }

    async fn run(self) -> Result<Stat> {
        let (fixed, deadline) = self.op.start()?;
        let data = self.op.data_to_store(self.data);
        self.op.client.check_data_size("data", &self.op.path, data.len())?;
        let (f, data, version) = (fixed.as_str(), data.as_slice(), self.version);
        let stat = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move { zk.set_data(f, data, version).await })
            .await?;
        Ok(stat.into())
    }
}

request_future!(SetDataBuilder, Stat, timeout: op.timeout);

/// A delete: [`CuratorClient::delete`].
///
/// # Errors
/// * [`Error::InvalidPath`] (the root cannot be deleted); [`Error::InvalidArgument`] for
///   `guaranteed()` with `version()` (the background retry could not honour the version);
/// * [`Error::ZooKeeper`] with [`ErrorCode::NoNode`] (unless `quietly()`, or a container
///   reaped by the server once `deleting_children_if_needed()` emptied it),
///   [`ErrorCode::BadVersion`], [`ErrorCode::NotEmpty`] (without
///   `deleting_children_if_needed()`), [`ErrorCode::NoAuth`];
/// * [`Error::DeadlineExceeded`]; [`Error::Closed`].
///
/// With `guaranteed()`, a delete whose foreground attempt fails with a retryable or session
/// error (or its deadline) is handed to the client's background queue (which keeps trying until
/// the node is gone) and the foreground error is still returned. With
/// `deleting_children_if_needed()` too, that holds from the first child on: a call that fails
/// (or is dropped) while emptying the node hands the whole subtree over, and the queue deletes
/// what is left of it, children first, once the connection is back — of the node the call found
/// at the path (by its creation zxid; of the one the queue first finds there if the call never
/// reached the server): a node re-created at the path meanwhile, by anyone, is left alone.
///
/// # Cancel safety
/// With `guaranteed()`, cancel safe (a dropped call is queued in the background); otherwise a
/// dropped call may or may not have deleted.
#[must_use = "a builder does nothing until awaited"]
pub struct DeleteBuilder {
    op: Op,
    version: Option<i32>,
    children: bool,
    guaranteed: bool,
    quietly: bool,
    running: Running<()>,
}

impl DeleteBuilder {
    /// Deletes only if the node's data version is `version`.
    pub fn version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Deletes the node's descendants first (Curator's `deletingChildrenIfNeeded`).
    pub fn deleting_children_if_needed(mut self) -> Self {
        self.children = true;
        self
    }

    /// Keeps trying in the background when the connection fails (Curator's `guaranteed()`); with
    /// [`deleting_children_if_needed`](Self::deleting_children_if_needed), the background delete
    /// finishes the whole subtree, children first.
    pub fn guaranteed(mut self) -> Self {
        self.guaranteed = true;
        self
    }

    /// A missing node is success (Curator's `quietly()`).
    pub fn quietly(mut self) -> Self {
        self.quietly = true;
        self
    }

    timeout_method!();

    fn take(&mut self) -> Self {
        DeleteBuilder {
            op: self.op.take(),
            version: self.version,
            children: self.children,
            guaranteed: self.guaranteed,
            quietly: self.quietly,
            running: None,
        }
    }

    async fn run(self) -> Result<()> {
        let (fixed, deadline) = self.op.start()?;
        let client = &self.op.client;
        let path = self.op.path.as_str();
        if path == "/" {
            return Err(Error::InvalidPath { path: path.to_string(), reason: "the root node cannot be deleted" });
        }
        if self.guaranteed && self.version.is_some() {
            return Err(Error::invalid_argument(
                "version",
                self.version.unwrap_or_default(),
                "a guaranteed delete cannot take a version: its background retries could delete a newer node",
            ));
        }
        if self.children && self.guaranteed {
            return delete_tree_guaranteed(client, path, fixed, deadline, self.quietly).await;
        }
        // A CONTAINER node is reaped by the server once its last child is gone: after emptying
        // it, its absence is the delete's success, not NoNode.
        let emptied = self.children && client.delete_children(path, &fixed, deadline, false).await?;
        let result = if self.guaranteed {
            // The delete is guaranteed from here on: when the existence check below fails for
            // lack of a connection (or this future is dropped during it), the background queue
            // takes the delete over, as `delete_fixed_guaranteed` does for the delete itself.
            let mut fallback = client.delete_on_drop(DeleteTarget::Node(fixed.clone()));
            // NoNode counts as success in `delete_fixed_guaranteed`: check first unless quietly.
            let exists = if self.quietly {
                true
            } else {
                let f = fixed.as_str();
                match client.with_retry(path, deadline, |zk| async move { zk.check_stat(f).await }).await {
                    Ok(stat) => stat.is_some(),
                    // `fallback` queues the delete as it drops.
                    Err(e) if hands_over(&e) => return Err(e),
                    Err(e) => {
                        fallback.disarm();
                        return Err(e);
                    }
                }
            };
            // `delete_fixed_guaranteed` arms its own fallback (no await point in between).
            fallback.disarm();
            if !exists {
                return if emptied { Ok(()) } else { Err(Error::code_on(path, ErrorCode::NoNode)) };
            }
            client.delete_fixed_guaranteed(&fixed, deadline).await
        } else {
            let (f, version) = (fixed.as_str(), self.version);
            client.with_retry(path, deadline, |zk| async move { zk.delete(f, version).await }).await
        };
        match result {
            Err(e) if (self.quietly || emptied) && e.is(ErrorCode::NoNode) => Ok(()),
            other => other,
        }
    }
}

/// A guaranteed recursive delete: guaranteed from the first request on. When it fails for lack
/// of a connection (or its deadline), or is dropped, the background queue takes the subtree over,
/// children first — the subtree of the node the call found at `path` (by its creation zxid), never
/// one re-created there since.
async fn delete_tree_guaranteed(
    client: &CuratorClient,
    path: &str,
    fixed: String,
    deadline: Option<Instant>,
    quietly: bool,
) -> Result<()> {
    // Until the call has seen the node, the queue deletes the one it first finds at the path.
    let mut fallback = client.delete_on_drop(DeleteTarget::tree(fixed.clone(), None));
    let f = fixed.as_str();
    let stat = match client.with_retry(path, deadline, |zk| async move { zk.check_stat(f).await }).await {
        Ok(stat) => stat,
        // `fallback` queues the subtree as it drops.
        Err(e) if hands_over(&e) => return Err(e),
        Err(e) => {
            fallback.disarm();
            return Err(e);
        }
    };
    let Some(stat) = stat else {
        fallback.disarm();
        return if quietly { Ok(()) } else { Err(Error::code_on(path, ErrorCode::NoNode)) };
    };
    fallback.retarget(DeleteTarget::tree(fixed.clone(), Some(stat.czxid)));
    let result = match client.delete_children(path, f, deadline, false).await {
        Ok(_) => client.with_retry(path, deadline, |zk| async move { zk.delete(f, None).await }).await,
        Err(e) => Err(e),
    };
    match result {
        // Gone: deleted by us, reaped by the server (an emptied CONTAINER), or by someone else.
        Ok(()) => {
            fallback.disarm();
            Ok(())
        }
        Err(e) if e.is(ErrorCode::NoNode) => {
            fallback.disarm();
            Ok(())
        }
        Err(e) if hands_over(&e) => Err(e),
        Err(e) => {
            fallback.disarm();
            Err(e)
        }
    }
}

/// Whether a guaranteed delete's foreground failure leaves the node's fate unknown, so that the
/// background queue must take over (as in [`CuratorClient::delete_guaranteed`]).
fn hands_over(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed | ErrorKind::DeadlineExceeded)
}

request_future!(DeleteBuilder, (), timeout: op.timeout);

/// A persistent watch: [`CuratorClient::watch`]. Await it for the [`WatchStream`].
///
/// # Errors
/// [`Error::InvalidPath`]; [`Error::ZooKeeper`] with [`ErrorCode::Unimplemented`] on a server
/// older than 3.6; retryable errors once the policy gives up; [`Error::DeadlineExceeded`];
/// [`Error::Closed`].
///
/// # Cancel safety
/// Cancel safe.
#[must_use = "a builder does nothing until awaited"]
pub struct PersistentWatchBuilder {
    op: Op,
    recursive: bool,
    running: Running<WatchStream>,
}

impl PersistentWatchBuilder {
    /// Watches the whole subtree (`AddWatchMode.PERSISTENT_RECURSIVE`): data changes,
    /// creations and deletions of every descendant; child-list changes are not reported.
    pub fn recursive(mut self) -> Self {
        self.recursive = true;
        self
    }

    timeout_method!();

    fn take(&mut self) -> Self {
        PersistentWatchBuilder { op: self.op.take(), recursive: self.recursive, running: None }
    }

    async fn run(self) -> Result<WatchStream> {
        let (fixed, deadline) = self.op.start()?;
        let mode = if self.recursive { zk::AddWatchMode::PersistentRecursive } else { zk::AddWatchMode::Persistent };
        let f = fixed.as_str();
        let (watcher, session) = self
            .op
            .client
            .with_retry(&self.op.path, deadline, |zk| async move {
                let watcher = zk.watch(f, mode).await?;
                Ok((watcher, zk.session_id()))
            })
            .await?;
        Ok(WatchStream::new(self.op.client.clone(), watcher, Rearm { fixed, mode, session }))
    }
}

request_future!(PersistentWatchBuilder, WatchStream, timeout: op.timeout);

type NextEvent = BoxFuture<'static, Option<(zk::PersistentWatcher, zk::WatchedEvent)>>;

/// What a [`WatchStream`] needs to set its watch again on the server after a reconnect.
#[derive(Clone)]
struct Rearm {
    fixed: String,
    mode: zk::AddWatchMode,
    /// The session the watch belongs to: it is set again only on that session.
    session: zk::SessionId,
}

impl Rearm {
    /// Sets the watch again after a reconnect of its session and returns the watcher to follow
    /// from then on. zookeeper-client 0.11.2 re-registers only one-shot watches when it reconnects
    /// (its `SetWatches` leaves the persistent ones out), so the server no longer reports anything
    /// to `watcher`. The new registration shares the client's entry for the path, so dropping the
    /// old watcher afterwards removes nothing on the server; events after the reconnect reach both.
    /// On failure (the connection dropped again) the old watcher stays: its next `Reconnected`
    /// tries again.
    async fn after_reconnect(&self, client: &CuratorClient, watcher: zk::PersistentWatcher) -> zk::PersistentWatcher {
        let Ok(zk) = client.raw_client() else { return watcher };
        if zk.session_id() != self.session {
            return watcher;
        }
        match zk.watch(&self.fixed, self.mode).await {
            Ok(fresh) => {
                drop(watcher);
                fresh
            }
            Err(err) => {
                tracing::debug!(path = self.fixed, %err, "setting a persistent watch again after a reconnect failed");
                watcher
            }
        }
    }
}

/// The events of a persistent watch ([`CuratorClient::watch`]), a
/// [`Stream`](futures_core::Stream) of [`WatchedEvent`]s. It also yields
/// [`Disconnected`](crate::EventType::Disconnected) and
/// [`Reconnected`](crate::EventType::Reconnected) (read the data again after them: events
/// during the gap can be missed; the watch is set again on the server before `Reconnected` is
/// yielded, so every change after it is reported), and ends after
/// [`SessionEnded`](crate::EventType::SessionEnded): the watch belonged to that session. Set a
/// new one on the client's next session.
///
/// Dropping it removes the watch: the server is asked to remove its watch once no other watch of
/// this client is left on the path ([`remove`](Self::remove) waits for its answer).
pub struct WatchStream {
    client: CuratorClient,
    rearm: Rearm,
    watcher: Option<zk::PersistentWatcher>,
    next: Option<NextEvent>,
    ended: bool,
}

impl WatchStream {
    fn new(client: CuratorClient, watcher: zk::PersistentWatcher, rearm: Rearm) -> WatchStream {
        WatchStream { client, rearm, watcher: Some(watcher), next: None, ended: false }
    }

    /// Removes the persistent watch (Curator's `removeWatches()` of this one watcher): no event
    /// comes any more, and when no other watch of this client is left on the path, the server
    /// removes its watch too; returns once the server answered (at once when nothing had to be
    /// sent). Dropping the stream removes it the same way without waiting for the answer.
    ///
    /// # Errors
    /// [`Error::Closed`] when the client's session handle is gone; [`Error::ZooKeeper`] with the
    /// server's code, or a connection error (the server drops the watch with its session).
    ///
    /// # Cancel safety
    /// Cancel safe: the removal is sent at the first poll and goes on without the caller.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mut changes = client.watch("/config").recursive().await?;
    /// let first = changes.next().await;
    /// changes.remove().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(mut self) -> Result<()> {
        // A pending `next` owns the watcher: dropping it drops the watcher, which sends the
        // removal without its answer.
        self.next = None;
        let Some(watcher) = self.watcher.take() else {
            return Ok(());
        };
        // The deprecation says to drop instead; dropping does not tell when the server removed it.
        #[allow(deprecated)]
        let removed = watcher.remove().await;
        removed.map_err(|e| Error::zk(self.client.unfix_path(&self.rearm.fixed), e))
    }

    /// The next event; `None` after [`SessionEnded`](crate::EventType::SessionEnded).
    ///
    /// # Cancel safety
    /// Cancel safe: an event not yet returned is returned by the next call.
    pub async fn next(&mut self) -> Option<WatchedEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<WatchedEvent>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.next.is_none() {
            let Some(mut watcher) = self.watcher.take() else {
                return Poll::Ready(None);
            };
            let (client, rearm) = (self.client.clone(), self.rearm.clone());
            self.next = Some(Box::pin(NoPanic(Box::pin(async move {
                let event = watcher.changed().await;
                // `Reconnected` is yielded once the watch is set again: what the caller reads
                // after it is followed by the events of every later change.
                if event.event_type == zk::EventType::Session && event.session_state == zk::SessionState::SyncConnected
                {
                    watcher = rearm.after_reconnect(&client, watcher).await;
                }
                (watcher, event)
            }))));
        }
        let Some(next) = self.next.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = std::task::ready!(next.as_mut().poll(cx));
        self.next = None;
        let Some((watcher, event)) = polled else {
            self.ended = true;
            return Poll::Ready(Some(session_ended()));
        };
        let event = WatchedEvent::of(&event, self.client.unfix_path(&event.path).to_string());
        // zookeeper-client's watcher panics when polled after a terminal session event.
        if event.event_type == crate::EventType::SessionEnded {
            self.ended = true;
        } else {
            self.watcher = Some(watcher);
        }
        Poll::Ready(Some(event))
    }
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream").field("ended", &self.ended).finish()
    }
}

impl futures_core::Stream for WatchStream {
    type Item = WatchedEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchedEvent>> {
        self.get_mut().poll_event(cx)
    }
}

/// The outcome of one operation of a committed [`Transaction`] (or guarded write), in order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// A create: the created path (with its sequence number), without the namespace.
    Created {
        /// The node's path.
        path: String,
        /// Its stat — `None` from servers without the fix of ZOOKEEPER-4026 (3.8.0 included),
        /// which answer a create inside a transaction without one. Read the node (`exists`) then.
        stat: Option<Stat>,
    },
    /// A set-data: the node's new stat.
    DataSet {
        /// Its stat.
        stat: Stat,
    },
    /// A delete.
    Deleted,
    /// A version check.
    Checked,
}

impl OpResult {
    fn of(client: &CuratorClient, result: zk::MultiWriteResult) -> OpResult {
        match result {
            zk::MultiWriteResult::Create { path, stat } => {
                // Without a stat, zookeeper-client fills every field with -1.
                let stat = (stat.czxid >= 0).then(|| Stat::from(stat));
                OpResult::Created { path: client.unfix_path(&path).to_string(), stat }
            }
            zk::MultiWriteResult::SetData { stat } => OpResult::DataSet { stat: stat.into() },
            zk::MultiWriteResult::Delete => OpResult::Deleted,
            _ => OpResult::Checked,
        }
    }

    pub(crate) fn of_guarded(client: &CuratorClient, result: zk::MultiWriteResult) -> OpResult {
        OpResult::of(client, result)
    }
}

/// Operations applied atomically: all or none (ZooKeeper's `multi`). Build it with the chained
/// methods (nothing is checked until commit), then give it to [`CuratorClient::commit`] or to a
/// lock's `guarded_write` ([`GuardedWrite`](crate::locks::GuardedWrite) is this type). On a
/// client built with [`enable_compression`](crate::CuratorClientBuilder::enable_compression),
/// the data of its creates and set-datas is compressed, as Curator's transactions do then.
///
/// ```
/// use zk_curator::{CreateMode, Transaction};
///
/// let tx = Transaction::new()
///     .create("/app/a", b"1", CreateMode::Persistent)
///     .set_data("/app/b", b"2", None)
///     .delete("/app/c", Some(3))
///     .check("/app/d", 0);
/// assert_eq!(tx.len(), 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Transaction {
    ops: Vec<TxOp>,
}

#[derive(Clone, Debug)]
enum TxOp {
    Create { path: String, data: Vec<u8>, mode: CreateMode },
    SetData { path: String, data: Vec<u8>, version: Option<i32> },
    Delete { path: String, version: Option<i32> },
    Check { path: String, version: i32 },
}

impl TxOp {
    fn path(&self) -> &str {
        match self {
            TxOp::Create { path, .. }
            | TxOp::SetData { path, .. }
            | TxOp::Delete { path, .. }
            | TxOp::Check { path, .. } => path,
        }
    }
}

/// A transaction with every path namespace-fixed and every ACL chosen, ready to send.
pub(crate) struct PreparedTransaction {
    ops: Vec<(TxOp, String, Vec<zk::Acl>)>,
}

/// What a prepared transaction is written into: zookeeper-client's multi writer, or its check
/// writer (a multi behind a check of the lock node, for guarded writes).
pub(crate) trait OpSink {
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        options: &zk::CreateOptions<'_>,
    ) -> std::result::Result<(), zk::Error>;
    fn set_data(&mut self, path: &str, data: &[u8], version: Option<i32>) -> std::result::Result<(), zk::Error>;
    fn delete(&mut self, path: &str, version: Option<i32>) -> std::result::Result<(), zk::Error>;
    fn check(&mut self, path: &str, version: i32) -> std::result::Result<(), zk::Error>;
}

macro_rules! op_sink {
    ($writer:ty) => {
        impl OpSink for $writer {
            fn create(
                &mut self,
                path: &str,
                data: &[u8],
                options: &zk::CreateOptions<'_>,
            ) -> std::result::Result<(), zk::Error> {
                self.add_create(path, data, options)
            }
            fn set_data(
                &mut self,
                path: &str,
                data: &[u8],
                version: Option<i32>,
            ) -> std::result::Result<(), zk::Error> {
                self.add_set_data(path, data, version)
            }
            fn delete(&mut self, path: &str, version: Option<i32>) -> std::result::Result<(), zk::Error> {
                self.add_delete(path, version)
            }
            fn check(&mut self, path: &str, version: i32) -> std::result::Result<(), zk::Error> {
                self.add_check_version(path, version)
            }
        }
    };
}

op_sink!(zk::MultiWriter<'_>);
op_sink!(zk::CheckWriter<'_>);

impl PreparedTransaction {
    /// Adds every operation to `writer`.
    pub(crate) fn add_to(&self, writer: &mut impl OpSink) -> std::result::Result<(), zk::Error> {
        for (op, fixed, acls) in &self.ops {
            match op {
                TxOp::Create { data, mode, .. } => writer.create(fixed, data, &mode.options(acls))?,
                TxOp::SetData { data, version, .. } => writer.set_data(fixed, data, *version)?,
                TxOp::Delete { version, .. } => writer.delete(fixed, *version)?,
                TxOp::Check { version, .. } => writer.check(fixed, *version)?,
            }
        }
        Ok(())
    }
}

impl Transaction {
    /// An empty transaction.
    pub fn new() -> Transaction {
        Transaction::default()
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when it has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Adds a create of `path` with `data` and `mode` (ACL from the client's provider). Parents
    /// must exist (or be created earlier in the same transaction).
    pub fn create(mut self, path: &str, data: impl AsRef<[u8]>, mode: CreateMode) -> Self {
        self.ops.push(TxOp::Create { path: path.to_string(), data: data.as_ref().to_vec(), mode });
        self
    }

    /// Adds a set-data of `path` (`version` `None` = any version).
    pub fn set_data(mut self, path: &str, data: impl AsRef<[u8]>, version: Option<i32>) -> Self {
        self.ops.push(TxOp::SetData { path: path.to_string(), data: data.as_ref().to_vec(), version });
        self
    }

    /// Adds a delete of `path` (`version` `None` = any version).
    pub fn delete(mut self, path: &str, version: Option<i32>) -> Self {
        self.ops.push(TxOp::Delete { path: path.to_string(), version });
        self
    }

    /// Adds a check that `path`'s data version is `version`.
    pub fn check(mut self, path: &str, version: i32) -> Self {
        self.ops.push(TxOp::Check { path: path.to_string(), version });
        self
    }

    /// Validates every operation and fixes its path for `client`. The data of all operations
    /// travels in one request: their sum must be within the client's max data size (the error
    /// names the operation that goes over).
    pub(crate) fn prepare(&self, client: &CuratorClient) -> Result<PreparedTransaction> {
        let mut ops = Vec::with_capacity(self.ops.len());
        let (mut data_size, mut rest_size) = (0usize, 0usize);
        for op in &self.ops {
            paths::validate_path(op.path())?;
            let fixed = client.fix_path(op.path());
            let mut op = op.clone();
            if let TxOp::Create { data, .. } | TxOp::SetData { data, .. } = &mut op {
                if client.compression_enabled() {
                    *data = super::compression::compress(data);
                }
                data_size = data_size.saturating_add(data.len());
            }
            rest_size = rest_size.saturating_add(fixed.len()).saturating_add(super::limits::OPERATION_OVERHEAD);
            let what = format!("{} (the transaction up to this operation)", op.path());
            super::limits::check_request_size(client.max_data_size(), "data", &what, data_size, rest_size)?;
            let acls = match &op {
                TxOp::Create { mode, path, .. } => {
                    mode.validate()?;
                    if path == "/" {
                        return Err(Error::InvalidPath { path: path.clone(), reason: "the root node always exists" });
                    }
                    client.raw_acls_for(&fixed)
                }
                _ => Vec::new(),
            };
            ops.push((op, fixed, acls));
        }
        Ok(PreparedTransaction { ops })
    }

    fn first_path(&self) -> String {
        self.ops.first().map_or_else(|| "/".to_string(), |op| op.path().to_string())
    }

    /// The error of operation `index` failing with `source`.
    pub(crate) fn failed_at(&self, index: usize, source: &zk::Error) -> Error {
        match (source, self.ops.get(index)) {
            (zk::Error::ClientClosed, op) => {
                Error::Closed { path: op.map_or_else(String::new, |op| op.path().to_string()) }
            }
            (source, Some(op)) => {
                Error::TransactionFailed { index, path: op.path().to_string(), code: ErrorCode::of(source) }
            }
            (source, None) => Error::zk(&self.first_path(), source.clone()),
        }
    }

    /// The path of operation `index`.
    pub(crate) fn path_at(&self, index: usize) -> Option<&str> {
        self.ops.get(index).map(TxOp::path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_watcher_is_an_ended_session_not_a_panic() {
        let (sender, receiver) = tokio::sync::oneshot::channel::<u8>();
        drop(sender);
        // As zookeeper-client does: unwrap a channel whose sender is gone.
        let panicking = NoPanic(Box::pin(async move { receiver.await.expect("a dropped channel") }));
        assert_eq!(panicking.await, None);
        assert_eq!(NoPanic(Box::pin(async { 7 })).await, Some(7));
    }
}
