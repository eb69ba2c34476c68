//! How large a request may be: ZooKeeper drops the connection of a client whose request is over
//! the server's `jute.maxbuffer`, suspending every recipe of that client, so the client refuses
//! such a request before sending it.

use crate::error::{Error, Result};

/// The default of [`CuratorClientBuilder::max_data_size`](crate::CuratorClientBuilder::max_data_size): 1 MiB − 4 KiB = 1,044,480 bytes.
///
/// A ZooKeeper server reads no request packet larger than its `jute.maxbuffer`, by default
/// `0xfffff` = 1,048,575 bytes (1 MiB − 1), and drops the connection of a client that sends one.
/// Of that, 4 KiB − 1 byte is left for the rest of the request besides the data: the headers
/// and length fields, the path, the ACL, and in a transaction the other operations.
pub const DEFAULT_MAX_DATA_SIZE: usize = 1024 * 1024 - 4096;

/// The one check of node data against a client's [`max_data_size`](crate::CuratorClientBuilder::max_data_size):
/// `len` bytes of the argument `name` for `what` (a path, or the name of the setting) must be at
/// most `max`.
pub(crate) fn check_data_size(max: usize, name: &'static str, what: &str, len: usize) -> Result<()> {
    if len <= max {
        return Ok(());
    }
    Err(Error::invalid_argument(
        name,
        format!("{len} bytes for {what} (at most {max})"),
        "larger than the client's max data size (a ZooKeeper server drops the connection of a request over its jute.maxbuffer)",
    ))
}

/// What a request may carry besides [`max_data_size`](crate::CuratorClientBuilder::max_data_size) bytes
/// of data: 4 KiB − 1 byte, so that with the default max data size a request is at most the
/// server's default `jute.maxbuffer`.
pub(crate) const REST_OF_REQUEST: usize = 4095;

/// What each operation of a request takes besides its data and its (namespace-fixed) path, as
/// counted against [`REST_OF_REQUEST`]: header, length fields, flags, the name a sequential or
/// protected create adds to its path, a default ACL.
pub(crate) const OPERATION_OVERHEAD: usize = 256;

/// The check of a whole request: `data_len` bytes of data (checked by [`check_data_size`]) and
/// `rest_len` bytes of paths and overhead together must be at most `max` + [`REST_OF_REQUEST`]
/// — a long path (or namespace), or a transaction of many operations, takes room the data
/// cannot have.
pub(crate) fn check_request_size(
    max: usize,
    name: &'static str,
    what: &str,
    data_len: usize,
    rest_len: usize,
) -> Result<()> {
    check_data_size(max, name, what, data_len)?;
    let limit = max.saturating_add(REST_OF_REQUEST);
    if data_len.saturating_add(rest_len) <= limit {
        return Ok(());
    }
    Err(Error::invalid_argument(
        name,
        format!("{data_len} bytes for {what} with {rest_len} bytes of paths and headers (at most {limit} together)"),
        "a request larger than the client's max data size + 4 KiB (a ZooKeeper server drops the connection of a request over its jute.maxbuffer)",
    ))
}
