//! Metrics on the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`); see
//! [docs/observability.md](crate::guide::observability) for the names, types, labels and units.
//!
//! The recipes call the same functions with or without the feature: without it every type here is
//! empty (or holds only what `tracing` uses anyway) and every function is an inline no-op, so no
//! metrics code and no `metrics` dependency is compiled.
//!
//! Where the library records:
//! * acquires: [`measure_acquire`] around [`LockInternals::attempt_lock`](crate::locks::internals)
//!   (every recipe but the semaphore) and around a semaphore's whole lease acquire (its internal
//!   mutex and its lease, one sample per lease);
//! * holds: [`HoldMeter`], owned by each [`Hold`](crate::locks::Hold), ended once when the hold becomes
//!   `Lost` (released or lost) or is dropped;
//! * connection states: [`connection_state`], where the session supervisor publishes them;
//! * the other families, through each instance's [`RecipeLabels`]: a cache's tree as it applies
//!   events and full loads, a node recipe's task as it has its node, an atomic's `apply`, a shared
//!   value's writes, barrier waits ([`BarrierTimer`]), work claims' claim/complete/release/reclaim,
//!   idempotency keys' `begin`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, Instrument};

use crate::error::Result;
use crate::framework::ConnectionState;

/// `zk_curator_acquire_wait_seconds`: histogram of the time an acquire waited, by `outcome`.
#[cfg(feature = "metrics")]
const ACQUIRE_WAIT_SECONDS: &str = "zk_curator_acquire_wait_seconds";
/// `zk_curator_hold_seconds`: histogram of how long holds lasted, recorded when a hold ends.
#[cfg(feature = "metrics")]
const HOLD_SECONDS: &str = "zk_curator_hold_seconds";
/// `zk_curator_holds_lost_total`: counter of holds lost (not released), by `cause`.
#[cfg(feature = "metrics")]
const HOLDS_LOST_TOTAL: &str = "zk_curator_holds_lost_total";
/// `zk_curator_waiters`: gauge of the acquires waiting in this process.
#[cfg(feature = "metrics")]
const WAITERS: &str = "zk_curator_waiters";
/// `zk_curator_connection_state_changes_total`: counter of connection state changes, by `state`.
#[cfg(feature = "metrics")]
const CONNECTION_STATE_CHANGES_TOTAL: &str = "zk_curator_connection_state_changes_total";

/// `zk_curator_cache_nodes`: gauge of the nodes a cache holds.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const CACHE_NODES: &str = "zk_curator_cache_nodes";
/// `zk_curator_cache_events_total`: counter of the changes a cache applied, by `event`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const CACHE_EVENTS_TOTAL: &str = "zk_curator_cache_events_total";
/// `zk_curator_cache_resyncs_total`: counter of a cache's full reloads after its first.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const CACHE_RESYNCS_TOTAL: &str = "zk_curator_cache_resyncs_total";
/// `zk_curator_node_creates_total`: counter of a node recipe's creates of its node, by `kind`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const NODE_CREATES_TOTAL: &str = "zk_curator_node_creates_total";
/// `zk_curator_counter_operations_total`: counter of counter operations, by `outcome`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const COUNTER_OPERATIONS_TOTAL: &str = "zk_curator_counter_operations_total";
/// `zk_curator_counter_attempts_total`: counter of the writes counter operations tried, by `kind`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const COUNTER_ATTEMPTS_TOTAL: &str = "zk_curator_counter_attempts_total";
/// `zk_curator_barrier_wait_seconds`: histogram of barrier waits, by `phase` and `outcome`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const BARRIER_WAIT_SECONDS: &str = "zk_curator_barrier_wait_seconds";
/// `zk_curator_claims_total`: counter of work-claim and idempotency-key claims, by `outcome`.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
const CLAIMS_TOTAL: &str = "zk_curator_claims_total";

/// The labels of one recipe instance of the families other than locks and leaders (caches,
/// nodes, counters, barriers, claims, idempotency keys): `recipe` and `path` (through the
/// client's [`PathLabel`]), made once at construction. Empty without the feature.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecipeLabels {
    #[cfg(feature = "metrics")]
    labels: Option<Arc<[::metrics::Label]>>,
}

