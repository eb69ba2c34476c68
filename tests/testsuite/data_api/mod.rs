//! The data API of `CuratorClient`: every call against a real server, and its typed errors, deadlines
//! and watches under bad input and faults.

mod bad_input_and_faults;
mod calls;
mod connection_cuts;
mod namespaces;
mod spawnable;
