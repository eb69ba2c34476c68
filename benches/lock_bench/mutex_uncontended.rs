//! `mutex-uncontended N [--guards]`: one session, N x acquire + release, each interleaved with the
//! same requests sent bare on the same session (`floor_*`).

use std::time::{Duration, Instant};

use zk_curator::locks::InterProcessMutex;
use zk_curator::raw as zk;

use crate::raw::pipelined_create_list;
use crate::report::{pct, sorted, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT, WARMUP};

/// One acquire + release cycle of `mutex`: Curator-style `acquire()`/`release()`, or with `guards`
/// `lock()` and the guard's release. Returns the two durations.
async fn uncontended_cycle(mutex: &InterProcessMutex, guards: bool) -> BenchResult<(Duration, Duration)> {
    let t0 = Instant::now();
    if guards {
        let guard = mutex.lock().await?;
        let t1 = Instant::now();
        guard.release().await?;
        Ok((t1 - t0, t1.elapsed()))
    } else {
        mutex.acquire().await?;
        let t1 = Instant::now();
        mutex.release().await?;
        Ok((t1 - t0, t1.elapsed()))
    }
}

pub(crate) async fn mutex_uncontended(report: &Report, connect: &str, n: usize, guards: bool) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let base = unique_path("uncontended");
    let mutex = InterProcessMutex::new(&client, &format!("{base}/lock"))?;
    // The floor, on the same session, interleaved with the mutex cycles: the pipelined create +
    // list and the delete the mutex does, without the library, in a sibling directory.
    let zk = zk_curator::raw::client(&client)?;
    let floor_parent = format!("{base}/floor");
    zk.mkdir(&floor_parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let floor_prefix = format!("{floor_parent}/_c_00000000-0000-0000-0000-000000000000-lock-");
    let floor_options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let data = client.default_data().to_vec();
    for _ in 0..WARMUP.min(n) {
        uncontended_cycle(&mutex, guards).await?;
        let p = pipelined_create_list(&zk, &floor_prefix, &floor_parent, &data, &floor_options).await?;
        zk.delete(&p.path, None).await?;
    }
    let (mut acquire, mut release) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut floor_create_list, mut floor_delete) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let (acquired, released) = uncontended_cycle(&mutex, guards).await?;
        acquire.push(acquired);
        release.push(released);

        let p = pipelined_create_list(&zk, &floor_prefix, &floor_parent, &data, &floor_options).await?;
        floor_create_list.push(p.elapsed);
        let t0 = Instant::now();
        zk.delete(&p.path, None).await?;
        floor_delete.push(t0.elapsed());
    }
    // Rate of the mutex cycles alone (the floor cycles between them are not counted).
    let elapsed: Duration = acquire.iter().chain(&release).sum();
    let _ = zk.delete(&floor_parent, None).await;
    client.close().await;
    let (acquire, release) = (sorted(acquire), sorted(release));
    let (floor_create_list, floor_delete) = (sorted(floor_create_list), sorted(floor_delete));
    report.rate("ops_per_s", n, elapsed);
    report.us("acquire_p50_us", pct(&acquire, 0.50));
    report.us("acquire_p99_us", pct(&acquire, 0.99));
    report.us("release_p50_us", pct(&release, 0.50));
    report.us("release_p99_us", pct(&release, 0.99));
    report.metric("n", n);
    report.metric("guards", u8::from(guards));
    report.us("floor_create_list_p50_us", pct(&floor_create_list, 0.50));
    report.us("floor_create_list_p99_us", pct(&floor_create_list, 0.99));
    report.us("floor_delete_p50_us", pct(&floor_delete, 0.50));
    report.us("floor_delete_p99_us", pct(&floor_delete, 0.99));
    let ratio = |a: Duration, b: Duration| if b.is_zero() { 0.0 } else { a.as_secs_f64() / b.as_secs_f64() };
    report.metric(
        "acquire_vs_floor_p50",
        format_args!("{:.2}", ratio(pct(&acquire, 0.50), pct(&floor_create_list, 0.50))),
    );
    report.metric("release_vs_floor_p50", format_args!("{:.2}", ratio(pct(&release, 0.50), pct(&floor_delete, 0.50))));
    Ok(())
}
