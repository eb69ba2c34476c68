//! The one thing the queue kinds change in a consumer: which item nodes it takes and in what
//! order (Curator's `sortChildren` and `getDelay` overrides), and how many it takes from one
//! listing (Curator's `minItemsBeforeRefresh`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{delay, id};

/// How a consumer orders a listing of item nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeOrder {
    /// By name (Curator's `DistributedQueue` and `DistributedPriorityQueue`: the priority is a
    /// prefix of the name that sorts as the number).
    Name,
    /// By the delay-until epoch in the name, and none before it is due
    /// (`DistributedDelayQueue`).
    DelayUntil,
    /// By name with the id left out, so by sequence (`DistributedIdQueue`).
    IdThenSequence,
}

impl NodeOrder {
    /// Sorts `names` into the order they are taken in and drops the ones not due yet at `now`;
    /// returns how long until the first of those is due (None: none waits).
    pub(crate) fn arrange(self, names: &mut Vec<String>, now: SystemTime) -> Option<Duration> {
        match self {
            NodeOrder::Name => {
                names.sort_unstable();
                None
            }
            NodeOrder::IdThenSequence => {
                names.sort_by(|a, b| id::without_id(a).cmp(&id::without_id(b)).then_with(|| a.cmp(b)));
                None
            }
            NodeOrder::DelayUntil => {
                // Curator compares with the consumer's clock.
                let now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
                names.sort_by_cached_key(|n| (delay::epoch_of(n), n.clone()));
                let due = names.partition_point(|n| delay::epoch_of(n) <= now_ms);
                let first_waiting = names.get(due).map(|n| delay::epoch_of(n));
                names.truncate(due);
                first_waiting.map(|epoch| Duration::from_millis(epoch.saturating_sub(now_ms).max(1) as u64))
            }
        }
    }
}

/// The node name prefix a node is put back with: its name without the sequence ZooKeeper added
/// (ten digits), so a requeued item keeps its priority, delay or id. (Curator's
/// `DistributedQueue` requeues a priority or delay item as a plain `queue-` node, losing its
/// priority; its id queue keeps the id, as here.)
pub(crate) fn requeue_prefix(name: &str) -> &str {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count().min(10);
    let prefix = &name[..name.len() - digits];
    if prefix.starts_with(super::distributed::ITEM_PREFIX) {
        prefix
    } else {
        super::distributed::ITEM_PREFIX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requeued_node_keeps_its_kinds_prefix() {
        assert_eq!(requeue_prefix("queue-0000000012"), "queue-");
        assert_eq!(requeue_prefix("queue-1000000050000000012"), "queue-100000005");
        assert_eq!(requeue_prefix("queue-|18C0A1B2C3D|0000000012"), "queue-|18C0A1B2C3D|");
        assert_eq!(requeue_prefix("queue-|job-7|0000000012"), "queue-|job-7|");
    }

    #[test]
    fn a_delay_listing_keeps_only_the_due_nodes_earliest_first() {
        let now = UNIX_EPOCH + Duration::from_millis(0x2000);
        let mut names = vec![
            "queue-|00003000|0000000001".to_string(),
            "queue-|00001000|0000000002".to_string(),
            "queue-0000000003".to_string(),
            "queue-|00002000|0000000000".to_string(),
        ];
        let wait = NodeOrder::DelayUntil.arrange(&mut names, now);
        assert_eq!(names, ["queue-0000000003", "queue-|00001000|0000000002", "queue-|00002000|0000000000"]);
        assert_eq!(wait, Some(Duration::from_millis(0x1000)));
    }

    #[test]
    fn an_id_listing_is_in_sequence_order_whatever_the_ids() {
        let mut names = vec!["queue-|b|0000000001".to_string(), "queue-|a|0000000002".to_string()];
        assert_eq!(NodeOrder::IdThenSequence.arrange(&mut names, SystemTime::now()), None);
        assert_eq!(names, ["queue-|b|0000000001", "queue-|a|0000000002"]);
    }
}
