//! Queues (Curator's `recipes/queue`), wire-compatible with Curator:
//!
//! * [`DistributedQueue`] (Curator's `DistributedQueue` and `QueueBuilder`): items put by
//!   producers, consumed as a stream with acknowledgement, at most once or — with a lock path — at
//!   least once;
//! * [`DistributedPriorityQueue`] (Curator's `DistributedPriorityQueue`,
//!   [`build_priority`](QueueBuilder::build_priority)): items put with an `i32` priority, taken
//!   lowest number first;
//! * [`DistributedDelayQueue`] (Curator's `DistributedDelayQueue`,
//!   [`build_delay`](QueueBuilder::build_delay)): items put with a time, never taken before it
//!   (by the consumer's clock);
//! * [`DistributedIdQueue`] (Curator's `DistributedIdQueue`, [`build_id`](QueueBuilder::build_id)):
//!   items put with an id, taken in put order, [removable](DistributedIdQueue::remove) by id;
//! * [`SimpleDistributedQueue`] (Curator's `SimpleDistributedQueue`): a FIFO of byte items with
//!   `offer`, `take`, `poll_timeout` (Curator's `poll(timeout, unit)`), `try_take` (`poll()`),
//!   `peek`, `element`, `remove`;
//! * [`QueueSharder`] (Curator's `QueueSharder`): one logical queue over shard queues
//!   `Q/queue-<random UUID>`, a shard added by the leader when one reaches a threshold.
//!
//! Producers [`put`](DistributedQueue::put) items, consumers take them as a stream of
//! [`Item`]s to [`ack`](Item::ack) ([`consume`](DistributedQueue::consume)) or through a handler
//! ([`consume_with`](DistributedQueue::consume_with), Curator's `QueueConsumer`). Curator's
//! producers and consumers share a queue with ours.
//!
//! ```no_run
//! use zk_curator::queue::DistributedQueue;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let queue = DistributedQueue::builder(&client, "/jobs/queue").lock_path("/jobs/locks").build()?;
//! queue.put(b"resize photo 17".to_vec()).await?;
//! let mut items = queue.consume()?;
//! while let Some(item) = items.next().await {
//!     let item = item?;
//!     // ... process item.value() ...
//!     item.ack().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout (Curator's)
//!
//! * `Q/queue-<sequence>`: one PERSISTENT_SEQUENTIAL node per put, its data Curator's item format
//!   (version `0x00010001`, then per item `0x01`, a big-endian length and the bytes, then
//!   `0x02`): one item, or several for [`put_multi`](DistributedQueue::put_multi).
//! * The kinds put their part between `queue-` and the sequence, as Curator does:
//!   `queue-<sign><8 hex digits><sequence>` for a priority (sign `1` for 0 or more, `0` for a
//!   negative one: names sort as the priorities), `queue-|<epoch ms in hex>|<sequence>` for a delay,
//!   `queue-|<id>|<sequence>` for an id.
//! * `L/<item node name>` (with a lock path `L`): the EPHEMERAL lock node of the consumer
//!   processing that item node, its data the client's default data (as Curator's).
//!
//! # Delivery
//!
//! * Without a lock path, at most once: a consumer deletes the node before handing out its items;
//!   an item a consumer took is gone even if the consumer crashes. Items a stream took and had
//!   not yielded when it was dropped (or the queue closed) are put back at the tail.
//! * With a lock path, at least once: a consumer creates the lock node, and the item node is
//!   deleted together with the lock node (one transaction, on the session that made the lock)
//!   only when every item of the node is acknowledged. An item dropped unacknowledged, whose
//!   consumer was cancelled, closed or lost its session, goes to the next consumer; two live
//!   consumers (Curator's or ours) never hold one item node at once (the lock node is exclusive).
//! * With a lock path an [`Item`] is held as a lock is, on its consumer's session: it has a
//!   [hold state](Item#hold-state) ([`hold_state`](Item::hold_state),
//!   [`watch_state`](Item::watch_state), [`lost`](Item::lost)). It is handed out only `Held`; it is
//!   `Suspended` while the connection is lost and `Lost` once the session ended — or was given up
//!   by the client while suspended, before the server can expire it and hand the item to another
//!   consumer. Process an item against `lost()` (or against anything but `Held`) and ack it only
//!   if the work finished while `Held`: the ack of a `Lost` item is refused. Without a lock path
//!   an item is `Held` until acknowledged: its node is already deleted, nobody else can get it.
//! * Order: a consumer takes nodes by name, so in sequence order (Curator's rule); several
//!   consumers process in parallel, so their items finish in any order.
//! * A put reported done is in the queue exactly once. A put whose create (or transaction of
//!   creates) went unanswered — connection or session lost after it was sent — is not sent again:
//!   it fails with the retryable error, its item in the queue once or not at all, never twice
//!   (Curator's retry sends it again and may put it twice). Creates the server refused (the queue
//!   path deleted) or never sent are sent again.
//!
//! # Bad input
//!
//! An item node another writer made that is not Curator's format (or whose items the serializer
//! refuses) is left in place, logged, and reported once per consumer as
//! [`Error::MalformedData`](crate::Error::MalformedData) on that consumer's stream; the stream
//! goes on. A put over the client's max data size is refused with
//! [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the queue path. A deleted
//! queue path is reported once on each consumer's stream (`NoNode`); consumers wait for it to
//! come back and producers make it again.
//!
//! # Speed
//!
//! Each queue pipelines its creates on its session (up to 1024 unanswered, sent in put order),
//! the puts waiting together sent as one transaction of up to 256 creates (one log entry and
//! fsync on the server for all of them; a transaction makes all its nodes or none, so put order
//! and "once, or an error" hold as for single creates). A consumer takes up to
//! `max_in_flight` nodes per round with pipelined requests: without a lock path one round of reads
//! then one transaction deleting them all (when another consumer took one of them first, the
//! transaction removes none and each is deleted on its own, so none is taken twice; when its reply
//! is lost each is deleted on its own too, and if all were gone by then — taken by that
//! transaction or by others, unknowable — the consumer's stream reports the error: at most once
//! without a lock path), with one a single round of lock
//! creates and reads — where Curator makes two or three round trips per item and lists the queue
//! again for each.

mod consumer;
mod delay;
mod distributed;
mod format;
mod id;
mod order;
mod priority;
mod sharder;
mod simple;

pub use consumer::{Item, QueueStream};
pub use delay::DistributedDelayQueue;
pub use distributed::{DistributedQueue, QueueBuilder, DEFAULT_FINAL_FLUSH, DEFAULT_MAX_IN_FLIGHT};
#[cfg(feature = "serde")]
pub use format::JsonSerializer;
pub use format::{BytesSerializer, QueueSerializer};
pub use id::DistributedIdQueue;
pub use priority::DistributedPriorityQueue;
pub use sharder::{
    QueueSharder, QueueSharderPolicies, QueueSharderPoliciesBuilder, ShardQueue, SharderState, DEFAULT_MAX_QUEUES,
    DEFAULT_NEW_QUEUE_THRESHOLD, DEFAULT_THRESHOLD_CHECK, SHARD_PREFIX,
};
pub use simple::{SimpleDistributedQueue, ITEM_PREFIX as SIMPLE_QUEUE_ITEM_PREFIX};

pub(crate) use distributed::ITEM_PREFIX as ITEM_NODE_PREFIX;
