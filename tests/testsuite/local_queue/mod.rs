//! The per-process local queue (lock cohorting): the guards of one client on one lock path share one
//! node per turn and hand it on inside the process.

mod hand_offs;
mod properties;
mod timed_waiters;
mod turn_driver;
