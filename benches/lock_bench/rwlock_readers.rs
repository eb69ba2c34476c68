//! `rwlock-readers C N [HOLD_MS]`: C sessions, one reader each, N read-lock acquisitions in total.

use std::time::Duration;

use zk_curator::locks::{InterProcessReadWriteLock, ReadLock};

use crate::connect_clients;
use crate::report::{pct, Report};
use crate::turns::{take_turns, BoxedResult};
use crate::{unique_path, BenchResult};

pub(crate) async fn rwlock_readers(
    report: &Report,
    connect: &str,
    clients: usize,
    n: usize,
    hold: Duration,
) -> BenchResult<()> {
    let path = unique_path("rwlock-readers");
    let sessions = connect_clients(connect, clients).await?;
    let mut readers = Vec::with_capacity(clients);
    for client in &sessions {
        readers.push(InterProcessReadWriteLock::new(client, &path)?.read_lock().clone());
    }
    let turns = take_turns(&sessions, readers, n, hold, usize::MAX, take_read, give_back_read).await;
    let turns = turns.map_err(|e| format!("a reader failed: {e}"))?;
    report.rate("ops_per_s", turns.acquire.len(), turns.elapsed);
    report.us("acquire_p50_us", pct(&turns.acquire, 0.50));
    report.us("acquire_p99_us", pct(&turns.acquire, 0.99));
    report.metric("max_concurrent_readers", turns.most_inside);
    report.metric("clients", clients);
    report.metric("n", n);
    report.metric("hold_ms", hold.as_millis());
    Ok(())
}

fn take_read(read: &ReadLock) -> BoxedResult<'_, ()> {
    Box::pin(read.acquire())
}

fn give_back_read(read: &ReadLock, (): ()) -> BoxedResult<'_, ()> {
    Box::pin(read.release())
}
