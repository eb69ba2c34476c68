//! [`DistributedPriorityQueue`] (Curator's `DistributedPriorityQueue`): a [`DistributedQueue`]
//! whose item node names carry a priority, taken lowest number first.

use std::future::Future;
use std::time::Instant;

use crate::error::Result;

use super::consumer::QueueStream;
use super::distributed::{DistributedQueue, QueueBuilder, ITEM_PREFIX};
use super::order::NodeOrder;

/// The node name prefix of an item of `priority`, as Curator writes it: `queue-`, then `1` for a
/// priority of 0 or more and `0` for a negative one, then the priority's 32 bits as eight
/// upper-case hex digits; names then sort as the priorities do.
pub(crate) fn priority_prefix(priority: i32) -> String {
    let sign = if priority >= 0 { '1' } else { '0' };
    format!("{ITEM_PREFIX}{sign}{:08X}", priority as u32)
}

impl<T: Send + 'static> QueueBuilder<T> {
    /// A priority queue (Curator's `buildPriorityQueue(minItemsBeforeRefresh)`): a consumer takes
    /// at most `max(min_items_before_refresh, 1)` item nodes from one listing of the queue before
    /// it lists it again, so an item put with a lower number than those waiting is taken after at
    /// most that many. 0 or 1: strict priority order for one consumer, one listing per item
    /// node; more: fewer listings.
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_priority(self, min_items_before_refresh: usize) -> Result<DistributedPriorityQueue<T>> {
        let queue = self.build_ordered(NodeOrder::Name, min_items_before_refresh)?;
        Ok(DistributedPriorityQueue { queue })
    }
}

/// Curator's `DistributedPriorityQueue`, wire-compatible: a [`DistributedQueue`] whose items are
/// put with an `i32` priority and taken lowest number first (equal priorities in put order).
///
/// Layout: `<path>/queue-<sign><priority><sequence>`: `sign` `1` for a priority of 0 or more and
/// `0` for a negative one, the priority's 32 bits as eight upper-case hex digits, then
/// ZooKeeper's ten-digit sequence, so the names sort as the priorities (Curator's rule: its
/// consumers sort by name). Items put by Curator's priority queue are taken by ours in Curator's
/// order and the reverse.
///
/// Delivery, the lock path and bad input are [`DistributedQueue`]'s. An item put back
/// ([`Item::requeue`](super::Item::requeue), a handler's error) keeps its priority (Curator's
/// requeues it without one). Build it with [`QueueBuilder::build_priority`].
///
/// ```no_run
/// use zk_curator::queue::DistributedQueue;
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let queue = DistributedQueue::builder(&client, "/jobs/urgent").build_priority(0)?;
/// queue.put(b"later".to_vec(), 10).await?;
/// queue.put(b"first".to_vec(), -5).await?;
/// let mut items = queue.consume()?;
/// let item = items.next().await.expect("an item")?;
/// assert_eq!(item.value(), b"first");
/// item.ack().await?;
/// # Ok(()) }
/// ```
pub struct DistributedPriorityQueue<T: 'static> {
    queue: DistributedQueue<T>,
}

impl<T: 'static> Clone for DistributedPriorityQueue<T> {
    fn clone(&self) -> Self {
        DistributedPriorityQueue { queue: self.queue.clone() }
    }
}

impl<T: 'static> std::fmt::Debug for DistributedPriorityQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedPriorityQueue")
            .field("queue", &self.queue)
            .field("min_items_before_refresh", &self.queue.shared.refresh_after)
            .finish()
    }
}

impl<T: Send + 'static> DistributedPriorityQueue<T> {
    /// The queue path.
    pub fn path(&self) -> &str {
        self.queue.path()
    }

    /// The lock path, when delivery is guaranteed.
    pub fn lock_path(&self) -> Option<&str> {
        self.queue.lock_path()
    }

    /// Puts `item` with `priority` (lower numbers are taken first; every `i32` is one). Otherwise
    /// as [`DistributedQueue::put`].
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::put`]: once handed to the put pipeline the item is put.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.put(b"urgent".to_vec(), -100).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put(&self, item: T, priority: i32) -> Result<()> {
        self.queue.put_items(std::slice::from_ref(&item), None, &priority_prefix(priority)).await.map(|_| ())
    }

    /// [`put`](Self::put), waiting for room at most until `timeout` (`Ok(false)`: the queue stayed
    /// full, nothing put). Curator's `put(item, priority, maxWait, unit)`.
    ///
    /// # Errors
    /// As [`DistributedQueue::put_timeout`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let put = queue.put_timeout(b"job".to_vec(), 5, std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_timeout(&self, item: T, priority: i32, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        self.queue.put_items(std::slice::from_ref(&item), Some(deadline), &priority_prefix(priority)).await
    }

    /// Puts several items in one node with `priority` (Curator's `putMulti(items, priority)`).
    ///
    /// # Errors
    /// As [`DistributedQueue::put_multi`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.put_multi(vec![b"a".to_vec(), b"b".to_vec()], 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi(&self, items: Vec<T>, priority: i32) -> Result<()> {
        self.queue.put_items(&items, None, &priority_prefix(priority)).await.map(|_| ())
    }

    /// [`put_multi`](Self::put_multi), waiting for room at most until `timeout` (`Ok(false)`:
    /// nothing put).
    ///
    /// # Errors
    /// As [`DistributedQueue::put_multi_timeout`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let put = queue.put_multi_timeout(vec![b"a".to_vec()], 1, std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi_timeout(
        &self,
        items: Vec<T>,
        priority: i32,
        timeout: impl Into<crate::Deadline>,
    ) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        self.queue.put_items(&items, Some(deadline), &priority_prefix(priority)).await
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
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
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
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// println!("{} items waiting", queue.len().await?);
    /// # Ok(()) }
    /// ```
    pub async fn len(&self) -> Result<usize> {
        self.queue.len().await
    }

    /// A consumer taking the items lowest priority number first (equal ones in put order),
    /// listing the queue again after at most `min_items_before_refresh` nodes; otherwise as
    /// [`DistributedQueue::consume`].
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) once `close` began.
    pub fn consume(&self) -> Result<QueueStream<T>> {
        self.queue.consume()
    }

    /// Curator's callback style, items in priority order; as [`DistributedQueue::consume_with`]
    /// (an item whose handler failed is put back with its priority, with a lock path).
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) when the queue was closed before the call.
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::consume_with`].
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) -> zk_curator::Result<()> {
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
    /// # async fn demo(queue: zk_curator::queue::DistributedPriorityQueue<Vec<u8>>) {
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
    fn priorities_are_named_as_curator_names_them_and_sort_as_numbers() {
        assert_eq!(priority_prefix(0), "queue-100000000");
        assert_eq!(priority_prefix(10), "queue-10000000A");
        assert_eq!(priority_prefix(-1), "queue-0FFFFFFFF");
        assert_eq!(priority_prefix(i32::MIN), "queue-080000000");
        assert_eq!(priority_prefix(i32::MAX), "queue-17FFFFFFF");
        let priorities = [i32::MIN, -300, -1, 0, 1, 255, 256, i32::MAX];
        let names: Vec<String> = priorities.iter().map(|p| priority_prefix(*p)).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}
