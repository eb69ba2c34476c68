//! Fencing tokens: a downstream store that refuses writes from a stale lock holder.
//!
//! ```text
//! cargo run --example fenced_write          # starts its own ZooKeeper (or set ZK_CONNECT)
//! ```
//!
//! The story (Martin Kleppmann's "How to do distributed locking"): worker A holds the lock, then
//! stalls (a long GC pause, a frozen VM) for longer than its session timeout. ZooKeeper expires its
//! session, worker B gets the lock and writes. A wakes up still believing it holds the lock and
//! writes too. A lock alone cannot stop that late write — the store must. Every hold carries a
//! [`FencingToken`] that strictly increases across holders of one lock path; the store remembers the
//! largest token it has accepted per resource and refuses smaller ones.
//!
//! Here A's stall is simulated by expiring A's session on the server (what a pause past the
//! session timeout causes). A learns it as `HoldState::Lost`, but we let it write anyway to show
//! that the store fences it off, and that a lock-guarded ZooKeeper write fails too.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use zk_curator::locks::{FencingToken, GuardedWrite, HoldState, InterProcessMutex};
use zk_curator::CuratorClient;

/// A toy storage service that fences writes by token — the check a real store (a database row's
/// `last_token` column, an object store's conditional put) must do.
#[derive(Default)]
struct FencedStore {
    rows: Mutex<HashMap<String, (FencingToken, String)>>,
}

impl FencedStore {
    fn write(&self, key: &str, token: FencingToken, value: &str) -> Result<(), String> {
        let mut rows = self.rows.lock();
        if let Some((last, _)) = rows.get(key) {
            if token < *last {
                return Err(format!("refused: token {token} is older than {last} already seen for {key}"));
            }
        }
        rows.insert(key.to_string(), (token, value.to_string()));
        Ok(())
    }
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> AnyResult<()> {
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    let store = FencedStore::default();
    let lock_path = format!("/fenced-write/run-{}/lock", std::process::id());
    let data_path = format!("/fenced-write/run-{}/report", std::process::id());
    let builder = || CuratorClient::builder(&connect).session_timeout(Duration::from_secs(4));
    let client_a = builder().connect().await?;
    let client_b = builder().connect().await?;
    client_a.create(&data_path).creating_parent_containers_if_needed().await?;

    let a = InterProcessMutex::new(&client_a, &lock_path)?.lock().await?;
    println!("A holds the lock, token {}", a.fencing_token());
    store.write("report", a.fencing_token(), "A: part 1").map_err(|e| format!("unexpected: {e}"))?;
    println!("A writes part 1: accepted");

    println!("A stalls past its session timeout (simulated: its session is expired on the server)...");
    zk_curator::testing::expire_session(&connect, &client_a).await?;

    let b = InterProcessMutex::new(&client_b, &lock_path)?.lock().await?;
    println!("B holds the lock, token {}", b.fencing_token());
    store.write("report", b.fencing_token(), "B: full report").map_err(|e| format!("unexpected: {e}"))?;
    println!("B writes: accepted");

    // A wakes up. A careful holder checks its hold first...
    tokio::time::timeout(Duration::from_secs(10), a.lost()).await?;
    println!("A's hold state is now {:?}", a.hold_state());
    assert_eq!(a.hold_state(), HoldState::Lost);
    // ...but even a careless one is stopped by the store:
    match store.write("report", a.fencing_token(), "A: part 2") {
        Ok(()) => return Err("the store accepted a stale holder's write".into()),
        Err(e) => println!("A writes part 2: {e}"),
    }
    // ...and by ZooKeeper itself for lock-guarded writes.
    match a.guarded_write(GuardedWrite::new().set_data(&data_path, b"A: part 2", None)).await {
        Ok(_) => return Err("a guarded write by a stale holder was accepted".into()),
        Err(e) => println!("A's lock-guarded ZooKeeper write: {e} (kind {:?})", e.kind()),
    }
    b.guarded_write(GuardedWrite::new().set_data(&data_path, b"B: full report", None)).await?;
    println!("B's lock-guarded ZooKeeper write: accepted");

    let _ = a.release().await;
    b.release().await?;
    client_b.delete_guaranteed(&data_path).await?;
    client_a.close().await;
    client_b.close().await;
    println!("the stale holder was fenced off: the report holds only B's data");
    Ok(())
}
