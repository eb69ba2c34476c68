//! Curator's atomic counters and shared values (`DistributedAtomicLong` / `Integer` / `Value`,
//! `SharedCount` / `SharedValue`) against a real server: Curator's bytes, exact totals under
//! contention, compare-and-set, corrupted nodes, promotion to a lock, deadlines, a lost reply,
//! real Curator incrementing the same counter, a fault run (exactly once through faults), and the
//! value handed from one turn to the next (never to a call begun after someone remade the node).

mod counters;
mod exactly_once_under_faults;
mod hand_off;
mod shared_count;
