//! The `metrics` feature when the recorder is installed late (its own test binary: the global
//! recorder is installed once per process). A client made and an acquire started before any
//! recorder exists must not leave the waiter gauge off zero once a recorder is installed: an
//! acquire's gauge decrement goes where its increment went.
#![cfg(feature = "metrics")]

// The shared helpers of tests/testsuite; this binary uses only some of them.
#[allow(dead_code)]
#[path = "testsuite/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metrics::{Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use parking_lot::Mutex;
use zk_curator::locks::InterProcessMutex;

#[derive(Default)]
struct GaugeCell(Mutex<f64>);

impl GaugeFn for GaugeCell {
    fn increment(&self, value: f64) {
        *self.0.lock() += value;
    }
    fn decrement(&self, value: f64) {
        *self.0.lock() -= value;
    }
    fn set(&self, value: f64) {
        *self.0.lock() = value;
    }
}

type Gauges = Mutex<BTreeMap<(String, Vec<(String, String)>), Arc<GaugeCell>>>;

static GAUGES: std::sync::LazyLock<Gauges> = std::sync::LazyLock::new(Default::default);

/// Keeps gauges only.
struct Recorder;

impl metrics::Recorder for Recorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let labels = key.labels().map(|l| (l.key().to_string(), l.value().to_string())).collect();
        Gauge::from_arc(GAUGES.lock().entry((key.name().to_string(), labels)).or_default().clone())
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_waiting_when_the_recorder_is_installed_leaves_the_gauge_at_zero() {
    let server = support::server().await;
    let connect = server.connect_string();
    let (a, b) = (support::client(&connect).await, support::client(&connect).await);
    let path = support::unique_path("late-recorder");
    // No recorder yet: locking works and records nowhere.
    let ours = InterProcessMutex::new(&a, &path).unwrap();
    let held = ours.lock().await.unwrap();
    let theirs = InterProcessMutex::new(&b, &path).unwrap();
    let waiter = tokio::spawn(async move { theirs.try_lock_for(Duration::from_secs(2)).await });
    support::eventually(Duration::from_secs(10), "the waiter is queued", || async {
        ours.participant_nodes().await.unwrap().len() == 2
    })
    .await;
    metrics::set_global_recorder(Recorder).expect("the only recorder of this binary");
    let result = tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("ends").unwrap();
    assert!(result.unwrap().is_none(), "the lock stays held");
    held.release().await.unwrap();
    let key =
        ("zk_curator_waiters".to_string(), vec![("recipe".into(), "mutex".into()), ("path".into(), path.clone())]);
    let value = GAUGES.lock().get(&key).map_or(0.0, |g| *g.0.lock());
    assert_eq!(value, 0.0, "the waiter gauge of {path} after an acquire that spanned the install");
}
