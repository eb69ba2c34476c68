//! Several sessions taking turns on something more than one may hold (the read lock, a
//! semaphore's leases): latencies and the most holders seen at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::{CuratorClient, Error};

use crate::report::collect_latencies;
use crate::WARMUP;

pub(crate) type BoxedResult<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, Error>> + Send + 'a>>;

/// What [`take_turns`] measured.
pub(crate) struct Turns {
    /// Acquire latencies, sorted.
    pub(crate) acquire: Vec<Duration>,
    pub(crate) elapsed: Duration,
    /// The most holders inside at once, by a counter that does not trust the library.
    pub(crate) most_inside: usize,
    /// How often more than the limit were inside.
    pub(crate) over_limit: usize,
}

/// Each of `holders` (one per session) is warmed up, then they take `n` turns in total from one
/// start line: take, hold for `hold`, give back. The sessions are closed at the end.
pub(crate) async fn take_turns<H: Send + Sync + 'static, T: Send + 'static>(
    sessions: &[CuratorClient],
    holders: Vec<H>,
    n: usize,
    hold: Duration,
    limit: usize,
    take: for<'a> fn(&'a H) -> BoxedResult<'a, T>,
    give_back: for<'a> fn(&'a H, T) -> BoxedResult<'a, ()>,
) -> Result<Turns, String> {
    let warm_up = async {
        for holder in &holders {
            give_back(holder, take(holder).await?).await?;
        }
        for _ in 0..WARMUP.min(n) {
            give_back(&holders[0], take(&holders[0]).await?).await?;
        }
        Ok::<_, Error>(())
    };
    warm_up.await.map_err(|e| format!("warming up: {e}"))?;
    let tickets = Arc::new(AtomicUsize::new(n));
    let inside = Arc::new(AtomicUsize::new(0));
    let most_inside = Arc::new(AtomicUsize::new(0));
    let over_limit = Arc::new(AtomicUsize::new(0));
    let start_line = Arc::new(tokio::sync::Barrier::new(holders.len() + 1));
    let mut tasks = Vec::with_capacity(holders.len());
    for holder in holders {
        let (tickets, inside, most_inside, over_limit, start_line) =
            (tickets.clone(), inside.clone(), most_inside.clone(), over_limit.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            start_line.wait().await;
            while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                let t0 = Instant::now();
                let taken = take(&holder).await?;
                latencies.push(t0.elapsed());
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most_inside.fetch_max(now, Ordering::SeqCst);
                if now > limit {
                    over_limit.fetch_add(1, Ordering::SeqCst);
                }
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                give_back(&holder, taken).await?;
            }
            Ok::<_, Error>(latencies)
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let collected = collect_latencies(tasks).await;
    let elapsed = started.elapsed();
    for client in sessions {
        client.close().await;
    }
    let (acquire, _) = collected?;
    Ok(Turns {
        acquire,
        elapsed,
        most_inside: most_inside.load(Ordering::SeqCst),
        over_limit: over_limit.load(Ordering::SeqCst),
    })
}
