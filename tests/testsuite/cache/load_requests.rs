//! How many requests a cache's load sends: its reads are batched into multi-read requests, also
//! when some nodes' data is large, and the loaded tree is still exactly the server's.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client as zk;

use zk_curator::cache::CuratorCache;

use super::{assert_converges, Replay};
use crate::support::{client, init_tracing, observer, owned_server, unique_path};

const WITHIN: Duration = Duration::from_secs(60);

/// The server's count of packets received so far (`srvr`'s `Received:`).
async fn packets_received(port: u16) -> u64 {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect for srvr");
    stream.write_all(b"srvr").await.expect("send srvr");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read srvr");
    answer
        .lines()
        .find_map(|line| line.strip_prefix("Received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Received: in {answer:?}"))
}

#[tokio::test]
async fn a_cache_load_reads_many_nodes_per_request_also_among_large_nodes() {
    init_tracing();
    // A server of this test alone: the packet count is the cache's.
    let server = owned_server().await;
    let connect = server.connect_string();
    let c = client(&connect).await;
    let root = unique_path("cache-load-requests");
    c.create(&root).creating_parents_if_needed().await.unwrap();
    let zk = observer(&connect).await;
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    const DIRS: usize = 20;
    const LEAVES: usize = 50;
    let large = vec![b'L'; 600 * 1024];
    for d in 0..DIRS {
        let mut writer = zk.new_multi_writer();
        writer.add_create(&format!("{root}/d{d:02}"), b"dir", &persistent).unwrap();
        for l in 0..LEAVES {
            writer
                .add_create(&format!("{root}/d{d:02}/n{l:03}"), format!("leaf {d} {l}").as_bytes(), &persistent)
                .unwrap();
        }
        writer.commit().await.unwrap();
    }
    for b in 0..3 {
        zk.create(&format!("{root}/d{b:02}/large"), &large, &persistent).await.unwrap();
    }
    let nodes = 1 + DIRS + DIRS * LEAVES + 3;

    let before = packets_received(server.port()).await;
    let cache = CuratorCache::start(&c, &root).unwrap();
    let mut events = cache.events();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let requests = packets_received(server.port()).await - before;
    assert_eq!(cache.size(), nodes);
    let mut replay = Replay::default();
    assert_converges(&cache, &mut events, &mut replay, &connect, WITHIN).await;
    // One request per node would be more than `nodes`; batched, the load of 1,024 nodes takes a
    // few dozen (plus the session's connect, watch, sync and pings).
    assert!(requests < (nodes / 5) as u64, "the load of {nodes} nodes took {requests} requests");
    cache.close().await;
}
