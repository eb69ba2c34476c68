//! `semaphore L C N [HOLD_MS]`: C sessions share an L-lease semaphore, N leases in total.

use std::time::Duration;

use zk_curator::locks::{InterProcessSemaphoreV2, Lease};

use crate::connect_clients;
use crate::report::{pct, Report};
use crate::turns::{take_turns, BoxedResult};
use crate::{unique_path, BenchResult};

pub(crate) async fn semaphore(
    report: &Report,
    connect: &str,
    leases: usize,
    clients: usize,
    n: usize,
    hold: Duration,
) -> BenchResult<()> {
    let path = unique_path("semaphore");
    let sessions = connect_clients(connect, clients).await?;
    let mut semaphores = Vec::with_capacity(clients);
    for client in &sessions {
        semaphores.push(InterProcessSemaphoreV2::new(client, &path, leases)?);
    }
    let turns = take_turns(&sessions, semaphores, n, hold, leases, take_lease, give_back_lease).await;
    let turns = turns.map_err(|e| format!("a lease holder failed: {e}"))?;
    report.rate("ops_per_s", turns.acquire.len(), turns.elapsed);
    report.us("acquire_p50_us", pct(&turns.acquire, 0.50));
    report.us("acquire_p99_us", pct(&turns.acquire, 0.99));
    report.metric("max_concurrent_holders", turns.most_inside);
    report.metric("over_limit_violations", turns.over_limit);
    report.metric("leases", leases);
    report.metric("clients", clients);
    report.metric("n", n);
    report.metric("hold_ms", hold.as_millis());
    Ok(())
}

fn take_lease(semaphore: &InterProcessSemaphoreV2) -> BoxedResult<'_, Lease> {
    Box::pin(semaphore.acquire())
}

fn give_back_lease(_: &InterProcessSemaphoreV2, lease: Lease) -> BoxedResult<'_, ()> {
    Box::pin(lease.release())
}
