//! The client and its session: builder, connection states, retries, protected creates, guaranteed
//! deletes, close, a start while ZooKeeper is down, and the reconnect confirmation.

mod client;
mod reconnect_confirmation;
mod startup;
