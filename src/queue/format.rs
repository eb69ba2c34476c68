//! Curator's queue item format (its `ItemSerializer`), and the serializer an item type goes
//! through.
//!
//! A queue node's data is one or more items: the version `0x00010001` as a big-endian `i32`, then
//! per item the opcode `0x01`, the item's length as a big-endian `i32` and its bytes, then the
//! opcode `0x02` (end). One item per node for [`put`](super::DistributedQueue::put), several for
//! [`put_multi`](super::DistributedQueue::put_multi).

/// The format version Curator writes and reads (it refuses any other).
const VERSION: i32 = 0x0001_0001;
const ITEM_OPCODE: u8 = 0x01;
const EOF_OPCODE: u8 = 0x02;

/// What each item adds to a node's data besides its bytes: the opcode and the length.
pub(crate) const PER_ITEM_OVERHEAD: usize = 5;
/// What a node's data holds besides its items: the version and the end opcode.
pub(crate) const NODE_OVERHEAD: usize = 5;

/// Turns a queue's items into bytes and back (Curator's `QueueSerializer`).
///
/// A serializer must be deterministic and total on the way out; on the way in, bytes it cannot
/// read are reported (as [`Error::MalformedData`](crate::Error::MalformedData) on the consumer's
/// stream), never a panic.
///
/// # Examples
/// ```
/// use zk_curator::queue::QueueSerializer;
///
/// struct Utf8;
/// impl QueueSerializer<String> for Utf8 {
///     fn serialize(&self, item: &String) -> Vec<u8> {
///         item.as_bytes().to_vec()
///     }
///     fn deserialize(&self, bytes: &[u8]) -> Result<String, String> {
///         String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
///     }
/// }
/// ```
pub trait QueueSerializer<T>: Send + Sync + 'static {
    /// The bytes of `item`.
    fn serialize(&self, item: &T) -> Vec<u8>;
    /// The item of `bytes`, or why they are not one.
    ///
    /// # Errors
    /// A description of what is wrong with `bytes`.
    fn deserialize(&self, bytes: &[u8]) -> Result<T, String>;
}

/// The default serializer: items are their bytes (`Vec<u8>`), as Curator's `byte[]` queues.
#[derive(Clone, Copy, Debug, Default)]
pub struct BytesSerializer;

impl QueueSerializer<Vec<u8>> for BytesSerializer {
    fn serialize(&self, item: &Vec<u8>) -> Vec<u8> {
        item.clone()
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        Ok(bytes.to_vec())
    }
}

/// One node's data holding `items` (already serialized), in Curator's format.
pub(crate) fn encode<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&VERSION.to_be_bytes());
    for item in items {
        out.push(ITEM_OPCODE);
        // The size was checked against the client's max data size (far below i32::MAX).
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out.push(EOF_OPCODE);
    out
}

/// The items of one node's data, or why it is not Curator's format.
pub(crate) fn decode(data: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut rest = data;
    let mut take = |n: usize, what: &str| -> Result<&[u8], String> {
        if rest.len() < n {
            return Err(format!("{} bytes: truncated {what}", data.len()));
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Ok(head)
    };
    let version = i32::from_be_bytes(take(4, "version")?.try_into().unwrap_or_default());
    if version != VERSION {
        return Err(format!("version {version:#x}, expected {VERSION:#x}"));
    }
    let mut items = Vec::new();
    loop {
        match take(1, "opcode")?[0] {
            EOF_OPCODE => break,
            ITEM_OPCODE => {}
            other => return Err(format!("opcode {other:#x}, expected {ITEM_OPCODE:#x} or {EOF_OPCODE:#x}")),
        }
        let size = i32::from_be_bytes(take(4, "item size")?.try_into().unwrap_or_default());
        let Ok(size) = usize::try_from(size) else {
            return Err(format!("negative item size {size}"));
        };
        items.push(take(size, "item")?);
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_in_curators_layout() {
        let data = encode([b"ab".as_slice(), b"".as_slice()]);
        assert_eq!(data, [0, 1, 0, 1, 1, 0, 0, 0, 2, b'a', b'b', 1, 0, 0, 0, 0, 2]);
        assert_eq!(decode(&data).unwrap(), [b"ab".as_slice(), b"".as_slice()]);
    }

    #[test]
    fn malformed_data_is_described_never_a_panic() {
        assert!(decode(b"").unwrap_err().contains("truncated version"));
        assert!(decode(&[0, 1, 0, 2, 2]).unwrap_err().contains("version"));
        assert!(decode(&[0, 1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff]).unwrap_err().contains("negative"));
        assert!(decode(&[0, 1, 0, 1, 1, 0x7f, 0xff, 0xff, 0xff]).unwrap_err().contains("truncated item"));
        assert!(decode(&[0, 1, 0, 1, 7]).unwrap_err().contains("opcode"));
        assert!(decode(&[0, 1, 0, 1]).unwrap_err().contains("truncated opcode"));
    }
}
