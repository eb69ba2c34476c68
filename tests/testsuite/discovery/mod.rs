//! Service discovery (`zk_curator::discovery`, Curator's `curator-x-discovery`), against a real
//! ZooKeeper and, for interop, real Curator 5.4.

mod blocking_facade;
mod cache;
mod faults;
mod interop;
mod path_constructor;
mod provider;
mod registration;
mod wire_format;

use std::time::Duration;

/// A hang guard, never a performance bound.
const WITHIN: Duration = Duration::from_secs(20);
