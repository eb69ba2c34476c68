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
/// On the way out, an item the serializer refuses fails its put with
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the queue path, and nothing
/// of that put is written. On the way in, bytes it cannot read are reported (as
/// [`Error::MalformedData`](crate::Error::MalformedData) on the consumer's stream), never a panic.
/// An item put back (requeued, or taken and never handed out) is written again with the bytes it
/// was read with, not serialized again.
///
/// With feature `serde`, [`JsonSerializer`] puts any `Serialize + DeserializeOwned` type as JSON.
///
/// # Examples
/// ```
/// use zk_curator::queue::QueueSerializer;
///
/// struct Utf8;
/// impl QueueSerializer<String> for Utf8 {
///     fn serialize(&self, item: &String) -> Result<Vec<u8>, String> {
///         Ok(item.as_bytes().to_vec())
///     }
///     fn deserialize(&self, bytes: &[u8]) -> Result<String, String> {
///         String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
///     }
/// }
/// ```
pub trait QueueSerializer<T>: Send + Sync + 'static {
    /// The bytes of `item`.
    ///
    /// # Errors
    /// Why `item` cannot be written (its put fails naming the queue path and this reason).
    fn serialize(&self, item: &T) -> Result<Vec<u8>, String>;
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
    fn serialize(&self, item: &Vec<u8>) -> Result<Vec<u8>, String> {
        Ok(item.clone())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        Ok(bytes.to_vec())
    }
}

/// Items as JSON (`serde_json`): any `T: Serialize + DeserializeOwned`. A Java service sharing
/// the queue reads them with a serializer of its own that parses JSON (Jackson's `ObjectMapper`,
/// say); the bytes sit inside Curator's item format like any other serializer's.
///
/// An item `serde_json` cannot write (a map whose keys are not strings, a `Serialize` impl that
/// fails) fails its put naming the queue path; data that is not JSON of `T` is reported on the
/// consumer's stream as malformed.
///
/// # Examples
/// ```no_run
/// # async fn demo(client: &zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// use zk_curator::queue::{DistributedQueue, JsonSerializer, QueueBuilder};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Job {
///     id: u64,
///     url: String,
/// }
///
/// let queue: DistributedQueue<Job> =
///     QueueBuilder::with_serializer(client, "/jobs", JsonSerializer::new()).build()?;
/// queue.put(Job { id: 1, url: "https://example.com".into() }).await?;
/// # Ok(()) }
/// ```
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub struct JsonSerializer<T>(std::marker::PhantomData<fn() -> T>);

#[cfg(feature = "serde")]
impl<T> JsonSerializer<T> {
    /// The serializer (it holds nothing).
    pub fn new() -> Self {
        JsonSerializer(std::marker::PhantomData)
    }
}

#[cfg(feature = "serde")]
impl<T> Default for JsonSerializer<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "serde")]
impl<T> Clone for JsonSerializer<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

#[cfg(feature = "serde")]
impl<T> std::fmt::Debug for JsonSerializer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonSerializer")
    }
}

#[cfg(feature = "serde")]
impl<T: serde::Serialize + serde::de::DeserializeOwned + 'static> QueueSerializer<T> for JsonSerializer<T> {
    fn serialize(&self, item: &T) -> Result<Vec<u8>, String> {
        serde_json::to_vec(item).map_err(|e| e.to_string())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<T, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
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
