//! `inspect` (the library call and `zk-curator inspect`): every lock under a path with its holders and
//! waiters, and trees and input made to break it.

mod discovery;
mod hostile_trees_and_input;
mod lock_kinds;
mod queues;
