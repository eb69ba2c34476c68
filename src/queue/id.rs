//! [`DistributedIdQueue`] (Curator's `DistributedIdQueue`): a [`DistributedQueue`] whose item
//! node names carry an id, so that items can be removed by id.

use std::borrow::Cow;
use std::future::Future;
use std::time::Instant;

use tracing::warn;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::framework::paths;

use super::consumer::QueueStream;
use super::distributed::{DistributedQueue, QueueBuilder, ITEM_PREFIX};
use super::order::NodeOrder;

/// Curator's separator around the id in an id item node's name.
const SEPARATOR: char = '|';

/// The id as it goes into a node name (Curator's `fixId`): `/` and `|` become `_`. An empty id,
/// or one ZooKeeper refuses in a node name (control or reserved characters), is refused.
fn fixed_id(id: &str) -> Result<String> {
    if id.is_empty() {
        return Err(Error::invalid_argument("id", "\"\"", "an item id must not be empty (Curator refuses it)"));
    }
    let fixed = id.replace(['/', SEPARATOR], "_");
    if paths::validate_path(&format!("/{ITEM_PREFIX}{SEPARATOR}{fixed}{SEPARATOR}")).is_err() {
        return Err(Error::invalid_argument(
            "id",
            format!("{id:?}"),
            "ZooKeeper refuses it in a node name (control or reserved characters)",
        ));
    }
    Ok(fixed)
}

/// The id and the rest of a node name (Curator's `parseId`): the text between the first
/// separator and the next, and the name without it; a name without two separators is its own id
/// and rest.
fn parse(name: &str) -> (&str, Cow<'_, str>) {
    let Some(first) = name.find(SEPARATOR) else { return (name, Cow::Borrowed(name)) };
    let Some(len) = name[first + 1..].find(SEPARATOR) else { return (name, Cow::Borrowed(name)) };
    let second = first + 1 + len;
    (&name[first + 1..second], Cow::Owned(format!("{}{}", &name[..first], &name[second + 1..])))
}

/// The node name without its id: `queue-<sequence>`, the order Curator takes id items in.
pub(crate) fn without_id(name: &str) -> Cow<'_, str> {
    parse(name).1
}

impl<T: Send + 'static> QueueBuilder<T> {
    /// An id queue (Curator's `buildIdQueue`): items put with an id, removable by it.
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_id(self) -> Result<DistributedIdQueue<T>> {
        let queue = self.build_ordered(NodeOrder::IdThenSequence, usize::MAX)?;
        Ok(DistributedIdQueue { queue })
    }
}

/// Curator's `DistributedIdQueue`, wire-compatible: a [`DistributedQueue`] whose items are put
/// with an id, taken in put order, and can be [removed](Self::remove) by id before a consumer
/// takes them.
///
/// Layout: `<path>/queue-|<id>|<sequence>`, the id with `/` and `|` replaced by `_` (Curator's
/// `fixId`: ids differing only there are one id). Consumers take nodes in sequence order, the id
/// left out (Curator's sort). Several items may share an id. An item put back keeps its id, as
/// in Curator.
///
/// Delivery, the lock path and bad input are [`DistributedQueue`]'s. Build it with
/// [`QueueBuilder::build_id`].
///
/// ```no_run
/// use zk_curator::queue::DistributedQueue;
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let queue = DistributedQueue::builder(&client, "/jobs/orders").build_id()?;
/// queue.put(b"ship order 7".to_vec(), "order-7").await?;
/// // The customer cancelled before a consumer took it:
/// assert_eq!(queue.remove("order-7").await?, 1);
/// # Ok(()) }
/// ```
pub struct DistributedIdQueue<T: 'static> {
    queue: DistributedQueue<T>,
}

impl<T: 'static> Clone for DistributedIdQueue<T> {
    fn clone(&self) -> Self {
        DistributedIdQueue { queue: self.queue.clone() }
    }
}

impl<T: 'static> std::fmt::Debug for DistributedIdQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedIdQueue").field("queue", &self.queue).finish()
    }
}