impl RecipeLabels {
    /// The labels of a recipe `recipe` (the label value) on `path` (as the caller gave it,
    /// without namespace), by [`CuratorClient::recipe_labels`](crate::CuratorClient).
    #[cfg(feature = "metrics")]
    pub(crate) fn new(path_label: &PathLabel, recipe: &'static str, path: &str) -> RecipeLabels {
        let mut labels = vec![::metrics::Label::from_static_parts("recipe", recipe)];
        if let Some(value) = path_label.value(path) {
            labels.push(::metrics::Label::new("path", value));
        }
        RecipeLabels { labels: Some(Arc::from(labels)) }
    }

    #[cfg(not(feature = "metrics"))]
    #[inline(always)]
    pub(crate) fn new(_: &'static str, _: &str) -> RecipeLabels {
        RecipeLabels {}
    }

    #[cfg(feature = "metrics")]
    fn with(&self, extra: Option<(&'static str, &'static str)>) -> Option<Vec<::metrics::Label>> {
        let labels = self.labels.as_ref()?;
        let mut all = Vec::with_capacity(labels.len() + 1);
        all.extend(labels.iter().cloned());
        if let Some((key, value)) = extra {
            all.push(::metrics::Label::from_static_parts(key, value));
        }
        Some(all)
    }

    #[inline]
    fn count(&self, _name: &'static str, _extra: Option<(&'static str, &'static str)>) {
        #[cfg(feature = "metrics")]
        if let Some(labels) = self.with(_extra) {
            ::metrics::counter!(_name, labels).increment(1);
        }
    }

    /// A cache applied a change (`event`: `created`, `changed`, `deleted`).
    #[inline]
    pub(crate) fn cache_event(&self, event: &'static str) {
        self.count(CACHE_EVENTS_TOTAL, Some(("event", event)));
    }

