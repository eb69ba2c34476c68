//! Config reload: several reader *processes* serve a configuration kept in ZooKeeper as several
//! nodes, while a writer process reloads it — part by part, deliberately slowly — under the write
//! lock of an `InterProcessReadWriteLock`, and then bumps the config's version (the data of the
//! config node itself, written last). At the end the program proves that no reader ever saw a
//! half-written configuration, that readers shared the lock, and that no read overlapped a write.
//!
//! Readers keep the config in a [`CuratorCache`] of the config node and its parts: they never poll.
//! They wait on the cache's latest-value receiver for a new version, and take the read lock only
//! for what needs it — a consistent read of several nodes: under the lock (no reload can run), they
//! read the version on the server once, wait until their cache has caught up with it, and read
//! every part from the cache, without another round trip.
//!
//! ```text
//! cargo run --release --example config_reload                  # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --example config_reload -- --readers 5 --reloads 10
//! ```
//!
//! Without the lock a reader would read some parts of version N and some of version N+1 (a "torn"
//! config); the proof below would fail.

use std::process::{ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_curator::cache::{CacheMode, CuratorCache};
use zk_curator::locks::{GuardedWrite, InterProcessReadWriteLock};
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(about = "Reload a multi-node config under a ZooKeeper write lock while reader processes serve it")]
struct Args {
    /// Reader processes.
    #[arg(long, default_value_t = 3)]
    readers: u32,
    /// Reloads the writer makes.
    #[arg(long, default_value_t = 5)]
    reloads: u32,
    /// Nodes the config is made of (written one by one).
    #[arg(long, default_value_t = 4)]
    parts: u32,
    /// Internal: run as a worker (ROLE reader|writer).
    #[arg(long, num_args = 6, value_names = ["ROLE", "ID", "CONNECT", "BASE", "RELOADS", "PARTS"], hide = true)]
    worker: Option<Vec<String>>,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &args.worker {
        Some(w) => runtime.block_on(worker(w)),
        None => runtime.block_on(coordinator(&args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0)
}

/// The config node: its data is the config's version (`vN`), written last by every reload.
fn config_path(base: &str) -> String {
    format!("{base}/config")
}

fn part_path(base: &str, i: u32) -> String {
    format!("{base}/config/part-{i}")
}

/// How long a reader waits for its cache to catch up with the version it read under the lock.
const CATCH_UP: Duration = Duration::from_secs(10);

/// One interval of a worker, parsed from its output.
#[derive(Debug)]
struct Interval {
    who: String,
    start: u128,
    end: u128,
}

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let client = CuratorClient::builder(&connect).session_timeout(Duration::from_secs(15)).connect().await?;
    let base = format!("/config-reload/run-{}", std::process::id());
    client.create(&config_path(&base)).data("v0").creating_parent_containers_if_needed().await?;
    for i in 0..args.parts {
        client.create(&part_path(&base, i)).data(b"v0").creating_parent_containers_if_needed().await?;
    }
    println!(
        "config of {} parts at {base}/config; {} reader processes, 1 writer process, lock {base}/lock",
        args.parts, args.readers
    );

    let exe = std::env::current_exe()?;
    let spawn = |role: &str, id: u32| {
        tokio::process::Command::new(&exe)
            .args(["--worker", role, &id.to_string(), &connect, &base])
            .args([args.reloads.to_string(), args.parts.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
    };
    let mut children = Vec::new();
    for id in 0..args.readers {
        children.push(spawn("reader", id)?);
    }
    children.push(spawn("writer", 0)?);

    let mut reads = Vec::new();
    let mut writes = Vec::new();
    let mut torn = Vec::new();
    let mut finished_readers = 0;
    let mut failed = 0;
    for mut child in children {
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["READ", who, seen, start, end] => {
                    if seen.starts_with("TORN") {
                        torn.push(format!("{who}: {seen}"));
                    }
                    reads.push(Interval { who: who.to_string(), start: start.parse()?, end: end.parse()? });
                }
                ["WROTE", version, start, end] => {
                    writes.push(Interval {
                        who: format!("writer {version}"),
                        start: start.parse()?,
                        end: end.parse()?,
                    });
                }
                ["DONE", _] => finished_readers += 1,
                _ => println!("{line}"),
            }
        }
        if !child.wait().await?.success() {
            failed += 1;
        }
    }

    // The proof, from what the workers reported (independent of the lock library).
    let overlapping_write = reads.iter().find_map(|r| {
        writes.iter().find(|w| r.start < w.end && w.start < r.end).map(|w| format!("{} overlapped {}", r.who, w.who))
    });
    let max_readers =
        reads.iter().map(|a| reads.iter().filter(|b| b.start <= a.start && a.start < b.end).count()).max();
    println!(
        "{} reads by {} readers, {} reloads; up to {} readers at once",
        reads.len(),
        args.readers,
        writes.len(),
        max_readers.unwrap_or(0)
    );
    let mut ok = true;
    if !torn.is_empty() {
        println!("PROOF FAILED: torn configs were read: {torn:?}");
        ok = false;
    }
    if let Some(overlap) = overlapping_write {
        println!("PROOF FAILED: a read overlapped a write: {overlap}");
        ok = false;
    }
    if writes.len() != args.reloads as usize || finished_readers != args.readers || failed > 0 {
        println!(
            "PROOF FAILED: {} of {} reloads, {finished_readers} of {} readers saw the last version, {failed} workers failed",
            writes.len(),
            args.reloads,
            args.readers
        );
        ok = false;
    }
    if ok {
        println!("PROOF OK: no reader saw a half-written config, no read overlapped a reload, every reader saw the last version");
    }
    client.close().await;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn worker(w: &[String]) -> AnyResult<ExitCode> {
    let (role, id, connect, base) = (w[0].as_str(), &w[1], &w[2], &w[3]);
    let (reloads, parts): (u32, u32) = (w[4].parse()?, w[5].parse()?);
    let client = CuratorClient::builder(connect).session_timeout(Duration::from_secs(15)).connect().await?;
    let lock = InterProcessReadWriteLock::new(&client, &format!("{base}/lock"))?;
    let last = format!("v{reloads}");
    if role == "writer" {
        for version in 1..=reloads {
            tokio::time::sleep(Duration::from_millis(40)).await;
            let guard = lock.write_lock().lock().await?;
            let start = now_us();
            let data = format!("v{version}");
            for i in 0..parts {
                // Part by part, with a pause: a torn config exists in between, for anyone
                // reading without the lock. Each write is fenced by our write lock.
                guard.guarded_write(GuardedWrite::new().set_data(&part_path(base, i), data.as_bytes(), None)).await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The version last: readers' caches see it once every part is written.
            guard.guarded_write(GuardedWrite::new().set_data(&config_path(base), data.as_bytes(), None)).await?;
            let end = now_us();
            guard.release().await?;
            println!("WROTE {data} {start} {end}");
        }
    } else {
        // The config node and its parts, kept current by one watch.
        let cache = CuratorCache::builder(&client, &config_path(base)).mode(CacheMode::Children).start()?;
        if !cache.wait_initialized_timeout(Duration::from_secs(30)).await? {
            return Err("the config cache did not load within 30 s".into());
        }
        // The config node's latest entry (its version): no polling, only `changed()`.
        let mut version = cache.latest();
        loop {
            let seen = read_consistently(&client, &lock, &cache, base, parts).await?;
            let whole = seen.values.iter().all(|v| v == &seen.values[0]);
            let verdict = if whole { seen.values[0].clone() } else { format!("TORN:{}", seen.values.join(",")) };
            println!("READ reader-{id} {verdict} {} {}", seen.start, seen.end);
            if whole && seen.values[0] == last {
                break;
            }
            // Serve this config until the next version is in (a reader that needs one node only
            // reads it from the cache, without the lock).
            let served = seen.version;
            version.wait_for(|entry| entry.as_ref().is_some_and(|e| e.data() != served.as_bytes())).await?;
        }
        cache.close().await;
        println!("DONE reader-{id}");
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// One consistent read of every part, and when it started and ended.
struct Read {
    /// The config's version the cache held (the config node's data).
    version: String,
    values: Vec<String>,
    start: u128,
    end: u128,
}

/// Reads every part under the read lock: no reload runs meanwhile, so once the cache holds the
/// version the server has (one read), it holds the parts of that version too — the cache re-reads
/// changed nodes in the order of their changes, and every reload writes the version last — and the
/// parts are read from the cache.
async fn read_consistently(
    client: &CuratorClient,
    lock: &InterProcessReadWriteLock,
    cache: &CuratorCache,
    base: &str,
    parts: u32,
) -> AnyResult<Read> {
    let guard = lock.read_lock().lock().await?;
    let start = now_us();
    let (_, current) = client.get_data(&config_path(base)).await?;
    let mut version = cache.latest();
    let caught_up = version.wait_for(|entry| entry.as_ref().is_some_and(|e| e.stat().mzxid >= current.mzxid));
    let held = tokio::time::timeout(CATCH_UP, caught_up)
        .await
        .map_err(|_| "the cache did not catch up with the version")??;
    let version = held.as_ref().map(|e| String::from_utf8_lossy(e.data()).into_owned()).unwrap_or_default();
    drop(held);
    let mut values = Vec::new();
    for i in 0..parts {
        let part = cache.entry(&part_path(base, i)).ok_or("a part is missing from the cache")?;
        values.push(String::from_utf8_lossy(part.data()).into_owned());
        // As if serving a request from it: the read is not instantaneous.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let end = now_us();
    guard.release().await?;
    Ok(Read { version, values, start, end })
}
