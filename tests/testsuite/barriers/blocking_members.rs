//! The blocking barriers on plain threads: members enter and leave together for a few rounds on
//! one path, a barrier holds a waiting thread until removed, and the runtime context is refused.

use std::thread;
use std::time::Duration;

use zk_curator::blocking::{self, DistributedBarrier, DistributedDoubleBarrier};
use zk_curator::RetryNTimes;

use crate::support;

fn client(connect: &str) -> blocking::CuratorClient {
    let builder = zk_curator::CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)));
    blocking::CuratorClient::from_builder(builder).expect("connect")
}

#[test]
fn blocking_members_on_threads_enter_and_leave_together_round_after_round() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(support::server());
    let connect = server.connect_string();
    let path = support::unique_path("blocking-double");
    let members: Vec<_> = (0..3)
        .map(|_| {
            let (connect, path) = (connect.clone(), path.clone());
            thread::spawn(move || {
                let client = client(&connect);
                let mut barrier = DistributedDoubleBarrier::new(&client, &path, 3).unwrap();
                for _ in 0..3 {
                    assert!(barrier.enter_timeout(Duration::from_secs(30)).unwrap(), "enter timed out");
                    assert!(barrier.member_node().is_some());
                    assert!(barrier.leave_timeout(Duration::from_secs(30)).unwrap(), "leave timed out");
                }
            })
        })
        .collect();
    for m in members {
        m.join().unwrap();
    }
    let left = rt.block_on(support::eventually_no_children(&connect, &path, Duration::from_secs(10)));
    assert!(left.is_empty(), "left behind: {left:?}");

    let setter_client = client(&connect);
    let barrier_path = support::unique_path("blocking-barrier");
    let setter = DistributedBarrier::new(&setter_client, &barrier_path).unwrap();
    setter.set_barrier().unwrap();
    let waiting = {
        let (connect, barrier_path) = (connect.clone(), barrier_path.clone());
        thread::spawn(move || {
            let client = client(&connect);
            DistributedBarrier::new(&client, &barrier_path).unwrap().wait_on_barrier_timeout(Duration::from_secs(30))
        })
    };
    assert!(!setter.wait_on_barrier_timeout(Duration::from_millis(200)).unwrap());
    assert!(!waiting.is_finished(), "a thread passed a barrier that is set");
    setter.remove_barrier().unwrap();
    assert!(waiting.join().unwrap().unwrap());
    // Inside a runtime the blocking call is refused, not blocked.
    let refused = rt.block_on(async { setter.is_set() });
    assert!(matches!(refused, Err(zk_curator::Error::InvalidArgument { name: "runtime", .. })), "{refused:?}");
}