    /// A cache holds `nodes` now; `reported` is what it last added to the gauge. The gauge moves
    /// by the difference rather than being set: caches sharing the label values (the same path
    /// twice, or in two namespaces) add up, and a closed cache takes its nodes back out (0).
    #[inline]
    pub(crate) fn cache_size(&self, reported: &std::sync::atomic::AtomicUsize, nodes: usize) {
        let _before = reported.swap(nodes, std::sync::atomic::Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(labels) = &self.labels {
            let gauge = ::metrics::gauge!(CACHE_NODES, labels.iter());
            if nodes >= _before {
                gauge.increment((nodes - _before) as f64);
            } else {
                gauge.decrement((_before - nodes) as f64);
            }
        }
    }

    /// A cache reloaded everything again (after a reconnect or a new session).
    #[inline]
    pub(crate) fn cache_resync(&self) {
        self.count(CACHE_RESYNCS_TOTAL, None);
    }

    /// A node recipe created its node: `kind` `initial` (its first) or `recreated` (after it
    /// was deleted or its session ended).
    #[inline]
    pub(crate) fn node_created(&self, kind: &'static str) {
        self.count(NODE_CREATES_TOTAL, Some(("kind", kind)));
    }

    /// A counter operation ended: `outcome` `succeeded`, `failed` (gave up: another writer kept
    /// winning, or a conditional set lost) or `error`.
    #[inline]
    pub(crate) fn counter_operation(&self, outcome: &'static str) {
        self.count(COUNTER_OPERATIONS_TOTAL, Some(("outcome", outcome)));
    }

    /// A counter operation tried one write: `kind` `optimistic` or `locked` (under the
    /// promoted lock).
    #[inline]
    pub(crate) fn counter_attempts(&self, kind: &'static str, _attempts: u64) {
        #[cfg(feature = "metrics")]
        if let Some(labels) = self.with(Some(("kind", kind))) {
            ::metrics::counter!(COUNTER_ATTEMPTS_TOTAL, labels).increment(_attempts);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = kind;
    }

    /// A queue added `n` items (their node was made; each item of a `put_multi` node counts).
    #[inline]
    pub(crate) fn queue_offered(&self, _n: u64) {
        #[cfg(feature = "metrics")]
        if let (Some(labels), true) = (&self.labels, _n > 0) {
            ::metrics::counter!(QUEUE_OFFERS_TOTAL, labels.iter()).increment(_n);
        }
    }

    /// A queue took an item and handed it to a caller.
    #[inline]
    pub(crate) fn queue_taken(&self) {
        #[cfg(feature = "metrics")]
        if let Some(labels) = &self.labels {
            ::metrics::counter!(QUEUE_TAKES_TOTAL, labels.iter()).increment(1);
        }
    }

    /// A barrier wait (`phase` `wait`, `enter` or `leave`) ended with `outcome` (`passed`,
    /// `timed_out`, `error`, or `cancelled` by [`BarrierTimer`]'s drop) after `waited`.
    #[inline]
    pub(crate) fn barrier_wait(&self, _phase: &'static str, _outcome: &'static str, _waited: Duration) {
        #[cfg(feature = "metrics")]
        if let Some(mut labels) = self.with(Some(("phase", _phase))) {
            labels.push(::metrics::Label::from_static_parts("outcome", _outcome));
            ::metrics::histogram!(BARRIER_WAIT_SECONDS, labels).record(_waited.as_secs_f64());
        }
    }

    /// `n` claims (work claims, idempotency keys) went `outcome`.
    #[inline]
    pub(crate) fn claims(&self, outcome: &'static str, _n: usize) {
        #[cfg(feature = "metrics")]
        if let Some(labels) = self.with(Some(("outcome", outcome))) {
            ::metrics::counter!(CLAIMS_TOTAL, labels).increment(_n as u64);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = outcome;
    }
}

/// One barrier wait in flight: recorded once, by [`finish`](Self::finish) or as `cancelled` by
/// its drop (so a dropped wait is counted too).
pub(crate) struct BarrierTimer<'a> {
    labels: &'a RecipeLabels,
    phase: &'static str,
    start: Instant,
    finished: bool,
}

impl<'a> BarrierTimer<'a> {
    #[inline]
    pub(crate) fn start(labels: &'a RecipeLabels, phase: &'static str) -> BarrierTimer<'a> {
        BarrierTimer { labels, phase, start: Instant::now(), finished: false }
    }

    /// Records the wait: `passed` when `result` is `Ok(true)`, `timed_out` for `Ok(false)`,
    /// `error` otherwise.
    #[inline]
    pub(crate) fn finish(mut self, result: &Result<bool>) {
        self.finished = true;
        let outcome = match result {
            Ok(true) => "passed",
            Ok(false) => "timed_out",
            Err(_) => "error",
        };
        self.labels.barrier_wait(self.phase, outcome, self.start.elapsed());
    }
}

impl Drop for BarrierTimer<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.labels.barrier_wait(self.phase, "cancelled", self.start.elapsed());
        }
    }
}
/// `zk_curator_discovery_registrations_total`: counter of service instances registered (a node
/// made for a new registration), by `service`.
#[cfg(feature = "metrics")]
const DISCOVERY_REGISTRATIONS_TOTAL: &str = "zk_curator_discovery_registrations_total";
/// `zk_curator_discovery_cache_instances`: gauge of the instances a `ServiceCache` holds, by
/// `service` (set at each change of the cache).
#[cfg(feature = "metrics")]
const DISCOVERY_CACHE_INSTANCES: &str = "zk_curator_discovery_cache_instances";
/// `zk_curator_discovery_lookups_total`: counter of `ServiceProvider::get_instance` calls, by
/// `service` and `outcome` (`found`, `none`).
#[cfg(feature = "metrics")]
const DISCOVERY_LOOKUPS_TOTAL: &str = "zk_curator_discovery_lookups_total";
/// `zk_curator_queue_offers_total`: counter of items a queue of this process added, by `recipe`, `path`.
#[cfg(feature = "metrics")]
const QUEUE_OFFERS_TOTAL: &str = "zk_curator_queue_offers_total";
/// `zk_curator_queue_takes_total`: counter of items a queue of this process took, by `recipe`, `path`.
#[cfg(feature = "metrics")]
const QUEUE_TAKES_TOTAL: &str = "zk_curator_queue_takes_total";

