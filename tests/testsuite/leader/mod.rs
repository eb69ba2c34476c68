//! Leader election: `LeaderLatch`, `LeaderSelector` and their leadership streams, and Curator's known
//! leader-election failures reproduced, and the connection-state error policy.

mod connection_state_error_policy;
mod curator_known_failures;
mod latch;
mod selector;
mod selector_edge_cases;
