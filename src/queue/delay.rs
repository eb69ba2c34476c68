//! [`DistributedDelayQueue`] (Curator's `DistributedDelayQueue`): a [`DistributedQueue`] whose
//! item node names carry a time before which the item is not taken.

use std::future::Future;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

use super::consumer::QueueStream;
use super::distributed::{DistributedQueue, QueueBuilder, ITEM_PREFIX};
use super::order::NodeOrder;

/// Curator's separator around the epoch in a delay item node's name.
const SEPARATOR: char = '|';

/// The node name prefix of an item due at `epoch_ms`, as Curator writes it:
/// `queue-|<epoch ms in upper-case hex, at least eight digits>|`.
fn delay_prefix(epoch_ms: i64) -> String {
    format!("{ITEM_PREFIX}{SEPARATOR}{epoch_ms:08X}{SEPARATOR}")
}

/// The epoch (ms) a delay item node is due at, read as Curator reads it: the hex between the last
/// two separators; 0 (due now) for a name without one or whose number does not parse.
pub(crate) fn epoch_of(name: &str) -> i64 {
    let Some(last) = name.rfind(SEPARATOR) else { return 0 };
    let Some(first) = name[..last].rfind(SEPARATOR) else { return 0 };
    // Curator wants the first separator past the name's first character and a non-empty number.
    if first == 0 || last <= first + 1 {
        return 0;
    }
    parse_hex_long(&name[first + 1..last]).unwrap_or(0)
}

/// Java's `Long.parseLong(s, 16)`: an optional sign, then hex digits, within `i64`.
fn parse_hex_long(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, 16).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// `until` as Curator's `delayUntilEpoch` (ms since the epoch), refused unless it is after the
/// epoch (Curator refuses 0 and less) and within an `i64` of milliseconds.
fn epoch_ms(until: SystemTime) -> Result<i64> {
    let refuse = |reason| Error::invalid_argument("delay_until", format!("{until:?}"), reason);
    let since = until.duration_since(UNIX_EPOCH).map_err(|_| refuse("must be after the Unix epoch"))?;
    let ms = i64::try_from(since.as_millis()).map_err(|_| refuse("must be within i64 milliseconds of the epoch"))?;
    if ms <= 0 {
        return Err(refuse("must be at least 1 ms after the Unix epoch (Curator refuses 0)"));
    }
    Ok(ms)
}

impl<T: Send + 'static> QueueBuilder<T> {
    /// A delay queue (Curator's `buildDelayQueue`): items put with a time are not taken before
    /// it.
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_delay(self) -> Result<DistributedDelayQueue<T>> {
        let queue = self.build_ordered(NodeOrder::DelayUntil, usize::MAX)?;
        Ok(DistributedDelayQueue { queue })
    }
}

/// Curator's `DistributedDelayQueue`, wire-compatible: a [`DistributedQueue`] whose items are put
/// with a time (`delay_until`) and never taken before it; due items are taken earliest time
/// first.
///
/// Layout: `<path>/queue-|<epoch>|<sequence>`: `epoch` the time as milliseconds since the Unix
/// epoch in upper-case hex (at least eight digits), as Curator's `delayUntilEpoch`. A node
/// without a readable time (a plain `queue-<sequence>`) is due at once, as in Curator.
///
/// # Clocks
/// The time is compared with the *consumer's* clock (as Curator does): an item is taken once the
/// consumer's clock reads `delay_until` or later. A producer computing `delay_until` as "now plus
/// a delay" with a clock ahead of the consumers' by `s` delays its items by `s` more; one behind
/// by `s` makes them due `s` early (at once if `s` is more than the delay). Keep the clocks in
/// step (NTP) or give times the consumers agree on.
///
/// A consumer with nothing due waits for the first time to come (or for a change of the queue):
/// no polling. Delivery, the lock path and bad input are [`DistributedQueue`]'s; an item put back
/// keeps its time (already passed). Build it with [`QueueBuilder::build_delay`].
///
/// ```no_run
/// use std::time::{Duration, SystemTime};
/// use zk_curator::queue::DistributedQueue;
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let queue = DistributedQueue::builder(&client, "/jobs/reminders").build_delay()?;
/// queue.put(b"remind".to_vec(), SystemTime::now() + Duration::from_secs(60)).await?;
/// let mut items = queue.consume()?;
/// let item = items.next().await.expect("an item")?; // not before a minute has passed
/// item.ack().await?;
/// # Ok(()) }
/// ```
pub struct DistributedDelayQueue<T: 'static> {
    queue: DistributedQueue<T>,
}

impl<T: 'static> Clone for DistributedDelayQueue<T> {
    fn clone(&self) -> Self {
        DistributedDelayQueue { queue: self.queue.clone() }
    }
}

impl<T: 'static> std::fmt::Debug for DistributedDelayQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedDelayQueue").field("queue", &self.queue).finish()
    }
}

