//! Curator's atomic counters and shared values (`DistributedAtomicLong` / `Integer` / `Value`,
//! `SharedCount` / `SharedValue`) against a real server: Curator's bytes, exact totals under
//! contention, compare-and-set, corrupted nodes, promotion to a lock, deadlines, a lost reply,
//! and real Curator incrementing the same counter.

mod counters;
mod shared_count;
