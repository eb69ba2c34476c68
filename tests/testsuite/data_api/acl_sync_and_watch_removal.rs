//! `get_acl` / `set_acl`, `sync` and watch removal against a real server: what the server stores
//! and which watches it still holds (its `wchc` command) are the proof, not the client's answer.

use crate::support;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zk_curator::{Acl, CuratorClient, Error, ErrorCode, Id, Permissions};

/// Hang guard for awaits that must finish (never a timing assertion).
const HANG: Duration = Duration::from_secs(20);

/// The server paths (chroot included) on which `client`'s session has a watch, from ZooKeeper's
/// `wchc` four-letter command.
async fn server_watches(connect: &str, client: &CuratorClient) -> Vec<String> {
    let (hosts, _) = support::split_chroot(connect);
    let host = hosts.split(',').next().unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream.write_all(b"wchc").await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    // One block per session and kind of watch (data, then child watches): a session line, then
    // its paths indented.
    let session = format!("0x{:x}", client.session_id());
    let mut paths = Vec::new();
    let mut ours = false;
    for line in answer.lines() {
        if line.starts_with('\t') {
            if ours {
                paths.push(line.trim().to_string());
            }
        } else {
            ours = line.trim() == session;
        }
    }
    paths
}

/// Waits until the server's watches of `client` on `full_path` are (or are not) there.
async fn watch_on_server_becomes(connect: &str, client: &CuratorClient, full_path: &str, present: bool) {
    let found = support::poll_until(HANG, || async {
        server_watches(connect, client).await.iter().any(|p| p == full_path) == present
    })
    .await;
    let (hosts, _) = support::split_chroot(connect);
    assert!(found, "a watch of {full_path} on the server: expected present={present}; {hosts}: {:?}", {
        let mut stream = tokio::net::TcpStream::connect(hosts.split(',').next().unwrap()).await.unwrap();
        stream.write_all(b"wchc").await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    });
}

#[tokio::test]
async fn set_acl_writes_what_get_acl_reads_and_a_stale_acl_version_is_refused() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("acl");
    client.create(&path).creating_parents_if_needed().await.unwrap();
    let (acl, stat) = client.get_acl(&path).await.unwrap();
    assert_eq!(acl, Acl::open_unsafe());
    assert_eq!(stat.aversion, 0);

    let read_and_delete = vec![Acl::new(Permissions::READ | Permissions::ADMIN, Id::anyone())];
    let stat = client.set_acl(&path, read_and_delete.clone()).version(0).await.unwrap();
    assert_eq!(stat.aversion, 1);
    // As the server stores it, through a plain observer session.
    let observer = support::observer(&server.connect_string()).await;
    let (raw, _) = observer.get_acl(&path).await.unwrap();
    assert_eq!(raw.len(), 1);
    assert_eq!((raw[0].scheme(), raw[0].id()), ("world", "anyone"));
    assert_eq!(client.get_acl(&path).await.unwrap().0, read_and_delete);
    // And enforced: no WRITE any more.
    assert_eq!(client.set_data(&path, b"x".to_vec()).await.unwrap_err().code(), Some(ErrorCode::NoAuth));
    // A stale ACL version is refused.
    let stale = client.set_acl(&path, Acl::open_unsafe()).version(0).await;
    assert_eq!(stale.unwrap_err().code(), Some(ErrorCode::BadVersion));
    // Unconditional, and through a namespace view.
    let (namespace, name) = path.rsplit_once('/').unwrap();
    let view = client.using_namespace(namespace.trim_start_matches('/')).unwrap();
    view.set_acl(&format!("/{name}"), Acl::open_unsafe()).await.unwrap();
    assert_eq!(client.get_acl(&path).await.unwrap().0, Acl::open_unsafe());
    assert_eq!(client.get_acl(&format!("{path}-missing")).await.unwrap_err().code(), Some(ErrorCode::NoNode));
}

