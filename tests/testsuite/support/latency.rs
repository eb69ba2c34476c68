//! Latency as one more fault of the fault runs: a proxied link delays each direction by its own
//! random amount (see `FaultProxy::set_latency`), to widen race windows (replies and watch events
//! arriving late, grants decided just before a suspension) instead of hoping to hit them.

use std::time::Duration;

use rand::Rng;
use zk_curator::testing::{Direction, FaultProxy, Latency};

/// Gives `proxy` a random latency per direction: each a uniform range between a few and
/// `most_ms` milliseconds, drawn from `rng` (so a run's seed replays the choice). Returns what
/// was set, to print.
///
/// Keep `most_ms` under 0.15 of the session timeout of a client whose `Lost` must come before
/// the server can expire its session: a reply delayed by d makes the client's `Lost` d later
/// (see docs/failure-semantics.md, "Timing guarantee").
pub fn set_random(proxy: &FaultProxy, rng: &mut impl Rng, most_ms: u64) -> [Latency; 2] {
    let mut draw = || {
        let high = rng.gen_range(most_ms / 4..=most_ms);
        let low = rng.gen_range(0..=high / 2);
        Latency::uniform(Duration::from_millis(low), Duration::from_millis(high))
    };
    let set = [draw(), draw()];
    proxy.set_direction_latency(Direction::ToServer, set[0]);
    proxy.set_direction_latency(Direction::ToClient, set[1]);
    set
}

/// Latency of a fault run's phase, as printed: `to server 12..80 ms, to client 3..190 ms`.
pub fn describe(set: &[Latency; 2]) -> String {
    let range = |l: &Latency| format!("{}..{} ms", l.min().as_millis(), l.max().as_millis());
    format!("to server {}, to client {}", range(&set[0]), range(&set[1]))
}
