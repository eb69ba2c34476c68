//! `discovery N`: service discovery as the Curator side's `discovery` mode measures it — one
//! session registers N instances of service `bench`; a second session's `ServiceCache` starts and
//! is polled until it holds all N; a round-robin `ServiceProvider` picks 1,000,000 instances; then
//! 200 x (register one more, wait until the cache holds it, unregister).
//!
//! Curator registers one instance per round trip; ours registers the N with `register_all` (their
//! creates sent together). Beside it: the N registered one by one with `register`
//! (`register_one_by_one_per_s`) and the floors — N bare creates of the same data pipelined on one
//! session (`floor_create_per_s`), and per churn step a bare create seen by a children watch of
//! the other session (`floor_create_to_watch_p50_us`): what "register → seen" cannot beat, since
//! the cache reads the new node after the watch fires. Then the churn once more, the change
//! awaited rather than polled (`register_to_cache_awaited_*`; the Curator side has no such line).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use zk_curator::discovery::{RoundRobinStrategy, ServiceCache, ServiceCacheEvents, ServiceDiscovery, ServiceInstance};
use zk_curator::raw as zk;

use crate::report::{mean, pct, proc_status_kb, sorted, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

/// Picks timed (as the Curator side).
const LOOKUPS: usize = 1_000_000;
/// Register -> seen steps (as the Curator side).
const CHURN: usize = 200;
/// Longest wait for one churn instance to be seen (as the Curator side's 5 s).
const SEEN_LIMIT: Duration = Duration::from_secs(5);
/// Longest wait for the cache to hold all N (as the Curator side's 120 s).
const INIT_LIMIT: Duration = Duration::from_secs(120);

type Discovery = ServiceDiscovery<()>;

fn instance(name: &str, id: String, address: String, port: u16) -> BenchResult<ServiceInstance<()>> {
    Ok(ServiceInstance::builder(name).id(id).address(address).port(port).build()?)
}

/// One churn step: registers instance `id` of `bench`, and returns how long until `cache` held it
/// (`None`: not within [`SEEN_LIMIT`]); then unregisters it. Between looks at the cache's view it
/// spins, or with `events` awaits the cache's next change (at most a millisecond).
async fn register_until_seen(
    sd: &Discovery,
    cache: &ServiceCache<()>,
    id: &str,
    mut events: Option<&mut ServiceCacheEvents<()>>,
) -> BenchResult<Option<Duration>> {
    let x = instance("bench", id.to_string(), "10.9.9.9".into(), 9999)?;
    let a = Instant::now();
    sd.register(&x).await?;
    let mut seen = None;
    while a.elapsed() < SEEN_LIMIT {
        if cache.instances().iter().any(|y| y.id() == x.id()) {
            seen = Some(a.elapsed());
            break;
        }
        match events.as_deref_mut() {
            Some(events) => {
                let _ = tokio::time::timeout(Duration::from_millis(1), events.next()).await;
            }
            None => {
                // Gives up the OS thread too: `yield_now` alone, outside a runtime worker, re-polls
                // at once and holds a vCPU that the cache's read and the server need
                // (docs/performance.md).
                std::thread::yield_now();
                tokio::task::yield_now().await;
            }
        }
    }
    sd.unregister(&x).await?;
    Ok(seen)
}

pub(crate) async fn discovery(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let registering = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let looking = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let base = unique_path("discovery");
    let sd = Discovery::builder(&registering, &base).build()?;

    // Warm-up (uncounted), as the Curator side: min(WARMUP, 50) register + unregister.
    let warmup = std::env::var("WARMUP").ok().and_then(|w| w.parse().ok()).unwrap_or(200usize).min(50);
    for i in 0..warmup {
        let w = instance("warm", format!("w-{i}"), "10.0.0.1".into(), 9000 + i as u16)?;
        sd.register(&w).await?;
        sd.unregister(&w).await?;
    }

    let bench: Vec<ServiceInstance<()>> = (0..n)
        .map(|i| instance("bench", format!("i-{i}"), format!("10.0.{}.{}", i / 250, i % 250), 8080))
        .collect::<BenchResult<_>>()?;
    let t0 = Instant::now();
    sd.register_all(&bench).await?;
    let register = t0.elapsed();
    report.metric("instances", n);
    report.rate("register_per_s", n, register);

    // The same N one by one (another service, so that the cache below sees only `bench`).
    let one_by_one: Vec<ServiceInstance<()>> = (0..n)
        .map(|i| instance("bench-seq", format!("s-{i}"), format!("10.1.{}.{}", i / 250, i % 250), 8080))
        .collect::<BenchResult<_>>()?;
    let t0 = Instant::now();
    for i in &one_by_one {
        sd.register(i).await?;
    }
    report.rate("register_one_by_one_per_s", n, t0.elapsed());
    for i in &one_by_one {
        sd.unregister(i).await?;
    }

    // Floor: the same creates (same data size, ephemeral), pipelined on the registering session.
    let raw = zk::client(&registering)?;
    let floor_parent = format!("{base}-floor");
    raw.mkdir(&floor_parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let data = zk_curator::discovery::JsonInstanceSerializer::new();
    let data = zk_curator::discovery::InstanceSerializer::serialize(&data, &bench[0])?;
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let floor_paths: Vec<String> = (0..n).map(|i| format!("{floor_parent}/f-{i}")).collect();
    let t0 = Instant::now();
    let mut inflight = VecDeque::with_capacity(n);
    for path in &floor_paths {
        inflight.push_back(raw.create(path, &data, &ephemeral));
    }
    while let Some(reply) = inflight.pop_front() {
        reply.await?;
    }
    report.rate("floor_create_per_s", n, t0.elapsed());
    let mut deletes = VecDeque::with_capacity(n);
    for path in &floor_paths {
        deletes.push_back(raw.delete(path, None));
    }
    while let Some(reply) = deletes.pop_front() {
        reply.await?;
    }

    // Cache init: start -> holds all N, polled as the Curator side does.
    let sd2 = Discovery::builder(&looking, &base).build()?;
    let c0 = Instant::now();
    let cache = sd2.service_cache("bench")?;
    while cache.len() < n && c0.elapsed() < INIT_LIMIT {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    report.ms("cache_init_ms", c0.elapsed());
    report.metric("cache_instances", cache.len());

    let provider = sd2.provider_builder("bench").strategy(RoundRobinStrategy::new()).start()?;
    if !provider.wait_initialized_timeout(INIT_LIMIT).await? {
        return Err("the provider's cache did not load".into());
    }
    for _ in 0..10_000 {
        std::hint::black_box(provider.get_instance());
    }
    let mut seen = HashSet::with_capacity(2 * n);
    let l0 = Instant::now();
    for i in 0..LOOKUPS {
        let picked = provider.get_instance().ok_or("the provider picked nothing")?;
        if i < 2 * n {
            seen.insert(picked.id().to_string());
        }
    }
    report.rate("lookup_per_s", LOOKUPS, l0.elapsed());
    report.metric("lookup_distinct_first_2n", seen.len());

    // Churn: register one more -> the cache holds it, then unregister. Beside each step, the
    // floor: a bare create seen by the other session's children watch.
    let looking_raw = zk::client(&looking)?;
    let (mut latencies, mut floor) = (Vec::with_capacity(CHURN), Vec::with_capacity(CHURN));
    let mut missed = 0usize;
    for k in 0..CHURN {
        match register_until_seen(&sd, &cache, &format!("churn-{k}"), None).await? {
            Some(took) => latencies.push(took),
            None => missed += 1,
        }

        let (_, _, watcher) = looking_raw.get_and_watch_children(&floor_parent).await?;
        let path = format!("{floor_parent}/churn-{k}");
        let f0 = Instant::now();
        raw.create(&path, &data, &ephemeral).await?;
        watcher.changed().await;
        floor.push(f0.elapsed());
        raw.delete(&path, None).await?;
    }
    // The same steps observed without spinning: the cache's change events are awaited and the
    // view checked after each (and every millisecond): what a service awaiting the change sees.
    let mut events = cache.events();
    let (mut awaited, mut awaited_missed) = (Vec::with_capacity(CHURN), 0usize);
    for k in 0..CHURN {
        match register_until_seen(&sd, &cache, &format!("awaited-{k}"), Some(&mut events)).await? {
            Some(took) => awaited.push(took),
            None => awaited_missed += 1,
        }
    }
    drop(events);
    let latencies = sorted(latencies);
    report.us("register_to_cache_p50_us", pct(&latencies, 0.50));
    report.us("register_to_cache_p99_us", pct(&latencies, 0.99));
    report.us("register_to_cache_mean_us", mean(&latencies));
    report.us("register_to_cache_max_us", latencies.last().copied().unwrap_or_default());
    report.metric("churn_missed", missed);
    let awaited = sorted(awaited);
    report.us("register_to_cache_awaited_p50_us", pct(&awaited, 0.50));
    report.us("register_to_cache_awaited_p99_us", pct(&awaited, 0.99));
    report.metric("churn_awaited_missed", awaited_missed);
    let floor = sorted(floor);
    report.us("floor_create_to_watch_p50_us", pct(&floor, 0.50));
    report.us("floor_create_to_watch_p99_us", pct(&floor, 0.99));
    report.metric("peak_rss_kb", proc_status_kb("VmHWM"));

    provider.close().await;
    cache.close().await;
    sd.close().await?;
    let _ = raw.delete(&floor_parent, None).await;
    registering.close().await;
    looking.close().await;
    Ok(())
}
