//! The data API against a real Curator 5.4 process on the same server (tests/java/CuratorPeer.java,
//! its `z*` commands): compressed data both ways (Curator's default `GzipCompressionProvider`),
//! ACLs, and namespaces.

use crate::support;
use crate::support::curator_peer::CuratorPeer;

use zk_curator::{Acl, Id, Permissions};

use super::compression::{incompressible, raw, repetitive, GZIP_MAGIC};

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".to_string();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

#[tokio::test]
async fn curator_reads_our_compressed_data_and_we_read_curators() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let base = support::unique_path("gzip-interop");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    for (name, data) in [("text", repetitive(3000)), ("noise", incompressible(1500)), ("empty", Vec::new())] {
        // Curator writes, we read.
        let theirs = format!("{base}/curator-{name}");
        assert_eq!(peer.cmd(&format!("zwrite {theirs} {}", hex(&data))).await, "ZWROTE");
        assert_eq!(raw(client, &theirs).await[..2], GZIP_MAGIC, "{name}: Curator stored GZIP");
        assert_eq!(client.get_data(&theirs).decompressed().await.unwrap().0, data, "{name}: Curator's, read by us");
        // We write, Curator reads.
        let ours = format!("{base}/ours-{name}");
        client.create(&ours).data(data.clone()).compressed().await.unwrap();
        let answer = peer.cmd(&format!("zread {ours}")).await;
        let read = answer.strip_prefix("ZDATA").unwrap_or_else(|| panic!("{name}: {answer}")).trim();
        assert_eq!(unhex(read), data, "{name}: ours, read by Curator");
        // setData both ways.
        let update = repetitive(100 + data.len());
        assert_eq!(peer.cmd(&format!("zset {ours} {}", hex(&update))).await, "ZSET");
        assert_eq!(client.get_data(&ours).decompressed().await.unwrap().0, update);
        client.set_data(&theirs, update.clone()).compressed().await.unwrap();
        let answer = peer.cmd(&format!("zread {theirs}")).await;
        assert_eq!(unhex(answer.strip_prefix("ZDATA").unwrap().trim()), update);
    }
    // Curator refuses what is not GZIP, as we do.
    let plain = format!("{base}/plain");
    client.create(&plain).data(b"plain".to_vec()).await.unwrap();
    let refused = peer.cmd(&format!("zread {plain}")).await;
    assert!(refused.starts_with("ZNOTGZIP"), "{refused}");
    assert_eq!(peer.cmd("quit").await, "BYE");
}

#[tokio::test]
async fn curator_reads_the_acl_we_set_and_we_read_its_namespace_nodes() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let base = support::unique_path("data-interop");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    let acl = vec![
        Acl::new(Permissions::READ | Permissions::WRITE, Id::anyone()),
        Acl::new(Permissions::ALL, Id::new("ip", "127.0.0.1")),
    ];
    client.set_acl(&base, acl).await.unwrap();
    assert_eq!(peer.cmd(&format!("zacl {base}")).await, "ZACL world:anyone:3,ip:127.0.0.1:31");

    // Curator's usingNamespace creates its namespace lazily; our view of it reads the node.
    let namespace = format!("{}/ns", base.trim_start_matches('/'));
    assert_eq!(peer.cmd(&format!("znsw {namespace} /theirs {}", hex(b"c"))).await, "ZWROTE");
    let view = client.using_namespace(&namespace).unwrap();
    assert_eq!(view.get_data("/theirs").await.unwrap().0, b"c");
    // And ours, made in a namespace Curator has not seen yet, is where Curator looks for it.
    let fresh = format!("{}/fresh", base.trim_start_matches('/'));
    client.using_namespace(&fresh).unwrap().create("/ours").data(b"r".to_vec()).await.unwrap();
    assert_eq!(peer.cmd(&format!("zraw /{fresh}/ours")).await, format!("ZRAW {}", hex(b"r")));
    assert_eq!(peer.cmd("quit").await, "BYE");
}
