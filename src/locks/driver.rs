//! For writing a [`LockDriver`]: the policy that names, sorts and judges a lock's nodes (Curator's
//! `LockInternalsDriver`), and the helpers the crate's own drivers are made of.
//!
//! A driver decides three things for
//! [`InterProcessMutex::with_driver`](crate::locks::InterProcessMutex::with_driver): the node a
//! contender creates ([`NodeSpec`]), the order of the lock's children (a sort key, compared like
//! Java's `String.compareTo`: [`java_cmp`]), and, for one contender ([`Contender`]), whether it
//! holds the lock or what it must watch until it does ([`Verdict`]). [`StandardLockDriver`] is
//! Curator's (first in sequence order holds); [`standard_sort_key`], [`standard_verdict`],
//! [`standard_evaluate`] and [`evaluate_by_key`] are its parts, for a driver that changes only one
//! of them; [`read_write_sort_key`], [`ReadLockDriver`], [`WriteLockDriver`] and [`LeaseDriver`]
//! are the read-write lock's and the semaphore's.
//!
//! (Inside the lock layers this is layer 3, below `internals` and `reentrancy`.)

use crate::CreateMode;

pub use super::read_write::{read_write_sort_key, ReadLockDriver, WriteLockDriver};
pub use super::semaphore::LeaseDriver;

/// How the next contender node is created.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeSpec {
    /// The name after the protection prefix (`lock-` for the mutex; ZooKeeper appends the sequence
    /// for sequential modes).
    pub name: String,
    /// The create mode (EPHEMERAL_SEQUENTIAL for every standard recipe).
    pub mode: CreateMode,
}

/// Who is asking for a verdict: the contender's own node and what the recipe knows about it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Contender<'a> {
    /// The contender's node name (a child of the lock path).
    pub our_name: &'a str,
    /// How many contenders may hold at once (1 for a mutex; the lease count for a semaphore).
    pub max_leases: usize,
    /// Names of other nodes under the same lock path that the *same caller* already holds — e.g.
    /// its write-lock node when it asks for the read lock (Curator's "the write lock is owned by
    /// the current thread"). Empty for the mutex.
    pub caller_holds: &'a [String],
}

impl NodeSpec {
    /// Nodes named `name` (after the protection prefix), created with `mode`.
    pub fn new(name: impl Into<String>, mode: CreateMode) -> Self {
        Self { name: name.into(), mode }
    }
}

impl<'a> Contender<'a> {
    /// A contender that holds nothing else on the path.
    pub fn new(our_name: &'a str, max_leases: usize) -> Self {
        Self { our_name, max_leases, caller_holds: &[] }
    }
}

/// The driver's verdict for one contender (Curator's `PredicateResults`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The contender holds the lock.
    Acquired,
    /// Not yet: watch this child (a name, not a path) and look again when it changes.
    Watch {
        /// The child to watch.
        node: String,
        /// True when that child is the only thing keeping the contender out, so its deletion
        /// means the contender holds the lock without listing again. Only valid for names that end
        /// in a sequence number: a later node can never sort before ours (see Tech Note 7 for the
        /// caveat about foreign children).
        acquired_when_deleted: bool,
    },
    /// Not yet: watch the children of the lock path and look again when any is added or removed
    /// (what a semaphore waits on).
    WatchChildren,
    /// The contender's own node is not among the children: its session died or someone deleted it.
    NotInQueue,
}

/// Curator's `LockInternalsDriver`: the policy half of a lock recipe.
pub trait LockDriver: Send + Sync + 'static {
    /// The lock name used for sorting (`lock-`, `__READ__`, ...).
    fn lock_name(&self) -> &str;

    /// The node to create for a new contender. `caller_holds` names the nodes of this path the
    /// caller already holds (see [`Contender::caller_holds`]); a read lock taken by the writer
    /// uses it to take the writer's place in line.
    fn node_spec(&self, caller_holds: &[String]) -> NodeSpec {
        let _ = caller_holds;
        NodeSpec { name: self.lock_name().to_string(), mode: CreateMode::EphemeralSequential }
    }

    /// The key children are sorted by (Curator's `fixForSorting`).
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        standard_sort_key(child, self.lock_name())
    }

    /// Sorts children in place with Curator's stable order.
    fn sort(&self, children: &mut [String]) {
        // One sort key per child, not two per comparison: every waiter sorts the whole queue, and
        // a substring search per comparison made that the client's main cost with long queues.
        let mut order: Vec<usize> = (0..children.len()).collect();
        {
            let keys: Vec<&str> = children.iter().map(|c| self.sort_key(c)).collect();
            order.sort_by(|&a, &b| java_cmp(keys[a], keys[b])); // stable, as before
        }
        let mut taken: Vec<String> = children.iter_mut().map(std::mem::take).collect();
        for (slot, i) in children.iter_mut().zip(order) {
            *slot = std::mem::take(&mut taken[i]);
        }
    }

    /// Decides, over children already sorted by [`sort`](Self::sort), whether the contender holds
    /// the lock (Curator's `getsTheLock`).
    fn verdict(&self, sorted_children: &[String], contender: &Contender<'_>) -> Verdict {
        standard_verdict(sorted_children, contender.our_name, contender.max_leases)
    }

    /// Decides over the children in server order (unsorted) — what the lock loop (`LockInternals`) calls
    /// on every look. The default sorts and asks [`verdict`](Self::verdict); a driver may decide without
    /// sorting, as long as the verdict is the same.
    fn evaluate(&self, mut children: Vec<String>, contender: &Contender<'_>) -> Verdict {
        self.sort(&mut children);
        self.verdict(&children, contender)
    }
}