impl<T: Send + 'static> DistributedIdQueue<T> {
    /// The queue path.
    pub fn path(&self) -> &str {
        self.queue.path()
    }

    /// The lock path, when delivery is guaranteed.
    pub fn lock_path(&self) -> Option<&str> {
        self.queue.lock_path()
    }

    /// Puts `item` with `id` (`/` and `|` in it become `_`, as in Curator). Otherwise as
    /// [`DistributedQueue::put`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the id when it is empty (Curator refuses it) or holds
    /// characters ZooKeeper refuses in a node name; otherwise as [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::put`]: once handed to the put pipeline the item is put.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.put(b"ship".to_vec(), "order-7").await?;
    /// # Ok(()) }
    /// ```
    pub async fn put(&self, item: T, id: &str) -> Result<()> {
        let prefix = format!("{ITEM_PREFIX}{SEPARATOR}{}{SEPARATOR}", fixed_id(id)?);
        self.queue.put_items(std::slice::from_ref(&item), None, &prefix).await.map(|_| ())
    }

    /// [`put`](Self::put), waiting for room at most until `timeout` (`Ok(false)`: the queue stayed
    /// full, nothing put). Curator's `put(item, itemId, maxWait, unit)`.
    ///
    /// # Errors
    /// As [`put`](Self::put) and [`DistributedQueue::put_timeout`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let put = queue.put_timeout(b"ship".to_vec(), "order-7", std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_timeout(&self, item: T, id: &str, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        let prefix = format!("{ITEM_PREFIX}{SEPARATOR}{}{SEPARATOR}", fixed_id(id)?);
        self.queue.put_items(std::slice::from_ref(&item), Some(deadline), &prefix).await
    }

    /// Removes the items with `id` (fixed as [`put`](Self::put) fixes it) that no consumer has
    /// taken, returning how many were removed (Curator's `remove(id)`). With a lock path an item
    /// a consumer holds (its lock node exists, Curator's consumer or ours) is not removed: in
    /// one transaction the lock node is made, the item node deleted and the lock node deleted.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the id as [`put`](Self::put) refuses it;
    /// [`Error::Closed`] once [`close`](Self::close) began; connection errors after the retry
    /// policy (items removed so far stay removed).
    ///
    /// # Cancel safety
    /// A dropped call may have removed some of the items. A delete whose reply was lost to a
    /// connection loss and that is sent again finds the node gone: the item is removed but not
    /// counted.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let removed = queue.remove("order-7").await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self, id: &str) -> Result<usize> {
        let id = fixed_id(id)?;
        let shared = &self.queue.shared;
        if *shared.closed.borrow() {
            return Err(Error::Closed { path: shared.path.clone() });
        }
        let dir = shared.fixed.as_str();
        let children = shared
            .client
            .with_retry(&shared.path, None, |zk| async move {
                match zk.list_children(dir).await {
                    Ok(c) => Ok(c),
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(e),
                }
            })
            .await?;
        let mut removed = 0;
        for name in children.iter().filter(|n| n.starts_with(ITEM_PREFIX) && parse(n).0 == id) {
            if self.remove_node(name).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes item node `name` unless someone else removed it first or (with a lock path) a
    /// consumer holds it; true when this call removed it.
    async fn remove_node(&self, name: &str) -> Result<bool> {
        let shared = &self.queue.shared;
        let item = paths::join(&shared.fixed, name);
        let item_path = shared.item_path(name);
        let Some((_, lock_dir)) = &shared.lock else {
            let item = item.as_str();
            return shared
                .client
                .with_retry(&item_path, None, |zk| async move {
                    match zk.delete(item, None).await {
                        Ok(()) => Ok(true),
                        Err(zk::Error::NoNode) => Ok(false),
                        Err(e) => Err(e),
                    }
                })
                .await;
        };
        let lock = paths::join(lock_dir, name);
        let acls = shared.client.raw_acls_for(&lock);
        let data = shared.client.default_data().to_vec();
        loop {
            let (item, lock, acls, data) = (item.as_str(), lock.as_str(), &acls, &data);
            let outcome = shared
                .client
                .with_retry(&item_path, None, |zk| async move {
                    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(acls));
                    let mut writer = zk.new_multi_writer();
                    writer.add_create(lock, data, &options)?;
                    writer.add_delete(item, None)?;
                    writer.add_delete(lock, None)?;
                    match writer.commit().await {
                        Ok(_) => Ok(Some(true)),
                        // The lock path is not made yet: made below, then again.
                        Err(zk::MultiWriteError::OperationFailed { index: 0, source: zk::Error::NoNode }) => Ok(None),
                        // A consumer holds it (NodeExists) or it is gone (NoNode).
                        Err(zk::MultiWriteError::OperationFailed { .. }) => Ok(Some(false)),
                        Err(zk::MultiWriteError::RequestFailed { source }) => Err(source),
                    }
                })
                .await?;
            match outcome {
                Some(removed) => return Ok(removed),
                None => {
                    warn!(path = %shared.path, "making the queue's lock path to remove an item");
                    shared.client.create_parents_as(lock_dir, None, false).await?;
                }
            }
        }
    }

    /// Waits for the puts handed to the pipeline (Curator's `flushPuts`); as
    /// [`DistributedQueue::flush_puts_timeout`].
    ///
    /// # Errors
    /// As [`DistributedQueue::flush_puts_timeout`].
    ///
    /// # Cancel safety
    /// Cancel safe: the puts go on.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// assert!(queue.flush_puts_timeout(std::time::Duration::from_secs(10)).await?);
    /// # Ok(()) }
    /// ```
    pub async fn flush_puts_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        self.queue.flush_puts_timeout(timeout).await
    }

    /// How many puts were handed to the pipeline and are not done yet.
    pub fn pending_puts(&self) -> usize {
        self.queue.pending_puts()
    }

    /// How many item nodes the queue holds now; as [`DistributedQueue::len`].
    ///
    /// # Errors
    /// Connection errors after the retry policy.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// println!("{} items waiting", queue.len().await?);
    /// # Ok(()) }
    /// ```
    pub async fn len(&self) -> Result<usize> {
        self.queue.len().await
    }

    /// A consumer taking the items in put order (by sequence, the ids left out); otherwise as
    /// [`DistributedQueue::consume`].
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) once `close` began.
    pub fn consume(&self) -> Result<QueueStream<T>> {
        self.queue.consume()
    }

    /// Curator's callback style, items in put order; as [`DistributedQueue::consume_with`]
    /// (an item whose handler failed is put back with its id, with a lock path).
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) when the queue was closed before the call.
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::consume_with`].
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.consume_with(|item: Vec<u8>| async move { Ok::<(), std::io::Error>(drop(item)) }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn consume_with<F, Fut, E>(&self, handler: F) -> Result<()>
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: std::fmt::Display,
        T: Clone,
    {
        self.queue.consume_with(handler).await
    }

    /// Closes the queue; as [`DistributedQueue::close`].
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::close`].
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedIdQueue<Vec<u8>>) {
    /// queue.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.queue.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_fixed_parsed_and_refused_as_curator_does() {
        assert_eq!(fixed_id("a/b|c").unwrap(), "a_b_c");
        assert_eq!(fixed_id("order-7").unwrap(), "order-7");
        for bad in ["", "nul\u{0}", "bell\u{7}"] {
            match fixed_id(bad) {
                Err(Error::InvalidArgument { name: "id", value, .. }) => assert_eq!(value, format!("{bad:?}")),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert_eq!(parse("queue-|order-7|0000000003"), ("order-7", Cow::Borrowed("queue-0000000003")));
        assert_eq!(parse("queue-0000000003"), ("queue-0000000003", Cow::Borrowed("queue-0000000003")));
        assert_eq!(parse("queue-|a0000000003").0, "queue-|a0000000003");
    }
}
