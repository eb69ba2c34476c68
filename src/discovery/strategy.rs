//! How a [`ServiceProvider`](super::ServiceProvider) picks one instance: the
//! [`ProviderStrategy`] trait (Curator's `ProviderStrategy`) and Curator's three strategies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng;

use super::instance::ServiceInstance;

/// The instances a strategy picks from: those passing the provider's filters, sorted by node
/// name, with a generation that changes whenever the list does (so that a strategy can keep
/// state about one list, as [`StickyStrategy`] does, without comparing lists).
#[derive(Debug)]
pub struct Candidates<'a, T> {
    pub(crate) instances: &'a [Arc<ServiceInstance<T>>],
    pub(crate) generation: u64,
}

impl<'a, T> Candidates<'a, T> {
    /// The instances.
    pub fn instances(&self) -> &'a [Arc<ServiceInstance<T>>] {
        self.instances
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// Changes whenever the list changes (equal generations: the same list).
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// Picks one instance among the candidates (Curator's `ProviderStrategy`): the index of the
/// chosen one, `None` for none (Curator's `null`). Called on every
/// [`get_instance`](super::ServiceProvider::get_instance), from any thread: keep it cheap.
///
/// ```
/// use zk_curator::discovery::{Candidates, ProviderStrategy};
///
/// /// Always the oldest registration.
/// struct Oldest;
///
/// impl<T> ProviderStrategy<T> for Oldest {
///     fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
///         (0..candidates.len()).min_by_key(|&i| candidates.instances()[i].registration_time_utc())
///     }
/// }
/// ```
pub trait ProviderStrategy<T>: Send + Sync + 'static {
    /// The index of the chosen candidate, `None` for none.
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize>;
}

/// Each candidate in turn (Curator's `RoundRobinStrategy`, the default).
#[derive(Debug, Default)]
pub struct RoundRobinStrategy {
    next: AtomicUsize,
}

impl RoundRobinStrategy {
    /// A round robin from the first candidate.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<T> ProviderStrategy<T> for RoundRobinStrategy {
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        Some(self.next.fetch_add(1, Ordering::Relaxed) % candidates.len())
    }
}

/// A candidate at random (Curator's `RandomStrategy`).
#[derive(Debug, Default)]
pub struct RandomStrategy;

impl RandomStrategy {
    /// A random strategy.
    pub fn new() -> Self {
        Self
    }
}

impl<T> ProviderStrategy<T> for RandomStrategy {
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
        (!candidates.is_empty()).then(|| rand::thread_rng().gen_range(0..candidates.len()))
    }
}

/// The same instance as long as it is a candidate, else one chosen by another strategy
/// (Curator's `StickyStrategy`).
pub struct StickyStrategy<T> {
    master: Box<dyn ProviderStrategy<T>>,
    /// The instance stuck to (by id), and where it was in the list of that generation.
    ours: Mutex<Option<Stuck>>,
    picks: AtomicUsize,
}

struct Stuck {
    id: String,
    generation: u64,
    index: usize,
}

impl<T> std::fmt::Debug for StickyStrategy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StickyStrategy").field("instance_number", &self.instance_number()).finish()
    }
}

impl<T> StickyStrategy<T> {
    /// Sticks to the instances `master` chooses.
    pub fn new(master: impl ProviderStrategy<T>) -> Self {
        Self { master: Box::new(master), ours: Mutex::new(None), picks: AtomicUsize::new(0) }
    }

    /// How many times a new instance was chosen, minus one (Curator's `getInstanceNumber`: -1
    /// before the first).
    pub fn instance_number(&self) -> i64 {
        self.picks.load(Ordering::Relaxed) as i64 - 1
    }
}

impl<T: 'static> ProviderStrategy<T> for StickyStrategy<T> {
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
        let mut ours = self.ours.lock();
        if let Some(stuck) = ours.as_mut() {
            if stuck.generation == candidates.generation {
                return Some(stuck.index);
            }
            if let Some(index) = candidates.instances.iter().position(|i| i.id() == stuck.id) {
                stuck.generation = candidates.generation;
                stuck.index = index;
                return Some(index);
            }
        }
        let index = self.master.choose(candidates).filter(|&i| i < candidates.len());
        *ours = index.map(|index| Stuck {
            id: candidates.instances[index].id().to_string(),
            generation: candidates.generation,
            index,
        });
        if index.is_some() {
            self.picks.fetch_add(1, Ordering::Relaxed);
        }
        index
    }
}