/// Curator's `standardFixForSorting`: the text after the LAST occurrence of `lock_name`, or the whole
/// name when it does not occur.
pub fn standard_sort_key<'a>(child: &'a str, lock_name: &str) -> &'a str {
    match child.rfind(lock_name) {
        Some(i) => &child[i + lock_name.len()..],
        None => child,
    }
}

/// Java's `String.compareTo` (UTF-16 code units), which differs from Rust's byte order only for
/// characters above U+FFFF versus U+E000..U+FFFF.
pub fn java_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Curator's standard predicate: every child is a contender; the lock is held by the first
/// `max_leases` of them; otherwise watch the one `max_leases` places ahead.
pub fn standard_verdict(sorted_children: &[String], our_name: &str, max_leases: usize) -> Verdict {
    let Some(index) = sorted_children.iter().position(|c| c == our_name) else {
        return Verdict::NotInQueue;
    };
    if index < max_leases {
        return Verdict::Acquired;
    }
    Verdict::Watch { node: sorted_children[index - max_leases].clone(), acquired_when_deleted: index == max_leases }
}

/// [`standard_verdict`] over unsorted children in one pass, without sorting: a waiter in a queue
/// of W looks at W names each time, so O(W) instead of O(W log W) plus moves.
///
/// Same verdict as sorting with [`standard_sort_key`] (stable: equal keys keep server order) and
/// calling [`standard_verdict`].
pub fn standard_evaluate(children: &[String], our_name: &str, lock_name: &str, max_leases: usize) -> Verdict {
    evaluate_by_key(children, our_name, max_leases, |child| standard_sort_key(child, lock_name))
}

/// [`standard_evaluate`] with any sort key (e.g. the read-write lock's, which strips both lock
/// names).
pub fn evaluate_by_key<'a>(
    children: &'a [String],
    our_name: &str,
    max_leases: usize,
    key: impl Fn(&'a str) -> &'a str,
) -> Verdict {
    let Some((_, mut ahead)) = ahead_of(children, our_name, |_| true, &key) else {
        return Verdict::NotInQueue;
    };
    let index = ahead.len();
    if index < max_leases {
        return Verdict::Acquired;
    }
    // The child at sorted position `index - max_leases`.
    let (_, &mut (_, watched), _) =
        ahead.select_nth_unstable_by(index - max_leases, |a, b| java_cmp(a.0, b.0).then(a.1.cmp(&b.1)));
    Verdict::Watch { node: children[watched].clone(), acquired_when_deleted: index == max_leases }
}