/// The recipe a lock belongs to: the `recipe` label of the metrics and field of the spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recipe {
    /// [`InterProcessMutex`](crate::locks::InterProcessMutex) (any driver given to `with_driver`, and the
    /// locks of an [`InterProcessMultiLock`](crate::locks::InterProcessMultiLock) made from paths).
    Mutex,
    /// The read half of an [`InterProcessReadWriteLock`](crate::locks::InterProcessReadWriteLock).
    Read,
    /// The write half of an [`InterProcessReadWriteLock`](crate::locks::InterProcessReadWriteLock).
    Write,
    /// [`InterProcessSemaphoreV2`](crate::locks::InterProcessSemaphoreV2).
    Semaphore,
    /// [`InterProcessSemaphoreMutex`](crate::locks::InterProcessSemaphoreMutex).
    SemaphoreMutex,
    /// [`InterProcessNonFairMutex`](crate::locks::InterProcessNonFairMutex).
    NonFairMutex,
    /// [`LeaderLatch`](crate::leader::LeaderLatch).
    Latch,
    /// [`LeaderSelector`](crate::leader::LeaderSelector).
    Selector,
}

impl Recipe {
    /// The label value.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex",
            Recipe::Read => "read",
            Recipe::Write => "write",
            Recipe::Semaphore => "semaphore",
            Recipe::SemaphoreMutex => "semaphore_mutex",
            Recipe::NonFairMutex => "nonfair_mutex",
            Recipe::Latch => "latch",
            Recipe::Selector => "selector",
        }
    }
}

/// How an acquire ended: the `outcome` label and span field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired,
    /// Not acquired within the wait (a timeout, or a one-attempt try that found the lock taken).
    TimedOut,
    /// The acquire future was dropped before it ended.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    Cancelled,
    Error,
}

impl Outcome {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
        }
    }

    fn of<T>(result: &Result<Option<T>>) -> Outcome {
        match result {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) => Outcome::TimedOut,
            Err(_) => Outcome::Error,
        }
    }
}

/// Why a hold was lost: the `cause` label of `zk_curator_holds_lost_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// The server ended the hold's session (expired it).
    SessionExpired,
    /// The client gave the session up while suspended (LOST before the server could expire it).
    SessionGivenUp,
    /// Someone deleted the hold's node.
    NodeDeleted,
    /// The client was closed while the hold was held.
    ClientClosed,
}

impl LossCause {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            LossCause::SessionExpired => "session_expired",
            LossCause::SessionGivenUp => "session_given_up",
            LossCause::NodeDeleted => "node_deleted",
            LossCause::ClientClosed => "client_closed",
        }
    }
}

/// The labels of one lock, made once when the lock is constructed: its recipe, its path (for the
/// spans), and with the feature the label set itself (the `path` label through the client's
/// [`PathLabel`]). `record` false: an internal lock (a semaphore's turn mutex), traced but never
/// recorded.
#[derive(Clone, Debug)]
pub(crate) struct LockLabels {
    recipe: Recipe,
    path: Arc<str>,
    #[cfg(feature = "metrics")]
    labels: Option<Arc<[::metrics::Label]>>,
}

impl LockLabels {
    /// The labels of a lock of `recipe` on `path` (as the caller gave it, without namespace), made
    /// by [`CuratorClient::lock_labels`](crate::CuratorClient) with the client's path label. The
    /// path label function only ever sees valid paths (the recipe's constructor fails on the
    /// others).
    pub(crate) fn new(#[cfg(feature = "metrics")] path_label: &PathLabel, recipe: Recipe, path: &str) -> LockLabels {
        #[cfg(feature = "metrics")]
        let labels = crate::framework::paths::validate_path(path).is_ok().then(|| {
            let mut labels = vec![::metrics::Label::from_static_parts("recipe", recipe.as_str())];
            if let Some(value) = path_label.value(path) {
                labels.push(::metrics::Label::new("path", value));
            }
            Arc::from(labels)
        });
        LockLabels {
            recipe,
            path: Arc::from(path),
            #[cfg(feature = "metrics")]
            labels,
        }
    }

    /// Like [`new`](Self::new), for a lock that is part of another recipe's acquire (which is
    /// measured as a whole): traced under `recipe` and `path`, never recorded.
    pub(crate) fn internal(recipe: Recipe, path: &str) -> LockLabels {
        LockLabels {
            recipe,
            path: Arc::from(path),
            #[cfg(feature = "metrics")]
            labels: None,
        }
    }

    pub(crate) fn recipe(&self) -> Recipe {
        self.recipe
    }

    /// The lock path the spans name (the user's path, also for a semaphore's inner nodes).
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// [`path`](Self::path), shared: a lock on the same path keeps it once, not once more.
    pub(crate) fn shared_path(&self) -> &Arc<str> {
        &self.path
    }

