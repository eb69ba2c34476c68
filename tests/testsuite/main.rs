//! The integration tests: one test binary, one module per subject. A test that needs *a* ZooKeeper
//! takes the run's shared one (`support::server()`: `ZK_CONNECT`, which `.ci/test` sets, each test
//! in a chroot of its own), or starts a real one when none is shared; a test that stops, restarts
//! or pauses its server, or needs its settings, starts its own (`support::owned_server()`).
//!
//! Run one subject with a filter, e.g. `cargo nextest run --all-features --test testsuite
//! local_queue::`. The `metrics` feature's tests are binaries of their own (tests/metrics/,
//! tests/metrics_late_recorder.rs): they install the process-wide metrics recorder.

mod support;

mod atomic;
mod barriers;
mod blocking;
mod cache;
mod claims;
#[cfg(feature = "cli")]
mod cli;
mod curator_interop;
mod data_api;
#[cfg(feature = "discovery")]
mod discovery;
mod documentation;
mod feeds;
mod framework;
mod harness;
mod idempotency;
mod inspect;
mod leader;
mod local_queue;
mod module_paths;
mod mutex;
mod nodes;
mod nonfair_mutex;
mod public_api;
mod queue;
mod recipe_programs;
mod security;
mod siblings;
mod suite_build;
mod time_limits;
