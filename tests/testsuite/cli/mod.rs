//! The `zk-curator` command line tool as real processes: `lock`, `hold`, `participants`, `elect`,
//! `watch`, `register`, `services`.

mod elect;
mod elect_process_groups;
mod lock_and_hold;
mod lock_edge_cases;
mod register;
mod watch;