    /// The meter of a hold granted now.
    #[inline]
    pub(crate) fn hold_meter(&self) -> HoldMeter {
        HoldMeter {
            #[cfg(feature = "metrics")]
            recorded: self.labels.clone().map(|labels| (labels, Instant::now(), std::sync::Once::new())),
        }
    }
}

/// Runs one acquire, `attempt`, in an `acquire` span (fields `recipe`, `path`, `lock`) and
/// measures it: the waiter gauge is up while it runs, and its wait time is recorded with its
/// outcome when it ends — `cancelled` when the future is dropped first (a drop guard, so this is
/// cancel safe). The end is logged at debug level with `outcome` and `wait_seconds`.
pub(crate) async fn measure_acquire<T>(
    labels: &LockLabels,
    lock: &str,
    node: impl Fn(&T) -> &str,
    attempt: impl Future<Output = Result<Option<T>>>,
) -> Result<Option<T>> {
    let span = tracing::debug_span!("acquire", recipe = labels.recipe.as_str(), path = %labels.path, lock);
    let timer = AcquireTimer::start(labels);
    let result = attempt.instrument(span.clone()).await;
    let outcome = Outcome::of(&result);
    let wait_seconds = timer.finish(outcome).as_secs_f64();
    let _enter = span.enter();
    let outcome = outcome.as_str();
    match &result {
        Ok(Some(acquired)) => debug!(outcome, wait_seconds, node = %node(acquired), "acquired"),
        Ok(None) => debug!(outcome, wait_seconds, "not acquired"),
        Err(e) => debug!(outcome, wait_seconds, %e, "acquire failed"),
    }
    result
}

/// One acquire in flight: the waiter gauge is up from [`start`](Self::start) to its drop; the
/// wait is recorded once, by [`finish`](Self::finish) or as `cancelled` by the drop.
struct AcquireTimer {
    start: Instant,
    #[cfg(feature = "metrics")]
    labels: Option<Arc<[::metrics::Label]>>,
    /// The gauge handle the start incremented: the drop decrements the same one, so a recorder
    /// installed (or swapped) while the acquire waits never sees a decrement without its increment.
    #[cfg(feature = "metrics")]
    waiters: Option<::metrics::Gauge>,
    #[cfg(feature = "metrics")]
    finished: bool,
}

impl AcquireTimer {
    #[inline]
    fn start(labels: &LockLabels) -> AcquireTimer {
        #[cfg(not(feature = "metrics"))]
        let _ = labels;
        #[cfg(feature = "metrics")]
        let waiters = labels.labels.as_ref().map(|labels| {
            let waiters = ::metrics::gauge!(WAITERS, labels.iter());
            waiters.increment(1.0);
            waiters
        });
        AcquireTimer {
            start: Instant::now(),
            #[cfg(feature = "metrics")]
            labels: labels.labels.clone(),
            #[cfg(feature = "metrics")]
            waiters,
            #[cfg(feature = "metrics")]
            finished: false,
        }
    }

    /// Records the wait with `outcome`; returns how long it was.
    #[inline]
    fn finish(mut self, outcome: Outcome) -> Duration {
        let waited = self.start.elapsed();
        self.record(outcome, waited);
        waited
    }

    #[cfg(feature = "metrics")]
    fn record(&mut self, outcome: Outcome, waited: Duration) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if let Some(labels) = &self.labels {
            let mut with_outcome = Vec::with_capacity(labels.len() + 1);
            with_outcome.extend(labels.iter().cloned());
            with_outcome.push(::metrics::Label::from_static_parts("outcome", outcome.as_str()));
            ::metrics::histogram!(ACQUIRE_WAIT_SECONDS, with_outcome).record(waited.as_secs_f64());
        }
    }

    #[cfg(not(feature = "metrics"))]
    #[inline(always)]
    fn record(&mut self, _: Outcome, _: Duration) {}
}

#[cfg(feature = "metrics")]
impl Drop for AcquireTimer {
    fn drop(&mut self) {
        let waited = self.start.elapsed();
        self.record(Outcome::Cancelled, waited);
        if let Some(waiters) = &self.waiters {
            waiters.decrement(1.0);
        }
    }
}

