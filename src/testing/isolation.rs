//! A chroot of its own for every [`TestingServer`](super::TestingServer) handle on a shared,
//! external server (`ZK_CONNECT`): tests running side by side against one ZooKeeper cannot see,
//! or trip over, each other's nodes, and each handle removes its tree when it is dropped.

use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions};

use super::{TestingError, TestingResult};

/// The node under which every handle's chroot is made (below `ZK_CONNECT`'s own chroot, if any).
pub(crate) const ISOLATION_ROOT: &str = "/zk-curator-testing";
/// How long the harness waits for the external server to answer before calling it dead.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// How long dropping a handle may spend removing its tree (sessions of the test's clients may
/// still be closing, so their ephemeral nodes can take a moment to go).
const REMOVE_TIMEOUT: Duration = Duration::from_secs(5);

const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());

/// `connect` without a trailing chroot, and the chroot (`""` when none).
pub(crate) fn split_chroot(connect: &str) -> (&str, &str) {
    // A chroot starts at the first '/' after the scheme (`tcp://`, `tcp+tls://`).
    let body_start = connect.find("://").map_or(0, |i| i + 3);
    match connect[body_start..].find('/') {
        Some(i) => connect.split_at(body_start + i),
        None => (connect, ""),
    }
}

/// Makes a fresh, uniquely named chroot on the server `connect` names and returns the connect
/// string that points into it. Fails loudly, naming `ZK_CONNECT`, when the server does not answer:
/// a shared server that died must not show up as a hundred unrelated failures.
pub(crate) async fn isolated_connect_string(connect: &str) -> TestingResult<String> {
    let (hosts, base) = split_chroot(connect);
    let base = base.trim_end_matches('/');
    let chroot = format!("{base}{ISOLATION_ROOT}/{}", uuid::Uuid::new_v4().simple());
    let dead = |detail: String| TestingError::NotReady {
        what: format!("the shared ZooKeeper at {connect} (ZK_CONNECT) does not answer; has it died? {detail}"),
        waited: ANSWER_TIMEOUT,
    };
    let make = async {
        // Eagerly: a refused connection means the server is gone, not that it is slow.
        let client = Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_fail_eagerly()
            .connect(hosts)
            .await
            .map_err(|e| dead(e.to_string()))?;
        let made = client.mkdir(&chroot, &PERSISTENT).await;
        drop(client);
        match made {
            Ok(()) => Ok(()),
            Err(source) => Err(TestingError::ZooKeeper {
                context: format!("creating the test chroot {chroot} on the shared ZooKeeper at {connect}"),
                source: crate::Error::zk(&chroot, source),
            }),
        }
    };
    match tokio::time::timeout(ANSWER_TIMEOUT, make).await {
        Ok(result) => result?,
        Err(_) => return Err(dead("no answer".into())),
    }
    Ok(format!("{hosts}{chroot}"))
}

/// Removes the tree `connect`'s chroot names, best effort and within [`REMOVE_TIMEOUT`]. Runs on a
/// thread of its own with its own runtime, so it works from `Drop` with or without a runtime
/// (and on a current-thread runtime, which a blocking wait would otherwise stall).
pub(crate) fn remove_isolated_tree(connect: &str) {
    let (hosts, chroot) = split_chroot(connect);
    if !chroot.contains(ISOLATION_ROOT) {
        return;
    }
    let (hosts, chroot) = (hosts.to_owned(), chroot.to_owned());
    let worker = std::thread::Builder::new().name("zk-testing-cleanup".into()).spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            return;
        };
        runtime.block_on(async {
            let _ = tokio::time::timeout(REMOVE_TIMEOUT, remove_tree(&hosts, &chroot)).await;
        });
    });
    if let Ok(worker) = worker {
        let _ = worker.join();
    }
}

async fn remove_tree(hosts: &str, root: &str) {
    let Ok(client) = Client::connector().with_session_timeout(Duration::from_secs(10)).connect(hosts).await else {
        return;
    };
    // Ephemeral nodes of sessions still closing make a delete fail with NotEmpty; try again
    // until the timeout around this call.
    loop {
        if delete_recursively(&client, root).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes `path` and everything below it; true when it is gone.
async fn delete_recursively(client: &Client, path: &str) -> bool {
    // Depth-first, iteratively: a test may leave deep trees.
    let mut order = Vec::new();
    let mut pending = vec![path.to_owned()];
    while let Some(node) = pending.pop() {
        match client.list_children(&node).await {
            Ok(children) => pending.extend(children.into_iter().map(|child| format!("{node}/{child}"))),
            Err(zookeeper_client::Error::NoNode) => continue,
            Err(_) => return false,
        }
        order.push(node);
    }
    let mut gone = true;
    for node in order.iter().rev() {
        match client.delete(node, None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(_) => gone = false,
        }
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::split_chroot;

    #[test]
    fn chroots_split_off_connect_strings() {
        assert_eq!(split_chroot("127.0.0.1:2181"), ("127.0.0.1:2181", ""));
        assert_eq!(split_chroot("a:1,b:2/app/x"), ("a:1,b:2", "/app/x"));
        assert_eq!(split_chroot("tcp://a:1/app"), ("tcp://a:1", "/app"));
        assert_eq!(split_chroot("tcp+tls://a:1"), ("tcp+tls://a:1", ""));
    }
}
