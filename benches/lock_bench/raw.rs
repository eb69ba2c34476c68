//! `raw N`: the floor — the same requests a mutex makes, sent bare on a plain `zookeeper-client`
//! session: N x (create ephemeral-sequential, list, delete), sequential and pipelined, then N x exists.

use std::time::{Duration, Instant};

use zk_curator::raw as zk;

use crate::report::{mean, pct, sorted, Report};
use crate::{unique_path, BenchResult, BENCH_SESSION_TIMEOUT, WARMUP};

pub(crate) async fn raw(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let zk = zk::Client::connector().with_session_timeout(BENCH_SESSION_TIMEOUT).connect(connect).await?;
    let parent = unique_path("raw");
    zk.mkdir(&parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    // Same name length and data size as a protected Curator lock node.
    let prefix = format!("{parent}/_c_00000000-0000-0000-0000-000000000000-lock-");
    let data = b"127.0.0.1";

    for _ in 0..WARMUP.min(n) {
        let (_, seq) = zk.create(&prefix, data, &options).await?;
        zk.list_children(&parent).await?;
        zk.delete(&format!("{prefix}{seq}"), None).await?;
    }

    // Each sequential cycle (every request awaited before the next: three round trips) is followed
    // by a pipelined one (create + list sent back to back, what the mutex does), so that both see
    // the same server and machine conditions.
    let (mut create, mut list, mut delete, mut cycle) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut pipelined, mut pipelined_delete) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut list_after_create = Vec::with_capacity(n);
    let mut missed = 0usize;
    for _ in 0..n {
        let t0 = Instant::now();
        let (_, seq) = zk.create(&prefix, data, &options).await?;
        let t1 = Instant::now();
        let children = zk.list_children(&parent).await?;
        let t2 = Instant::now();
        zk.delete(&format!("{prefix}{seq}"), None).await?;
        let t3 = Instant::now();
        debug_assert_eq!(children.len(), 1);
        create.push(t1 - t0);
        list.push(t2 - t1);
        delete.push(t3 - t2);
        cycle.push(t3 - t0);

        let p = pipelined_create_list(&zk, &prefix, &parent, data, &options).await?;
        pipelined.push(p.elapsed);
        list_after_create.push(p.list_after_create);
        let t0 = Instant::now();
        zk.delete(&p.path, None).await?;
        pipelined_delete.push(t0.elapsed());
        if !p.seen {
            missed += 1;
        }
    }
    // Rate of the sequential cycles alone.
    let cycles_elapsed: Duration = cycle.iter().sum();

    let mut exists = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t0 = Instant::now();
        zk.check_stat(&parent).await?;
        exists.push(t0.elapsed());
    }
    let exists_elapsed = started.elapsed();
    let _ = zk.delete(&parent, None).await;

    let (create, list, delete, cycle) = (sorted(create), sorted(list), sorted(delete), sorted(cycle));
    let (pipelined, pipelined_delete, exists) = (sorted(pipelined), sorted(pipelined_delete), sorted(exists));
    report.rate("cycle_per_s", n, cycles_elapsed);
    report.us("cycle_p50_us", pct(&cycle, 0.50));
    report.us("cycle_p99_us", pct(&cycle, 0.99));
    report.us("create_eph_seq_p50_us", pct(&create, 0.50));
    report.us("create_eph_seq_p99_us", pct(&create, 0.99));
    report.us("get_children_p50_us", pct(&list, 0.50));
    report.us("get_children_p99_us", pct(&list, 0.99));
    report.us("delete_p50_us", pct(&delete, 0.50));
    report.us("delete_p99_us", pct(&delete, 0.99));
    // Means, to compare with the many-waiters hand-off time (a mean, tail included).
    report.us("create_eph_seq_mean_us", mean(&create));
    report.us("get_children_mean_us", mean(&list));
    report.us("delete_mean_us", mean(&delete));
    report.us("create_list_pipelined_p50_us", pct(&pipelined, 0.50));
    report.us("create_list_pipelined_p99_us", pct(&pipelined, 0.99));
    // Listing replies that came with the create's reply (same read) rather than a round trip later.
    let same_batch = list_after_create.iter().filter(|d| **d < Duration::from_micros(50)).count();
    report.metric("pipelined_list_with_create_pct", format_args!("{:.1}", 100.0 * same_batch as f64 / n.max(1) as f64));
    report.us("pipelined_list_after_create_p50_us", pct(&sorted(list_after_create), 0.50));
    report.us("delete_after_pipelined_p50_us", pct(&pipelined_delete, 0.50));
    report.metric("pipelined_listing_missed_node", missed);
    report.rate("exists_per_s", n, exists_elapsed);
    report.us("exists_p50_us", pct(&exists, 0.50));
    report.us("exists_p99_us", pct(&exists, 0.99));
    Ok(())
}

/// One pipelined create + list: the created path, whether the listing contained it, the time until
/// the listing arrived, and how much later than the create's reply it arrived.
pub(crate) struct Pipelined {
    pub(crate) path: String,
    seen: bool,
    pub(crate) elapsed: Duration,
    list_after_create: Duration,
}

/// Sends a create of `prefix` (ephemeral-sequential) and a listing of `parent` back to back (both
/// are queued on the session when called), then awaits both.
pub(crate) async fn pipelined_create_list(
    zk: &zk::Client,
    prefix: &str,
    parent: &str,
    data: &[u8],
    options: &zk::CreateOptions<'_>,
) -> BenchResult<Pipelined> {
    let t0 = Instant::now();
    let created = zk.create(prefix, data, options);
    let listed = zk.list_children(parent);
    let (_, seq) = created.await?;
    let t1 = Instant::now();
    let children = listed.await?;
    let t2 = Instant::now();
    let path = format!("{prefix}{seq}");
    let seen = children.iter().any(|c| path.ends_with(c.as_str()));
    Ok(Pipelined { path, seen, elapsed: t2 - t0, list_after_create: t2 - t1 })
}
