//! Node data compression compatible with Curator's default `GzipCompressionProvider`: one GZIP
//! member (RFC 1952) of the whole payload, written as `java.util.zip.GZIPOutputStream` writes it
//! (no optional header fields, default level) and read with any header fields, as Curator's
//! reader does. What one side writes with `compressed()`, the other reads with `decompressed()`.

use std::io::{Read, Write};

use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::error::{Error, Result};

/// The most bytes a compressed payload may expand to: a node holds at most about 1 MiB, which
/// deflate can expand about a thousandfold; past this a reader gets a typed error instead of
/// exhausting memory.
pub(crate) const MAX_DECOMPRESSED_SIZE: usize = 1 << 30;

/// `data` as one GZIP member (Curator's `GzipCompressionProvider.compress`).
pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(data.len() / 2 + 32), Compression::default());
    // Writing into a Vec cannot fail.
    encoder.write_all(data).expect("writing into memory");
    encoder.finish().expect("writing into memory")
}

/// The payload of the GZIP member `data` read from `path` (Curator's
/// `GzipCompressionProvider.decompress`).
///
/// # Errors
/// [`Error::MalformedData`] naming `path` when `data` is not exactly one GZIP member (bad
/// header, corrupt deflate stream, wrong checksum or length, bytes after it);
/// [`Error::LimitExceeded`] when it expands past [`MAX_DECOMPRESSED_SIZE`].
pub(crate) fn decompress(path: &str, data: &[u8]) -> Result<Vec<u8>> {
    decompress_at_most(path, data, MAX_DECOMPRESSED_SIZE)
}

fn decompress_at_most(path: &str, data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let malformed = |reason: String| Error::MalformedData {
        path: path.to_string(),
        expected: "GZIP-compressed data (as Curator's GzipCompressionProvider writes)",
        reason,
    };
    let mut decoder = GzDecoder::new(data);
    let mut out = Vec::with_capacity(data.len().saturating_mul(3).min(limit));
    let read = (&mut decoder).take(limit as u64 + 1).read_to_end(&mut out);
    match read {
        Ok(_) if out.len() > limit => {
            return Err(Error::LimitExceeded { path: path.to_string(), what: "decompressed bytes", limit });
        }
        Ok(_) => {}
        Err(e) => return Err(malformed(e.to_string())),
    }
    if decoder.header().is_none() {
        return Err(malformed("no GZIP header".to_string()));
    }
    let rest = decoder.into_inner();
    if !rest.is_empty() {
        return Err(malformed(format!("{} bytes after the GZIP member", rest.len())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Curator's `GzipCompressionProvider.compress(new byte[0])` on Java 16 and later (its
    /// `COMPRESSED_EMPTY_BYTES`, checked by its own `testEmpty`).
    const CURATOR_EMPTY: [u8; 20] = [31, 139, 8, 0, 0, 0, 0, 0, 0, 255, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn empty_data_compresses_to_the_bytes_curator_writes() {
        assert_eq!(compress(b""), CURATOR_EMPTY);
        assert_eq!(decompress("/n", &CURATOR_EMPTY).unwrap(), b"");
    }

    #[test]
    fn data_round_trips_and_shrinks_when_repetitive() {
        let data = b"hello hello hello hello hello hello hello hello".repeat(20);
        let compressed = compress(&data);
        assert!(compressed.len() < data.len());
        assert_eq!(&compressed[..4], &[31, 139, 8, 0], "a GZIP header without optional fields");
        assert_eq!(decompress("/n", &compressed).unwrap(), data);
    }

    #[test]
    fn what_is_not_one_gzip_member_is_malformed_data_naming_the_path() {
        let good = compress(b"payload");
        let mut corrupt = good.clone();
        let crc = corrupt.len() - 8;
        corrupt[crc] ^= 0xff;
        let mut trailing = good.clone();
        trailing.extend_from_slice(&good);
        for (what, bad) in [
            ("plain text", b"not gzip".to_vec()),
            ("empty", Vec::new()),
            ("truncated", good[..good.len() - 3].to_vec()),
            ("bad checksum", corrupt),
            ("two members", trailing),
        ] {
            match decompress("/some/node", &bad) {
                Err(Error::MalformedData { path, .. }) => assert_eq!(path, "/some/node", "{what}"),
                other => panic!("{what}: expected MalformedData, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_payload_expanding_past_the_limit_is_refused() {
        let compressed = compress(&[0u8; 4096]);
        assert!(matches!(
            decompress_at_most("/bomb", &compressed, 1024),
            Err(Error::LimitExceeded { limit: 1024, .. })
        ));
        assert_eq!(decompress_at_most("/bomb", &compressed, 4096).unwrap().len(), 4096);
    }
}
