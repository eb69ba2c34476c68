//! The data API of `CuratorClient`: every call against a real server, and its typed errors, deadlines
//! and watches under bad input and faults.

mod acl_sync_and_watch_removal;
mod bad_input_and_faults;
mod calls;
mod compression;
mod connection_cuts;
mod curator_interop;
mod namespaces;
mod spawnable;