impl<T: Send + 'static> DistributedDelayQueue<T> {
    /// The queue path.
    pub fn path(&self) -> &str {
        self.queue.path()
    }

    /// The lock path, when delivery is guaranteed.
    pub fn lock_path(&self) -> Option<&str> {
        self.queue.lock_path()
    }

    /// Puts `item`, not to be taken before `delay_until` (by the consumer's clock; see
    /// [Clocks](Self#clocks)). A time already passed is due at once. Otherwise as
    /// [`DistributedQueue::put`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `delay_until` and its value when it is not after the
    /// Unix epoch (Curator refuses 0) or beyond an `i64` of milliseconds; otherwise as
    /// [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::put`]: once handed to the put pipeline the item is put.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let in_a_minute = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    /// queue.put(b"later".to_vec(), in_a_minute).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put(&self, item: T, delay_until: SystemTime) -> Result<()> {
        let prefix = delay_prefix(epoch_ms(delay_until)?);
        self.queue.put_items(std::slice::from_ref(&item), None, &prefix).await.map(|_| ())
    }

    /// [`put`](Self::put), waiting for room at most until `timeout` (`Ok(false)`: the queue stayed
    /// full, nothing put). Curator's `put(item, delayUntilEpoch, maxWait, unit)`.
    ///
    /// # Errors
    /// As [`put`](Self::put) and [`DistributedQueue::put_timeout`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let at = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    /// let put = queue.put_timeout(b"job".to_vec(), at, std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_timeout(
        &self,
        item: T,
        delay_until: SystemTime,
        timeout: impl Into<crate::Deadline>,
    ) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        let prefix = delay_prefix(epoch_ms(delay_until)?);
        self.queue.put_items(std::slice::from_ref(&item), Some(deadline), &prefix).await
    }

    /// Puts several items in one node, not to be taken before `delay_until` (Curator's
    /// `putMulti(items, delayUntilEpoch)`).
    ///
    /// # Errors
    /// As [`put`](Self::put) and [`DistributedQueue::put_multi`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let at = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    /// queue.put_multi(vec![b"a".to_vec(), b"b".to_vec()], at).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi(&self, items: Vec<T>, delay_until: SystemTime) -> Result<()> {
        let prefix = delay_prefix(epoch_ms(delay_until)?);
        self.queue.put_items(&items, None, &prefix).await.map(|_| ())
    }

    /// [`put_multi`](Self::put_multi), waiting for room at most until `timeout` (`Ok(false)`:
    /// nothing put).
    ///
    /// # Errors
    /// As [`put`](Self::put) and [`DistributedQueue::put_multi_timeout`].
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let at = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    /// let put = queue.put_multi_timeout(vec![b"a".to_vec()], at, std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi_timeout(
        &self,
        items: Vec<T>,
        delay_until: SystemTime,
        timeout: impl Into<crate::Deadline>,
    ) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        let prefix = delay_prefix(epoch_ms(delay_until)?);
        self.queue.put_items(&items, Some(deadline), &prefix).await
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
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
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
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// println!("{} items waiting", queue.len().await?);
    /// # Ok(()) }
    /// ```
    pub async fn len(&self) -> Result<usize> {
        self.queue.len().await
    }

    /// A consumer taking the items once due by its clock, earliest time first; with nothing due
    /// it waits for the first time (or a change of the queue). Otherwise as
    /// [`DistributedQueue::consume`].
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) once `close` began.
    pub fn consume(&self) -> Result<QueueStream<T>> {
        self.queue.consume()
    }

    /// Curator's callback style, items due, earliest first; as [`DistributedQueue::consume_with`]
    /// (an item whose handler failed is put back with its time, with a lock path).
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) when the queue was closed before the call.
    ///
    /// # Cancel safety
    /// As [`DistributedQueue::consume_with`].
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) -> zk_curator::Result<()> {
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
    /// # async fn demo(queue: zk_curator::queue::DistributedDelayQueue<Vec<u8>>) {
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
    use std::time::Duration;

    #[test]
    fn times_are_named_as_curator_names_them_and_read_back() {
        assert_eq!(delay_prefix(0x1000), "queue-|00001000|");
        assert_eq!(delay_prefix(1_700_000_000_000), "queue-|18BCFE56800|");
        assert_eq!(epoch_of("queue-|18BCFE56800|0000000007"), 1_700_000_000_000);
        // Curator reads what it cannot parse as due now.
        assert_eq!(epoch_of("queue-0000000007"), 0);
        assert_eq!(epoch_of("queue-||0000000007"), 0);
        assert_eq!(epoch_of("queue-|zz|0000000007"), 0);
        assert_eq!(epoch_of("queue-|FFFFFFFFFFFFFFFFF|0000000007"), 0);
        assert_eq!(epoch_of("|5|"), 0);
    }

    #[test]
    fn a_time_curator_refuses_is_a_typed_error_naming_it() {
        for bad in [UNIX_EPOCH, UNIX_EPOCH - Duration::from_secs(1), UNIX_EPOCH + Duration::from_micros(999)] {
            match epoch_ms(bad) {
                Err(Error::InvalidArgument { name: "delay_until", value, .. }) => {
                    assert_eq!(value, format!("{bad:?}"))
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert_eq!(epoch_ms(UNIX_EPOCH + Duration::from_millis(1)).unwrap(), 1);
    }
}
