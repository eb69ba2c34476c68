//! The client and its session: builder, connection states, retries, protected creates, guaranteed
//! deletes, close, a start while ZooKeeper is down, the reconnect confirmation, sessions on a
//! read-only server, and when a suspended session is given up.

mod client;
mod deadline_errors;
mod read_only;
mod reconnect_confirmation;
mod session_loss;
mod startup;