/// The metrics of one hold: its labels and when it was granted. Ended once, by [`end`](Self::end)
/// — which records the hold time, and counts a loss when the hold did not end by its release.
/// Empty without the feature.
#[derive(Debug)]
pub(crate) struct HoldMeter {
    #[cfg(feature = "metrics")]
    recorded: Option<(Arc<[::metrics::Label]>, Instant, std::sync::Once)>,
}

impl HoldMeter {
    /// A meter that records nothing (a node the local queue shares: each local holder has its own).
    #[inline]
    pub(crate) fn unrecorded() -> HoldMeter {
        HoldMeter {
            #[cfg(feature = "metrics")]
            recorded: None,
        }
    }

    /// Ends the meter without recording anything: the hold was granted but never handed out (its
    /// waiter was gone, or it was given back unclaimed), so its acquire counts no hold — the
    /// acquire's wait is recorded as not acquired. Later calls of [`end`](Self::end) do nothing.
    #[inline]
    pub(crate) fn discard(&self) {
        #[cfg(feature = "metrics")]
        if let Some((_, _, ended)) = &self.recorded {
            ended.call_once(|| {});
        }
    }

    /// Ends the hold (once; later calls do nothing). `cause` tells why, `None` for a release; it
    /// is only asked for with the feature.
    #[inline]
    pub(crate) fn end(&self, cause: impl FnOnce() -> Option<LossCause>) {
        #[cfg(feature = "metrics")]
        if let Some((labels, since, ended)) = &self.recorded {
            // A `Once`, not a flag: a second caller (another thread seeing the hold lost at the
            // same moment) waits until the first has recorded, so whoever publishes `Lost` after
            // this call returns publishes it after the count.
            ended.call_once(|| {
                ::metrics::histogram!(HOLD_SECONDS, labels.iter()).record(since.elapsed().as_secs_f64());
                if let Some(cause) = cause() {
                    let mut with_cause = Vec::with_capacity(labels.len() + 1);
                    with_cause.extend(labels.iter().cloned());
                    with_cause.push(::metrics::Label::from_static_parts("cause", cause.as_str()));
                    ::metrics::counter!(HOLDS_LOST_TOTAL, with_cause).increment(1);
                }
            });
        }
        #[cfg(not(feature = "metrics"))]
        let _ = cause;
    }
}

/// Counts a published connection state.
#[inline]
pub(crate) fn connection_state(state: ConnectionState) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(CONNECTION_STATE_CHANGES_TOTAL, "state" => state.as_str()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = state;
}

