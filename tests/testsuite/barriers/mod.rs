//! Barriers (`DistributedBarrier`, `DistributedDoubleBarrier`) against a real server: rounds
//! after rounds on one path, wake-ups that must not let anyone through, a member's session loss,
//! cancelled and timed-out enters leaving nothing, deadlines, bad input, and real Curator
//! members on the same barriers.

mod barrier;
mod blocking_members;
mod curator_members;
mod double_barrier_abandoned_rounds;
mod double_barrier_faults;
mod double_barrier_leave_order;
mod double_barrier_lowest_leaving;
mod double_barrier_rounds;