#[tokio::test]
async fn an_acl_no_server_takes_is_refused_naming_it_and_changes_nothing() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("bad-acl");
    client.create(&path).creating_parents_if_needed().await.unwrap();
    match client.set_acl(&path, Vec::new()).await {
        Err(Error::InvalidArgument { name: "acl", value, .. }) => assert_eq!(value, "[]"),
        other => panic!("an empty ACL: {other:?}"),
    }
    match client.set_acl(&path, vec![Acl::new(Permissions::ALL, Id::new("", "nobody"))]).await {
        Err(Error::InvalidArgument { name: "acl", value, .. }) => assert_eq!(value, ":nobody"),
        other => panic!("an ACL without a scheme: {other:?}"),
    }
    match client.create(&format!("{path}/child")).with_acl(vec![Acl::new(Permissions::ALL, Id::new("", "x"))]).await {
        Err(Error::InvalidArgument { name: "acl", .. }) => {}
        other => panic!("a create with an ACL without a scheme: {other:?}"),
    }
    for absurd in [Id::new("bogus", "x"), Id::new("ip", "not-an-address"), Id::new("digest", "no-colon")] {
        let refused = client.set_acl(&path, vec![Acl::new(Permissions::ALL, absurd.clone())]).await;
        match refused {
            Err(Error::ZooKeeper { code: ErrorCode::InvalidAcl, path: named, .. }) => assert_eq!(named, path),
            other => panic!("ACL {absurd}: expected InvalidAcl naming the path, got {other:?}"),
        }
    }
    let (acl, stat) = client.get_acl(&path).await.unwrap();
    assert_eq!((acl, stat.aversion), (Acl::open_unsafe(), 0), "nothing refused changed the ACL");
    assert!(matches!(client.get_acl("no-slash").await, Err(Error::InvalidPath { .. })));
}

#[tokio::test]
async fn sync_answers_for_any_path_within_the_namespace_and_refuses_a_bad_one() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("sync");
    client.create(&path).data(b"v".to_vec()).creating_parents_if_needed().await.unwrap();
    tokio::time::timeout(HANG, client.sync(&path).timeout(HANG)).await.unwrap().unwrap();
    tokio::time::timeout(HANG, client.sync("/")).await.unwrap().unwrap();
    let view = client.using_namespace(path.trim_start_matches('/')).unwrap();
    tokio::time::timeout(HANG, view.sync("/")).await.unwrap().unwrap();
    assert_eq!(view.get_data("/").await.unwrap().0, b"v");
    match client.sync("a//b").await {
        Err(Error::InvalidPath { path, .. }) => assert_eq!(path, "a//b"),
        other => panic!("a bad path: {other:?}"),
    }
}

#[tokio::test]
async fn a_removed_or_dropped_watch_is_gone_from_the_server() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let (_, chroot) = support::split_chroot(&connect);
    let client = &clients[0];
    let path = support::unique_path("unwatch");
    let full = format!("{chroot}{path}");
    client.create(&path).creating_parents_if_needed().await.unwrap();

    // A one-shot data watch, removed: gone from the server once `remove` returns.
    let (_, _, watch) = client.get_data(&path).watch().await.unwrap();
    assert!(server_watches(&connect, client).await.contains(&full), "the watch is set");
    tokio::time::timeout(HANG, watch.remove()).await.unwrap().unwrap();
    assert!(!server_watches(&connect, client).await.contains(&full), "removed, and the server says so");

    // A one-shot existence watch, dropped: the server removes it too. (`wchc` lists data and
    // existence watches; ZooKeeper 3.8 leaves child watches out of it.)
    let (_, watch) = client.exists(&path).watch().await.unwrap();
    watch_on_server_becomes(&connect, client, &full, true).await;
    drop(watch);
    watch_on_server_becomes(&connect, client, &full, false).await;

    // A child watch, removed: the server answers NoWatcher to a removal of a watch it does not
    // hold, so an `Ok` is the server's word that it removed it.
    let (_, children_watch) = client.get_children(&path).watch().await.unwrap();
    tokio::time::timeout(HANG, children_watch.remove()).await.unwrap().unwrap();

    // A persistent watch (which `wchc` does not list either), removed: the same.
    let stream = client.watch(&path).await.unwrap();
    tokio::time::timeout(HANG, stream.remove()).await.unwrap().unwrap();

    // A fired one-shot watch is gone from the server already: removing it sends nothing and is
    // no error.
    let (_, _, fired) = client.get_data(&path).watch().await.unwrap();
    let observer = support::observer(&connect).await;
    observer.set_data(&path, b"changed", None).await.unwrap();
    watch_on_server_becomes(&connect, client, &full, false).await;
    tokio::time::timeout(HANG, fired.remove()).await.unwrap().unwrap();
}
