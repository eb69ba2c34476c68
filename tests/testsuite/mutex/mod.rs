//! `InterProcessMutex`: Curator's own tests ported, the hold model (guards and Curator-style holds),
//! cancel safety, exclusion under faults and its state streams.

mod acquire_reenter_release;
mod cancel_safety;
mod connection_cuts;
mod curator_conformance;
mod exclusion_under_faults;
mod hold_model;
mod state_streams_and_ended_tasks;
