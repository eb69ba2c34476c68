//! An idempotent endpoint: "avoid submitting a form twice" with idempotency keys.
//!
//! ```text
//! cargo run --example idempotent_endpoint    # starts its own ZooKeeper (or set ZK_CONNECT)
//! ```
//!
//! A payment endpoint takes a client-chosen idempotency key with each request (Stripe's
//! `Idempotency-Key` header). Two service instances (two ZooKeeper sessions) receive the same
//! submission at once — a double click, a retried request — and the same key again after the
//! payment went through. [`IdempotencyKeys::begin`] lets exactly one of them charge; the
//! concurrent duplicate is told the request is in progress (and waits for its result with
//! `wait_done`), and the late duplicate gets the recorded receipt. The program counts the
//! charges and exits non-zero unless every key was charged exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention, Settled};
use zk_curator::CuratorClient;

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// One service instance's payment endpoint.
struct Endpoint {
    keys: IdempotencyKeys,
    /// How many times the payment provider was called (by this instance).
    charges: Arc<AtomicUsize>,
}

impl Endpoint {
    /// Handles `POST /payments` with `key`: charges once per key, answers every duplicate with
    /// the first response.
    async fn pay(&self, key: &str, amount: u32) -> AnyResult<String> {
        match self.keys.begin(key).await? {
            Begin::Started(claim) => {
                // The side effect, once per key. (A failure here would `claim.abandon()` so that
                // the client's retry can run it again.)
                self.charges.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                let receipt = format!("charged {amount} for {key}");
                claim.complete(receipt.clone().into_bytes()).await?;
                Ok(receipt)
            }
            Begin::InProgress { holder } => {
                println!("  {key}: in progress at {holder}; waiting for its result");
                match self.keys.wait_done_timeout(key, Duration::from_secs(10)).await? {
                    Some(Settled::Done { result }) => Ok(String::from_utf8_lossy(&result).into_owned()),
                    Some(Settled::Free) => Err(format!("{key}: abandoned by its first request; retry").into()),
                    None => Err(format!("{key}: still in progress after 10 s; retry later").into()),
                }
            }
            Begin::Done { result } => Ok(String::from_utf8_lossy(&result).into_owned()),
            _ => Err("an answer this program does not know".into()),
        }
    }
}

#[tokio::main]
async fn main() -> AnyResult<()> {
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    let base = format!("/idempotent-endpoint/run-{}", std::process::id());
    let charges = Arc::new(AtomicUsize::new(0));
    let mut instances = Vec::new();
    for _ in 0..2 {
        let client = CuratorClient::connect(&connect).await?;
        // Receipts are kept a day (TTL nodes; `Retention::Sweep` on servers without them).
        let keys = IdempotencyKeys::new(&client, &base, Retention::Ttl(Duration::from_secs(86_400)))?;
        instances.push(Arc::new(Endpoint { keys, charges: charges.clone() }));
    }
    let orders = ["order-1001", "order-1002", "order-1003"];
    for key in orders {
        // Submitted twice at once, to both instances.
        let (a, b) = (instances[0].clone(), instances[1].clone());
        let (first, second) = tokio::join!(a.pay(key, 42), b.pay(key, 42));
        let (first, second) = (first?, second?);
        println!("{key}: concurrent answers {first:?} / {second:?}");
        if first != second {
            return Err(format!("{key}: the duplicates got different answers").into());
        }
        // And again after completion.
        let late = instances[1].pay(key, 42).await?;
        println!("{key}: late duplicate {late:?}");
        if late != first {
            return Err(format!("{key}: the late duplicate got {late:?}").into());
        }
    }
    let total = charges.load(Ordering::SeqCst);
    println!("{} keys, {} submissions, {total} charges", orders.len(), orders.len() * 3);
    if total != orders.len() {
        return Err(format!("expected exactly one charge per key, got {total}").into());
    }
    println!("OK: one execution per key");
    Ok(())
}
