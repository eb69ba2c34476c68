//! The mutex's siblings: the read-write lock (and its downgrade), the semaphores and the multi lock —
//! Curator's scenarios, lost holds and deadlines, and fault runs with a real Curator contender.

mod fault_runs_with_curator;
mod lost_holds_and_deadlines;
mod offline_deadlines_and_extreme_arguments;
mod read_write_lock;
mod semaphore;
