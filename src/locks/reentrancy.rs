//! Layer 1: who holds a lock inside this process, and how many times (Curator's `threadData`).
//!
//! Curator keys ownership by `Thread`. Async tasks move between threads, so here the holder is the
//! current tokio task when there is one, else the current thread. Re-entering costs no ZooKeeper
//! round trip: it only bumps a counter.
//!
//! # An ended holder's hold is never reachable by another holder
//!
//! A task that ends (an early `?`, a panic, an abort) between `acquire()` and `release()` leaves
//! its entry here. Nothing can notice that it ended: stable tokio offers no hook on a task's end
//! (`on_task_terminate` is `tokio_unstable` and belongs to whoever builds the runtime), and a
//! library cannot put a task-local or a drop guard into a user's task. So the entry cannot be
//! released when its task ends; what we make sure of is that no other holder can ever reach it:
//!
//! * a thread's [`ThreadId`](std::thread::ThreadId) is never reused, as `std` guarantees;
//! * a task's [`tokio::task::Id`] is documented as reusable once the task ended and its handles
//!   are gone, but tokio's implementation (checked in 1.54, the version this crate is built with)
//!   takes them from one process-wide 64-bit counter and never hands one out twice. The unit test
//!   `ended_tasks_ids_never_come_back` pins that: if tokio ever reuses ids, it fails.
//!
//! The orphaned entry stays until the lock instance is dropped; then it is released (its node
//! deleted in the background) and reported with a `tracing` warning — see
//! [`InterProcessMutex`](crate::locks::InterProcessMutex).

use std::collections::HashMap;
use std::hash::Hash;

use parking_lot::Mutex;

/// The identity that owns a lock hold: a tokio task, or a thread outside any task. Never the
/// identity of an earlier task or thread that has ended (see the module notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HolderId {
    /// The current tokio task.
    Task(tokio::task::Id),
    /// The current OS thread (code not running inside a tokio task).
    Thread(std::thread::ThreadId),
}

tokio::task_local! {
    /// The holder a call of the blocking facade acts for: the OS thread that made the call (see
    /// [`HolderId::scope`]).
    static ACTING_FOR: HolderId;
}

impl HolderId {
    /// The identity of the caller: its tokio task if inside one, else its thread. Inside a call of
    /// [`blocking`](crate::blocking), the thread that made the call.
    pub fn current() -> HolderId {
        if let Ok(holder) = ACTING_FOR.try_with(|holder| *holder) {
            return holder;
        }
        match tokio::task::try_id() {
            Some(id) => HolderId::Task(id),
            None => HolderId::Thread(std::thread::current().id()),
        }
    }
}

impl HolderId {
    /// Runs `future` as `self`: [`current`](Self::current) inside it (not in tasks it spawns) is
    /// `self`, even where it is polled by a tokio task. The blocking facade runs each call of a
    /// thread this way, so that the thread owns its Curator-style holds, as in Curator, whatever
    /// polls the call's future.
    pub(crate) fn scope<F: std::future::Future>(self, future: F) -> impl std::future::Future<Output = F::Output> {
        ACTING_FOR.scope(self, future)
    }

    /// Runs `f` as `self` (see [`scope`](Self::scope)).
    pub(crate) fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        ACTING_FOR.sync_scope(self, f)
    }
}

/// What a release did to a holder's entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Released<T> {
    /// Still held, this many times.
    StillHeld(usize),
    /// The last hold was released; the caller must release the lease itself.
    Last(T),
}

/// holder → (lease, hold count). `T` is the recipe's lease (for the mutex: its lock node).
#[derive(Debug)]
pub(crate) struct ReentrancyMap<K: Eq + Hash, T: Clone> {
    entries: Mutex<HashMap<K, (T, usize)>>,
}

impl<K: Eq + Hash, T: Clone> Default for ReentrancyMap<K, T> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash + Copy, T: Clone> ReentrancyMap<K, T> {
    /// If `holder` already holds, count one more hold and return its lease.
    pub(crate) fn reenter(&self, holder: K) -> Option<T> {
        let mut entries = self.entries.lock();
        let (lease, count) = entries.get_mut(&holder)?;
        *count += 1;
        Some(lease.clone())
    }

    /// Records a first hold. Returns `false` (and changes nothing) if `holder` already has one.
    pub(crate) fn insert(&self, holder: K, lease: T) -> bool {
        let mut entries = self.entries.lock();
        if entries.contains_key(&holder) {
            return false;
        }
        entries.insert(holder, (lease, 1));
        true
    }

    /// Releases one hold of `holder`; `None` if it holds nothing.
    pub(crate) fn release(&self, holder: K) -> Option<Released<T>> {
        let mut entries = self.entries.lock();
        let (_, count) = entries.get_mut(&holder)?;
        *count -= 1;
        if *count > 0 {
            return Some(Released::StillHeld(*count));
        }
        entries.remove(&holder).map(|(lease, _)| Released::Last(lease))
    }

    pub(crate) fn get(&self, holder: K) -> Option<(T, usize)> {
        self.entries.lock().get(&holder).cloned()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.lock().is_empty()
    }

    /// Takes every entry out: holder, lease, hold count.
    pub(crate) fn drain(&self) -> Vec<(K, T, usize)> {
        self.entries.lock().drain().map(|(holder, (lease, count))| (holder, lease, count)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_releases() {
        let map = ReentrancyMap::<u8, &str>::default();
        assert!(map.reenter(1).is_none());
        assert!(map.insert(1, "node"));
        assert!(!map.insert(1, "other"), "a second first-hold must be refused");
        assert_eq!(map.reenter(1), Some("node"));
        assert_eq!(map.release(1), Some(Released::StillHeld(1)));
        assert!(!map.is_empty());
        assert_eq!(map.release(1), Some(Released::Last("node")));
        assert!(map.is_empty());
        assert_eq!(map.release(1), None, "release without hold");
    }

    #[tokio::test]
    async fn tasks_are_distinct_holders() {
        let here = tokio::spawn(async { HolderId::current() }).await.unwrap();
        let there = tokio::spawn(async { HolderId::current() }).await.unwrap();
        assert_ne!(here, there);
        assert!(matches!(here, HolderId::Task(_)));
        let thread = std::thread::spawn(HolderId::current).join().unwrap();
        assert!(matches!(thread, HolderId::Thread(_)));
    }

    #[tokio::test]
    async fn a_scope_acts_for_its_holder_even_in_a_task() {
        let thread = HolderId::Thread(std::thread::current().id());
        assert_eq!(tokio::spawn(thread.scope(async { HolderId::current() })).await.unwrap(), thread);
        assert_eq!(thread.sync_scope(HolderId::current), thread);
        assert!(matches!(tokio::spawn(async { HolderId::current() }).await.unwrap(), HolderId::Task(_)));
    }

    /// What makes an ended task's hold unreachable: no later task gets its id, even once the task
    /// ended and its handle was dropped (when tokio's docs allow reuse). Tokio takes ids from a
    /// 64-bit counter; an allocator-style id (a slab index, an address) would come back at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ended_tasks_ids_never_come_back() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20_000 {
            let id = tokio::spawn(async { HolderId::current() }).await.unwrap();
            assert!(seen.insert(id), "tokio reused the id of an ended task: {id:?}");
        }
        let mut seen_threads = std::collections::HashSet::new();
        for _ in 0..200 {
            let id = std::thread::spawn(HolderId::current).join().unwrap();
            assert!(seen_threads.insert(id), "a thread id came back: {id:?}");
        }
    }
}
