//! Layer 1: who holds a lock inside this process, and how many times (Curator's `threadData`).
//!
//! Curator keys ownership by `Thread`. Async tasks move between threads, so here the holder is the
//! current tokio task when there is one, else the current thread. Re-entering costs no ZooKeeper
//! round trip: it only bumps a counter.

use std::collections::HashMap;
use std::hash::Hash;

use parking_lot::Mutex;

/// The identity that owns a lock hold: a tokio task, or a thread outside any task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HolderId {
    /// The current tokio task.
    Task(tokio::task::Id),
    /// The current OS thread (code not running inside a tokio task).
    Thread(std::thread::ThreadId),
}

impl HolderId {
    /// The identity of the caller: its tokio task if inside one, else its thread.
    pub fn current() -> HolderId {
        match tokio::task::try_id() {
            Some(id) => HolderId::Task(id),
            None => HolderId::Thread(std::thread::current().id()),
        }
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
}
