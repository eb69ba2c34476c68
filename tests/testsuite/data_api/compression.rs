//! `compressed()` / `decompressed()` and the client-wide `enable_compression`: what the server
//! stores (read raw), the size limit on the compressed size, and typed errors for data that is
//! not compressed. Interop with Curator's `GzipCompressionProvider`: curator_interop.rs.

use crate::support;

use zk_curator::{CreateMode, CuratorClient, Error, Transaction};

pub(super) const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Data that compresses well, of `len` bytes.
pub(super) fn repetitive(len: usize) -> Vec<u8> {
    b"compressible configuration line\n".iter().copied().cycle().take(len).collect()
}

/// Data that does not compress (a simple generator's bytes), of `len` bytes.
pub(super) fn incompressible(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// The node's data as the server stores it.
pub(super) async fn raw(client: &CuratorClient, path: &str) -> Vec<u8> {
    client.get_data(path).undecompressed().await.unwrap().0
}

#[tokio::test]
async fn compressed_data_is_stored_as_gzip_and_reads_back_decompressed() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let base = support::unique_path("gzip");
    let data = repetitive(10_000);
    let path = format!("{base}/node");
    client.create(&path).data(data.clone()).compressed().creating_parents_if_needed().await.unwrap();
    let stored = raw(client, &path).await;
    assert_eq!(stored[..2], GZIP_MAGIC, "stored as GZIP");
    assert!(stored.len() < data.len() / 10, "stored compressed: {} bytes", stored.len());
    assert_eq!(client.get_data(&path).decompressed().await.unwrap().0, data);
    let (read, _, _watch) = client.get_data(&path).decompressed().watch().await.unwrap();
    assert_eq!(read, data, "the watched read decompresses too");
    // Without decompressed(): the bytes as stored.
    assert_eq!(client.get_data(&path).await.unwrap().0, stored);

    let update = repetitive(20_000);
    client.set_data(&path, update.clone()).compressed().await.unwrap();
    assert_eq!(raw(client, &path).await[..2], GZIP_MAGIC);
    assert_eq!(client.get_data(&path).decompressed().await.unwrap().0, update);
    // Empty data too, and protected sequential creates.
    let empty = format!("{base}/empty");
    client.create(&empty).compressed().await.unwrap();
    assert_eq!(client.get_data(&empty).decompressed().await.unwrap().0, b"");
    let protected = client
        .create(&format!("{base}/p-"))
        .data(b"p".to_vec())
        .mode(CreateMode::EphemeralSequential)
        .with_protection()
        .compressed()
        .await
        .unwrap();
    assert_eq!(client.get_data(&protected).decompressed().await.unwrap().0, b"p");
}

#[tokio::test]
async fn the_data_size_limit_applies_to_the_compressed_size() {
    let server = support::server().await;
    let client = CuratorClient::builder(&server.connect_string()).max_data_size(4096).connect().await.unwrap();
    let base = support::unique_path("gzip-limit");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    // 64 KiB that compress far below 4 KiB: accepted compressed, refused as they are.
    let big = repetitive(64 * 1024);
    client.create(&format!("{base}/big")).data(big.clone()).compressed().await.unwrap();
    assert_eq!(client.get_data(&format!("{base}/big")).decompressed().await.unwrap().0, big);
    let plain = client.create(&format!("{base}/plain")).data(big.clone()).await;
    assert!(matches!(plain, Err(Error::InvalidArgument { name: "data", .. })), "{plain:?}");
    // 4090 bytes that do not compress: under the limit as they are, over it compressed (GZIP
    // adds its header and trailer, and deflate its block headers).
    let noise = incompressible(4090);
    client.create(&format!("{base}/noise-plain")).data(noise.clone()).await.unwrap();
    for (what, refused) in [
        ("create", client.create(&format!("{base}/noise")).data(noise.clone()).compressed().await.map(drop)),
        ("set", client.set_data(&format!("{base}/big"), noise.clone()).compressed().await.map(drop)),
    ] {
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "data", .. })), "{what}: {refused:?}");
    }
    assert!(client.exists(&format!("{base}/noise")).await.unwrap().is_none(), "nothing sent");
    assert_eq!(client.get_data(&format!("{base}/big")).decompressed().await.unwrap().0, big, "nothing written");
    client.close().await;
}

#[tokio::test]
async fn data_that_is_not_compressed_is_malformed_data_naming_the_path() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("not-gzip");
    client.create(&path).data(b"plain text".to_vec()).creating_parents_if_needed().await.unwrap();
    for result in [
        client.get_data(&path).decompressed().await.map(drop),
        client.get_data(&path).decompressed().watch().await.map(drop),
    ] {
        match result {
            Err(Error::MalformedData { path: named, .. }) => assert_eq!(named, path),
            other => panic!("expected MalformedData naming {path}, got {other:?}"),
        }
    }
    // A truncated GZIP member too.
    client.set_data(&path, repetitive(1000)).compressed().await.unwrap();
    let stored = raw(client, &path).await;
    client.set_data(&path, stored[..stored.len() - 4].to_vec()).await.unwrap();
    assert!(matches!(client.get_data(&path).decompressed().await, Err(Error::MalformedData { .. })));
}

#[tokio::test]
async fn enable_compression_compresses_every_data_api_write_unless_a_call_opts_out() {
    let server = support::server().await;
    let client = CuratorClient::builder(&server.connect_string()).enable_compression().connect().await.unwrap();
    assert!(client.compression_enabled());
    let base = support::unique_path("gzip-default");
    let data = repetitive(5000);
    client.create(&base).data(data.clone()).creating_parents_if_needed().await.unwrap();
    assert_eq!(raw(&client, &base).await[..2], GZIP_MAGIC, "create");
    assert_eq!(client.get_data(&base).await.unwrap().0, data, "get_data decompresses");
    client.set_data(&base, data.clone()).await.unwrap();
    assert_eq!(raw(&client, &base).await[..2], GZIP_MAGIC, "set_data");
    client.commit(Transaction::new().create(&format!("{base}/tx"), &data, CreateMode::Persistent)).await.unwrap();
    assert_eq!(raw(&client, &format!("{base}/tx")).await[..2], GZIP_MAGIC, "a transaction's create");
    assert_eq!(client.get_data(&format!("{base}/tx")).await.unwrap().0, data);
    // Opting out.
    client.create(&format!("{base}/plain")).data(b"as is".to_vec()).uncompressed().await.unwrap();
    assert_eq!(raw(&client, &format!("{base}/plain")).await, b"as is");
    client.set_data(&base, b"as is".to_vec()).uncompressed().await.unwrap();
    assert_eq!(client.get_data(&base).undecompressed().await.unwrap().0, b"as is");
    client.close().await;
}
