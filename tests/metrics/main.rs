//! The `metrics` feature's tests, a binary of their own: they install the process-wide metrics
//! recorder (`capture`), which no other test may share. Each test uses its own lock paths, so
//! tests that share the recorder (one process under `cargo test`) do not see each other's series.
#![cfg(feature = "metrics")]

mod capture;
// The shared helpers of tests/testsuite; this binary uses only some of them.
#[allow(dead_code)]
#[path = "../testsuite/support/mod.rs"]
mod support;

mod counted_once;
mod exact_values;
mod families;
mod local_queue;
