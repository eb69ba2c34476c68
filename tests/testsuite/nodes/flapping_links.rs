//! `PersistentNode` under flapping links and session replacements: never two of our nodes at
//! once, back after each new session, none left after close (Curator's CURATOR-53/97: not
//! restored after an outage).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use zk_curator::nodes::{PersistentNode, Protection};
use zk_curator::testing::{expire_session, FaultProxy, Latency, ProxyMode, TestingServer};
use zk_curator::CreateMode;

use super::WITHIN;
use crate::support;

/// Counts, from an observer's session, how often the parent held more than one node.
struct Sampler {
    stop: Arc<AtomicBool>,
    doubled: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<Vec<String>>>,
}

impl Sampler {
    fn start(obs: zookeeper_client::Client, parent: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let doubled = Arc::new(AtomicUsize::new(0));
        let (s, d) = (stop.clone(), doubled.clone());
        let task = crate::support::spawn(async move {
            let mut seen = Vec::new();
            while !s.load(Ordering::SeqCst) {
                let children = support::sorted_children(&obs, &parent).await;
                if children.len() > 1 {
                    d.fetch_add(1, Ordering::SeqCst);
                    seen.push(children);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seen
        });
        Self { stop, doubled, task }
    }

    async fn finish(self) -> (usize, Vec<Vec<String>>) {
        self.stop.store(true, Ordering::SeqCst);
        let seen = support::join("sampler", WITHIN, self.task).await;
        (self.doubled.load(Ordering::SeqCst), seen)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_flapping_links_and_new_sessions_there_is_never_a_second_node_and_it_comes_back_each_time() {
    support::init_tracing();
    let mut rng = rand::rngs::StdRng::seed_from_u64(support::seed("PNODE_FLAP_SEED"));
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let obs = support::observer(&connect).await;
    for (mode, protected) in [(CreateMode::EphemeralSequential, true), (CreateMode::Ephemeral, false)] {
        let parent = support::unique_path("flap");
        let node = PersistentNode::new(
            &client,
            &format!("{parent}/member-"),
            mode,
            if protected { Protection::Protected } else { Protection::Unprotected },
            b"x".to_vec(),
        )
        .unwrap();
        node.start().unwrap();
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap());
        let sampler = Sampler::start(support::observer(&connect).await, parent.clone());
        for round in 0..6 {
            let session = client.session_id();
            match round % 3 {
                // Short cuts: the session survives; the node stays. The link comes back slow
                // (latency, one more fault): random delays each way, tens to hundreds of ms.
                0 => {
                    for _ in 0..5 {
                        proxy.set_mode(ProxyMode::Cut);
                        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..200))).await;
                        let set = support::latency::set_random(&proxy, &mut rng, 200);
                        println!("{mode:?} round {round}: latency {}", support::latency::describe(&set));
                        proxy.set_mode(ProxyMode::Pass);
                        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..150))).await;
                    }
                    proxy.set_latency(Latency::NONE);
                }
                // The server expires the session while we are cut off.
                1 => {
                    proxy.set_mode(ProxyMode::Blackhole);
                    tokio::time::sleep(Duration::from_millis(3_000 + rng.gen_range(0..500))).await;
                    proxy.set_mode(ProxyMode::Pass);
                    support::session_replaced(&client, session).await;
                }
                // Expired from outside while connected.
                _ => {
                    expire_session(&connect, &client).await.expect("expire");
                    support::session_replaced(&client, session).await;
                }
            }
            // Back: one node, ours, on the current session (ephemeral).
            support::eventually(WITHIN, "the node is back on the current session", || async {
                let children = support::sorted_children(&obs, &parent).await;
                let Some(actual) = node.actual_path() else { return false };
                let owner = support::stat(&obs, &actual).await.map(|s| s.ephemeral_owner);
                children.len() == 1 && owner == Some(client.session_id())
            })
            .await;
        }
        node.close().await.unwrap();
        let (doubled, seen) = sampler.finish().await;
        assert_eq!(doubled, 0, "{mode:?}: two of our nodes at once: {seen:?}");
        let left = support::eventually_no_children(&connect, &parent, WITHIN).await;
        assert!(left.is_empty(), "{mode:?}: left after close: {left:?}");
    }
    client.close().await;
}
