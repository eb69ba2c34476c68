//! `claims P B M`: P sessions drain M work items with `WorkClaims` (claim B at a time, complete each
//! item): items per second, each session's share, and the same M items drained by a floor of bare
//! requests on disjoint slices (per batch, B pipelined ephemeral creates, then B pipelined
//! `{delete claim, delete item}` transactions): the claim → complete overhead.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use zk_curator::claims::WorkClaims;
use zk_curator::{CreateMode, Transaction};

use crate::report::Report;
use crate::{connect_clients, unique_path, BenchResult};

async fn add_items(work: &WorkClaims, m: usize) -> BenchResult<()> {
    for chunk in (0..m).collect::<Vec<_>>().chunks(500) {
        let adds = chunk.iter().map(|i| {
            let name = format!("item-{i:07}");
            let work = work.clone();
            async move { work.add(&name, b"payload").await }
        });
        for r in futures_join(adds.collect()).await {
            r?;
        }
    }
    Ok(())
}

/// Runs every future at once (each a task: its requests are pipelined on the session).
async fn futures_join<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("a bench task panicked"));
    }
    out
}

pub(crate) async fn claims(report: &Report, connect: &str, p: usize, b: usize, m: usize) -> BenchResult<()> {
    if p == 0 || b == 0 || m == 0 {
        return Err("claims needs P, B and M of at least 1".into());
    }
    let sessions = connect_clients(connect, p).await?;
    let path = unique_path("claims");
    let loader = WorkClaims::new(&sessions[0], &path, "loader")?;
    add_items(&loader, m).await?;

    let completed = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(p + 1));
    let mut tasks = Vec::new();
    for (i, client) in sessions.iter().enumerate() {
        let work = WorkClaims::new(client, &path, &format!("bench-{i}"))?;
        let (completed, barrier) = (completed.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut mine = 0usize;
            loop {
                let batch = work.claim(b).await?;
                if batch.is_empty() {
                    if work.unclaimed().await?.is_empty() {
                        break;
                    }
                    continue;
                }
                let done: Vec<_> = batch
                    .iter()
                    .map(|c| {
                        let (work, item) = (work.clone(), c.item().to_string());
                        async move { work.complete(&item).await }
                    })
                    .collect();
                for r in futures_join(done).await {
                    r?;
                    mine += 1;
                }
            }
            completed.fetch_add(mine, Ordering::Relaxed);
            Ok::<_, zk_curator::Error>(mine)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut shares = Vec::new();
    for t in tasks {
        shares.push(t.await??);
    }
    let elapsed = started.elapsed();

    // The floor: the same number of items, drained by bare requests on disjoint slices.
    let floor_path = unique_path("claims-floor");
    let floor_loader = WorkClaims::new(&sessions[0], &floor_path, "loader")?;
    add_items(&floor_loader, m).await?;
    let _ = sessions[0].create(&format!("{floor_path}/claims")).creating_parents_if_needed().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(p + 1));
    let mut tasks = Vec::new();
    for (i, client) in sessions.iter().enumerate() {
        let (client, barrier, floor_path) = (client.clone(), barrier.clone(), floor_path.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mine: Vec<usize> = (0..m).filter(|k| k % p == i).collect();
            for chunk in mine.chunks(b) {
                let creates = chunk.iter().map(|k| {
                    let claim = format!("{floor_path}/claims/item-{k:07}");
                    let client = client.clone();
                    async move { client.create(&claim).mode(CreateMode::Ephemeral).await.map(|_| ()) }
                });
                for r in futures_join(creates.collect()).await {
                    r?;
                }
                let txs = chunk.iter().map(|k| {
                    let t = Transaction::new()
                        .delete(&format!("{floor_path}/claims/item-{k:07}"), None)
                        .delete(&format!("{floor_path}/items/item-{k:07}"), None);
                    let client = client.clone();
                    async move { client.commit(t).await.map(|_| ()) }
                });
                for r in futures_join(txs.collect()).await {
                    r?;
                }
            }
            Ok::<_, zk_curator::Error>(())
        }));
    }
    barrier.wait().await;
    let floor_started = Instant::now();
    for t in tasks {
        t.await??;
    }
    let floor_elapsed = floor_started.elapsed();
    for client in &sessions {
        client.close().await;
    }

    report.metric("sessions", p);
    report.metric("batch", b);
    report.metric("items", m);
    report.metric("completed", completed.load(Ordering::Relaxed));
    report.rate("items_per_s", m, elapsed);
    report.rate("floor_items_per_s", m, floor_elapsed);
    report.metric("vs_floor", format_args!("{:.2}", floor_elapsed.as_secs_f64() / elapsed.as_secs_f64()));
    let shares: Vec<String> = shares.iter().map(|s| format!("{:.1}", 100.0 * *s as f64 / m as f64)).collect();
    report.metric("share_pct", shares.join("/"));
    report.us("per_item_us", elapsed / m as u32);
    report.us("floor_per_item_us", floor_elapsed / m as u32);
    Ok(())
}
