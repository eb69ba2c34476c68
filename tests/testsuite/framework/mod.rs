//! The client and its session: builder, connection states, retries, protected creates, guaranteed
//! deletes, close, a start while ZooKeeper is down, the reconnect confirmation, and sessions on a
//! read-only server.

mod client;
mod deadline_errors;
mod read_only;
mod reconnect_confirmation;
mod startup;
