//! Leader election: `LeaderLatch`, `LeaderSelector` and their leadership streams, and Curator's known
//! leader-election failures reproduced.

mod curator_known_failures;
mod latch;
mod selector;
mod selector_edge_cases;