/// Counts a service instance registered.
#[cfg(feature = "discovery")]
#[inline]
pub(crate) fn discovery_registered(service: &str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(DISCOVERY_REGISTRATIONS_TOTAL, "service" => service.to_string()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = service;
}

/// Sets the size of a service's cache.
#[cfg(feature = "discovery")]
#[inline]
pub(crate) fn discovery_cache_size(service: &str, instances: usize) {
    #[cfg(feature = "metrics")]
    ::metrics::gauge!(DISCOVERY_CACHE_INSTANCES, "service" => service.to_string()).set(instances as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (service, instances);
}

/// The lookup counters of one provider, made once: a pick costs an increment, no label lookup.
#[cfg(feature = "discovery")]
pub(crate) struct LookupMeter {
    #[cfg(feature = "metrics")]
    found: ::metrics::Counter,
    #[cfg(feature = "metrics")]
    none: ::metrics::Counter,
}

#[cfg(feature = "discovery")]
impl LookupMeter {
    pub(crate) fn new(service: &str) -> Self {
        #[cfg(feature = "metrics")]
        return Self {
            found: ::metrics::counter!(DISCOVERY_LOOKUPS_TOTAL, "service" => service.to_string(), "outcome" => "found"),
            none: ::metrics::counter!(DISCOVERY_LOOKUPS_TOTAL, "service" => service.to_string(), "outcome" => "none"),
        };
        #[cfg(not(feature = "metrics"))]
        {
            let _ = service;
            Self {}
        }
    }

    #[inline]
    pub(crate) fn record(&self, found: bool) {
        #[cfg(feature = "metrics")]
        if found { &self.found } else { &self.none }.increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = found;
    }
}

/// Describes the metrics (type, unit, help text) to the installed recorder; called for each new
/// client, so a recorder installed before the first client hears it.
#[inline]
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use ::metrics::Unit;
        ::metrics::describe_histogram!(
            ACQUIRE_WAIT_SECONDS,
            Unit::Seconds,
            "How long lock acquires waited, by recipe, path and outcome (acquired, timed_out, cancelled, error)"
        );
        ::metrics::describe_histogram!(
            HOLD_SECONDS,
            Unit::Seconds,
            "How long holds lasted (granted until released or lost), by recipe and path"
        );
        ::metrics::describe_counter!(
            HOLDS_LOST_TOTAL,
            Unit::Count,
            "Holds lost rather than released, by recipe, path and cause"
        );
        ::metrics::describe_gauge!(WAITERS, Unit::Count, "Lock acquires waiting in this process, by recipe and path");
        ::metrics::describe_gauge!(CACHE_NODES, Unit::Count, "Nodes a cache holds, by recipe and path");
        ::metrics::describe_counter!(
            CACHE_EVENTS_TOTAL,
            Unit::Count,
            "Changes a cache applied, by recipe, path and event (created, changed, deleted)"
        );
        ::metrics::describe_counter!(
            CACHE_RESYNCS_TOTAL,
            Unit::Count,
            "Full reloads of a cache after its first, by recipe and path"
        );
        ::metrics::describe_counter!(
            NODE_CREATES_TOTAL,
            Unit::Count,
            "Creates of a node recipe's node, by recipe, path and kind (initial, recreated)"
        );
        ::metrics::describe_counter!(
            COUNTER_OPERATIONS_TOTAL,
            Unit::Count,
            "Counter operations, by recipe, path and outcome (succeeded, failed, error)"
        );
        ::metrics::describe_counter!(
            COUNTER_ATTEMPTS_TOTAL,
            Unit::Count,
            "Writes counter operations tried, by recipe, path and kind (optimistic, locked)"
        );
        ::metrics::describe_histogram!(
            BARRIER_WAIT_SECONDS,
            Unit::Seconds,
            "How long barrier waits took, by recipe, path, phase and outcome"
        );
        ::metrics::describe_counter!(
            CLAIMS_TOTAL,
            Unit::Count,
            "Claims of work claims and idempotency keys, by recipe, path and outcome"
        );
        ::metrics::describe_counter!(
            QUEUE_OFFERS_TOTAL,
            Unit::Count,
            "Items this process's queues added, by recipe and path"
        );
        ::metrics::describe_counter!(
            QUEUE_TAKES_TOTAL,
            Unit::Count,
            "Items this process's queues took (removed and handed to a caller), by recipe and path"
        );
        ::metrics::describe_counter!(
            CONNECTION_STATE_CHANGES_TOTAL,
            Unit::Count,
            "Connection state changes of this process's clients, by state"
        );
        ::metrics::describe_counter!(
            DISCOVERY_REGISTRATIONS_TOTAL,
            Unit::Count,
            "Service instances registered by this process (a node made for a new registration), by service"
        );
        ::metrics::describe_gauge!(
            DISCOVERY_CACHE_INSTANCES,
            Unit::Count,
            "Instances held by this process's service caches, by service"
        );
        ::metrics::describe_counter!(
            DISCOVERY_LOOKUPS_TOTAL,
            Unit::Count,
            "Service provider picks (get_instance), by service and outcome (found, none)"
        );
    }
}

/// How a client turns lock paths into the `path` label; see
/// [`CuratorClientBuilder::metrics_path_label`](crate::CuratorClientBuilder::metrics_path_label).
#[cfg(feature = "metrics")]
#[derive(Clone, Default)]
pub(crate) enum PathLabel {
    /// The lock path as is.
    #[default]
    AsIs,
    /// The value the function gives for the lock path.
    Mapped(Arc<dyn Fn(&str) -> String + Send + Sync>),
    /// No `path` label.
    Omitted,
}

#[cfg(feature = "metrics")]
impl PathLabel {
    fn value(&self, path: &str) -> Option<String> {
        match self {
            PathLabel::AsIs => Some(path.to_string()),
            PathLabel::Mapped(label) => Some(label(path)),
            PathLabel::Omitted => None,
        }
    }
}

#[cfg(feature = "metrics")]
impl std::fmt::Debug for PathLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathLabel::AsIs => f.write_str("AsIs"),
            PathLabel::Mapped(_) => f.write_str("Mapped(<fn>)"),
            PathLabel::Omitted => f.write_str("Omitted"),
        }
    }
}