/// Our position in server order and every child that sorts before ours and passes `filter`, as
/// (sort key, server position); `None` when our node is not among the children.
pub(crate) fn ahead_of<'a>(
    children: &'a [String],
    our_name: &str,
    filter: impl Fn(&'a str) -> bool,
    key: impl Fn(&'a str) -> &'a str,
) -> Option<(usize, Vec<(&'a str, usize)>)> {
    use std::cmp::Ordering;
    let our_index = children.iter().position(|c| c == our_name)?;
    let our_key = key(&children[our_index]);
    let ahead = children
        .iter()
        .enumerate()
        .filter(|&(_, c)| filter(c))
        .map(|(i, c)| (key(c), i))
        .filter(|&(k, i)| match java_cmp(k, our_key) {
            Ordering::Less => true,
            Ordering::Equal => i < our_index,
            Ordering::Greater => false,
        })
        .collect();
    Some((our_index, ahead))
}

/// The mutex's driver: lock name `lock-`, EPHEMERAL_SEQUENTIAL, index < max leases holds.
#[derive(Clone, Debug)]
pub struct StandardLockDriver {
    /// Borrowed for Curator's names (no allocation in every lock instance).
    lock_name: std::borrow::Cow<'static, str>,
}

impl StandardLockDriver {
    /// Curator's mutex lock name.
    pub const MUTEX_LOCK_NAME: &'static str = "lock-";

    /// A driver with the given lock name.
    pub fn new(lock_name: impl Into<String>) -> Self {
        Self { lock_name: std::borrow::Cow::Owned(lock_name.into()) }
    }

    /// A driver with a lock name known at compile time (the recipes' own names).
    pub(crate) const fn with_static_name(lock_name: &'static str) -> Self {
        Self { lock_name: std::borrow::Cow::Borrowed(lock_name) }
    }
}

impl Default for StandardLockDriver {
    fn default() -> Self {
        Self::with_static_name(Self::MUTEX_LOCK_NAME)
    }
}

impl LockDriver for StandardLockDriver {
    fn lock_name(&self) -> &str {
        &self.lock_name
    }

    fn evaluate(&self, children: Vec<String>, contender: &Contender<'_>) -> Verdict {
        standard_evaluate(&children, contender.our_name, &self.lock_name, contender.max_leases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(driver: &StandardLockDriver, names: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        driver.sort(&mut v);
        v
    }

    #[test]
    fn sorts_like_curator() {
        let d = StandardLockDriver::default();
        let s = sorted(
            &d,
            &[
                "_c_ffffffff-0000-0000-0000-000000000000-lock-0000000003",
                "_c_00000000-0000-0000-0000-000000000000-lock-0000000010",
                "lock-0000000001",
                "zzz-foreign",
                "-foreign",
            ],
        );
        // digits sort by sequence whatever the protection prefix; foreign names sort by full name.
        assert_eq!(
            s,
            [
                "-foreign",
                "lock-0000000001",
                "_c_ffffffff-0000-0000-0000-000000000000-lock-0000000003",
                "_c_00000000-0000-0000-0000-000000000000-lock-0000000010",
                "zzz-foreign",
            ]
        );
        // the LAST occurrence of the lock name counts
        assert_eq!(standard_sort_key("lock-lock-0000000005", "lock-"), "0000000005");
        assert_eq!(standard_sort_key("x-lock-", "lock-"), "");
    }

    #[test]
    fn predicate_watches_the_node_max_leases_ahead() {
        let kids: Vec<String> = ["a-lock-01", "b-lock-02", "c-lock-03"].iter().map(|s| s.to_string()).collect();
        assert_eq!(standard_verdict(&kids, "a-lock-01", 1), Verdict::Acquired);
        assert_eq!(
            standard_verdict(&kids, "b-lock-02", 1),
            Verdict::Watch { node: "a-lock-01".into(), acquired_when_deleted: true }
        );
        assert_eq!(
            standard_verdict(&kids, "c-lock-03", 1),
            Verdict::Watch { node: "b-lock-02".into(), acquired_when_deleted: false }
        );
        assert_eq!(standard_verdict(&kids, "c-lock-03", 3), Verdict::Acquired);
        assert_eq!(standard_verdict(&kids, "zz", 1), Verdict::NotInQueue);
    }

    #[test]
    fn one_pass_evaluation_agrees_with_sorting() {
        use rand::seq::SliceRandom;
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let d = StandardLockDriver::default();
        for round in 0..2000 {
            let n = rng.gen_range(1..12);
            let mut children: Vec<String> = (0..n)
                .map(|i| match rng.gen_range(0..10) {
                    // foreign children and duplicate keys (ties keep server order) included
                    0 => format!("foreign-{}", rng.gen_range(0..3)),
                    1 => format!("x{i}-lock-{:010}", rng.gen_range(0..3)),
                    _ => format!("_c_{i:036}-lock-{:010}", rng.gen_range(0..50)),
                })
                .collect();
            children.sort();
            children.dedup(); // ZooKeeper child names are unique
            children.shuffle(&mut rng);
            let ours = children.choose(&mut rng).unwrap().clone();
            let max_leases = rng.gen_range(1..4);
            let mut sorted = children.clone();
            d.sort(&mut sorted);
            let expected = standard_verdict(&sorted, &ours, max_leases);
            let contender = Contender::new(&ours, max_leases);
            assert_eq!(d.evaluate(children.clone(), &contender), expected, "round {round}: {children:?} {ours}");
        }
        assert_eq!(d.evaluate(vec!["a-lock-1".into()], &Contender::new("zz", 1)), Verdict::NotInQueue);
    }

    #[test]
    fn java_order_for_supplementary_chars() {
        use std::cmp::Ordering;
        // U+FFFD vs U+1F600: Rust's byte order says FFFD < 1F600; Java's UTF-16 says the opposite.
        assert_eq!(java_cmp("\u{FFFD}", "\u{1F600}"), Ordering::Greater);
        assert_eq!(java_cmp("a", "b"), Ordering::Less);
    }
}
