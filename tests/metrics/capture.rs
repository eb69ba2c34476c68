//! A `metrics` recorder for the tests, installed once per test binary, that keeps every value:
//! counters, gauges and every histogram sample, by metric name and labels.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Once};

use metrics::{Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};
use parking_lot::Mutex;

// ---------------------------------------------------------------------------------------------
// a recorder that keeps every value
// ---------------------------------------------------------------------------------------------

/// A series: the metric name and its labels.
pub type Series = (String, BTreeMap<String, String>);

#[derive(Default)]
pub struct Capture {
    counters: Mutex<HashMap<Series, Arc<CounterCell>>>,
    gauges: Mutex<HashMap<Series, Arc<GaugeCell>>>,
    histograms: Mutex<HashMap<Series, Arc<Samples>>>,
    described: Mutex<HashMap<String, Option<Unit>>>,
}

#[derive(Default)]
pub struct CounterCell(AtomicU64);

impl CounterFn for CounterCell {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::SeqCst);
    }
}

#[derive(Default)]
pub struct GaugeCell(Mutex<f64>);

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

#[derive(Default)]
pub struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().push(value);
    }
}

pub fn series(key: &Key) -> Series {
    let labels = key.labels().map(|l| (l.key().to_string(), l.value().to_string())).collect();
    (key.name().to_string(), labels)
}

static CAPTURE: LazyLock<Capture> = LazyLock::new(Capture::default);

/// The units each metric was described with, by name.
pub fn described_units() -> HashMap<String, Option<Unit>> {
    CAPTURE.described.lock().clone()
}

/// The global recorder: every handle it gives out writes into [`CAPTURE`].
pub struct Recorder;

impl metrics::Recorder for Recorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        CAPTURE.described.lock().insert(key.as_str().to_string(), unit);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        CAPTURE.described.lock().insert(key.as_str().to_string(), unit);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        CAPTURE.described.lock().insert(key.as_str().to_string(), unit);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(CAPTURE.counters.lock().entry(series(key)).or_default().clone())
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(CAPTURE.gauges.lock().entry(series(key)).or_default().clone())
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(CAPTURE.histograms.lock().entry(series(key)).or_default().clone())
    }
}

/// Installs the recorder (once per test binary); call before making clients.
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| metrics::set_global_recorder(Recorder).expect("no other global recorder"));
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The samples of the histogram `name` with exactly these labels.
pub fn samples(name: &str, pairs: &[(&str, &str)]) -> Vec<f64> {
    let series = (name.to_string(), labels(pairs));
    CAPTURE.histograms.lock().get(&series).map(|s| s.0.lock().clone()).unwrap_or_default()
}

pub fn count(name: &str, pairs: &[(&str, &str)]) -> usize {
    samples(name, pairs).len()
}

/// The counter `name` with exactly these labels.
pub fn counter(name: &str, pairs: &[(&str, &str)]) -> u64 {
    let series = (name.to_string(), labels(pairs));
    CAPTURE.counters.lock().get(&series).map_or(0, |c| c.0.load(Ordering::SeqCst))
}

/// The gauge `name` with exactly these labels.
pub fn gauge(name: &str, pairs: &[(&str, &str)]) -> f64 {
    let series = (name.to_string(), labels(pairs));
    CAPTURE.gauges.lock().get(&series).map_or(0.0, |g| *g.0.lock())
}

/// Every series (of every metric) whose `path` label is `path`, with its number of values
/// (samples, counter value, or the gauge's value for gauges).
pub fn series_of_path(path: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let of_path =
        |(name, labels): &Series| labels.get("path").is_some_and(|p| p == path).then(|| (name.clone(), labels.clone()));
    let mut all = Vec::new();
    for (s, h) in CAPTURE.histograms.lock().iter() {
        all.extend(of_path(s).map(|(n, l)| (n, l, h.0.lock().len() as f64)));
    }
    for (s, c) in CAPTURE.counters.lock().iter() {
        all.extend(of_path(s).map(|(n, l)| (n, l, c.0.load(Ordering::SeqCst) as f64)));
    }
    for (s, g) in CAPTURE.gauges.lock().iter() {
        all.extend(of_path(s).map(|(n, l)| (n, l, *g.0.lock())));
    }
    all.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    all
}
