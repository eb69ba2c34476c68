//! `pnode-reregister N`: how long a `PersistentNode` (EPHEMERAL, unprotected) takes to be back
//! after its session is replaced, next to the floor: one create on the new session.
//!
//! N times: the client's session is expired from outside (`testing::expire_session`); the clock
//! starts when the client reports the new session (`Reconnected`) and stops when an observer,
//! following the parent's children from before the expiry, sees the node gone and back. The
//! floor, on the same new session right after: a bare create of a sibling ephemeral node, timed
//! from the request to the observer's exists-watch event for it (both include the observer's
//! notification, so they compare like with like).

use std::time::{Duration, Instant};

use zk_curator::nodes::{PersistentNode, Protection};
use zk_curator::testing::expire_session;
use zk_curator::{ConnectionState, CreateMode};
use zookeeper_client as zk;

use crate::report::{mean, pct, sorted, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

pub(crate) async fn pnode_reregister(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let observer = zk::Client::connector().with_session_timeout(BENCH_SESSION_TIMEOUT).connect(connect).await?;
    let parent = unique_path("pnode-reregister");
    let path = format!("{parent}/member");
    let node = PersistentNode::new(&client, &path, CreateMode::Ephemeral, Protection::Unprotected, b"bench".to_vec())?;
    node.start()?;
    if !node.wait_for_initial_create(Duration::from_secs(30)).await? {
        return Err("the node was not created within 30 s".into());
    }
    let (mut back, mut floor) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let mut states = client.connection_states();
        let old = client.session_id();
        // The observer follows the parent's children from before the expiry: the member goes
        // (its session ended), then comes back; the time it is seen back.
        let watching = {
            let (observer, parent) = (observer.clone(), parent.clone());
            tokio::spawn(async move {
                let mut gone = false;
                loop {
                    let (children, watcher) = observer.list_and_watch_children(&parent).await?;
                    let present = children.iter().any(|c| c == "member");
                    if !present {
                        gone = true;
                    } else if gone {
                        return Ok::<Instant, zk::Error>(Instant::now());
                    }
                    watcher.changed().await;
                }
            })
        };
        expire_session(connect, &client).await?;
        // The new session, as the client reports it.
        let started = loop {
            match tokio::time::timeout(Duration::from_secs(60), states.next()).await {
                Ok(Some(ConnectionState::Reconnected)) if client.session_id() != old => break Instant::now(),
                Ok(Some(_)) => {}
                _ => return Err("no new session within 60 s".into()),
            }
        };
        let seen =
            tokio::time::timeout(Duration::from_secs(60), watching).await.map_err(|_| "not back within 60 s")???;
        back.push(seen.saturating_duration_since(started));
        // The floor: one create on the new session, seen by the same observer.
        let sibling = format!("{parent}/floor-{i}");
        let (_, appeared) = observer.check_and_watch_stat(&sibling).await?;
        let t0 = Instant::now();
        client.create(&sibling).mode(CreateMode::Ephemeral).await?;
        appeared.changed().await;
        floor.push(t0.elapsed());
        client.delete(&sibling).await?;
    }
    node.close().await?;
    client.close().await;
    let (back, floor) = (sorted(back), sorted(floor));
    report.metric("rounds", n);
    for (name, v) in [("back", &back), ("floor_create", &floor)] {
        report.us(&format!("{name}_p50_us"), pct(v, 0.50));
        report.us(&format!("{name}_p99_us"), pct(v, 0.99));
        report.us(&format!("{name}_mean_us"), mean(v));
    }
    Ok(())
}
