//! Job throttle: several worker *processes* each run a batch of jobs, and at most `--limit` jobs
//! run at once across all of them — each job runs under a lease of one `InterProcessSemaphoreV2`
//! (e.g. at most 2 exports hitting a fragile downstream service at a time, whatever the number of
//! workers). At the end the program proves, from the start and end times the workers reported,
//! that never more than `--limit` jobs overlapped, that the limit was used, that every job ran and
//! that no lease node was left behind.
//!
//! ```text
//! cargo run --release --example job_throttle                   # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --example job_throttle -- --workers 6 --limit 3
//! cargo run --release --example job_throttle -- --without-semaphore   # watch the proof fail
//! ```
//!
//! The semaphore is wire-compatible with Curator's: Java workers using
//! `new InterProcessSemaphoreV2(client, "<base>/throttle", limit)` share the same limit.

use std::process::{ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_curator::locks::InterProcessSemaphoreV2;
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(about = "Run jobs from several worker processes, at most LIMIT at once, under a ZooKeeper semaphore")]
struct Args {
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Jobs each worker runs.
    #[arg(long, default_value_t = 6)]
    jobs: u32,
    /// At most this many jobs at once, across all workers.
    #[arg(long, default_value_t = 2)]
    limit: usize,
    /// How long one job takes, in milliseconds.
    #[arg(long, default_value_t = 30)]
    job_ms: u64,
    /// Run the jobs without the semaphore, to see the proof fail.
    #[arg(long)]
    without_semaphore: bool,
    /// Internal: run as a worker.
    #[arg(long, num_args = 6, value_names = ["ID", "CONNECT", "PATH", "JOBS", "LIMIT", "JOB_MS"], hide = true)]
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
        Some(w) => runtime.block_on(worker(w, args.without_semaphore)),
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

/// One job, as its worker reported it.
#[derive(Debug)]
struct Job {
    who: String,
    start: u128,
    end: u128,
}

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    if args.limit == 0 || args.workers == 0 || args.jobs == 0 {
        return Err("--limit, --workers and --jobs must be at least 1".into());
    }
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let path = format!("/job-throttle/run-{}/throttle", std::process::id());
    println!(
        "{} worker processes x {} jobs of {} ms, at most {} at once (semaphore {path}){}",
        args.workers,
        args.jobs,
        args.job_ms,
        args.limit,
        if args.without_semaphore { " -- WITHOUT the semaphore" } else { "" }
    );

    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for id in 0..args.workers {
        let mut command = tokio::process::Command::new(&exe);
        command
            .args(["--worker", &id.to_string(), &connect, &path])
            .args([args.jobs.to_string(), args.limit.to_string(), args.job_ms.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if args.without_semaphore {
            command.arg("--without-semaphore");
        }
        children.push(command.spawn()?);
    }

    let mut jobs = Vec::new();
    let mut leases_left = 0;
    let mut failed = 0;
    for mut child in children {
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["JOB", who, start, end] => {
                    jobs.push(Job { who: who.to_string(), start: start.parse()?, end: end.parse()? })
                }
                ["LEFT", _, count] => leases_left += count.parse::<usize>()?,
                _ => println!("{line}"),
            }
        }
        if !child.wait().await?.success() {
            failed += 1;
        }
    }

    // The proof, from the workers' reports (independent of the semaphore): the most jobs running
    // at the moment any job started.
    let most_at_once =
        jobs.iter().map(|a| jobs.iter().filter(|b| b.start <= a.start && a.start < b.end).count()).max().unwrap_or(0);
    let busiest = jobs
        .iter()
        .filter(|a| jobs.iter().filter(|b| b.start <= a.start && a.start < b.end).count() == most_at_once)
        .map(|a| a.who.as_str())
        .next()
        .unwrap_or("-");

    let expected = (args.workers * args.jobs) as usize;
    println!("{} jobs ran; at most {most_at_once} at once (when {busiest} started)", jobs.len());
    let mut ok = true;
    if most_at_once > args.limit {
        println!("PROOF FAILED: {most_at_once} jobs ran at once, over the limit of {}", args.limit);
        ok = false;
    }
    if most_at_once < args.limit.min(args.workers as usize) {
        println!("PROOF FAILED: never more than {most_at_once} jobs at once: the limit of {} went unused", args.limit);
        ok = false;
    }
    if jobs.len() != expected || failed > 0 {
        println!("PROOF FAILED: {} of {expected} jobs reported, {failed} workers failed", jobs.len());
        ok = false;
    }
    if leases_left > 0 {
        println!("PROOF FAILED: the workers left {leases_left} nodes of their sessions under {path}");
        ok = false;
    }
    if ok {
        println!(
            "PROOF OK: all {expected} jobs ran, never more than {} at once across {} processes, no lease left behind",
            args.limit, args.workers
        );
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn worker(w: &[String], without_semaphore: bool) -> AnyResult<ExitCode> {
    let (id, connect, path) = (&w[0], &w[1], &w[2]);
    let (jobs, limit, job_ms): (u32, usize, u64) = (w[3].parse()?, w[4].parse()?, w[5].parse()?);
    let client = CuratorClient::builder(connect).session_timeout(Duration::from_secs(15)).connect().await?;
    let semaphore = InterProcessSemaphoreV2::new(&client, path, limit)?;
    for job in 0..jobs {
        let lease = if without_semaphore { None } else { Some(semaphore.acquire().await?) };
        let start = now_us();
        // The job itself. A real one would also watch `lease.lost()` and stop if the lease may be
        // gone (session lost), as a lock holder does.
        tokio::time::sleep(Duration::from_millis(job_ms)).await;
        let end = now_us();
        if let Some(lease) = lease {
            lease.release().await?;
        }
        println!("JOB worker-{id}/job-{job} {start} {end}");
    }
    // Before our session ends (and takes its ephemeral nodes with it): nothing of ours is left.
    println!("LEFT worker-{id} {}", nodes_of_our_session(&client, path).await?);
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// How many lease and internal-mutex nodes under `path` belong to our session.
async fn nodes_of_our_session(client: &CuratorClient, path: &str) -> AnyResult<usize> {
    let mut ours = 0;
    for parent in ["leases", "locks"] {
        let parent = format!("{path}/{parent}");
        let children = match client.get_children(&parent).await {
            Ok(children) => children,
            Err(e) if e.code() == Some(zk_curator::ErrorCode::NoNode) => continue,
            Err(e) => return Err(e.into()),
        };
        for child in children {
            if let Ok(Some(stat)) = client.exists(&format!("{parent}/{child}")).await {
                ours += usize::from(stat.ephemeral_owner == client.session_id());
            }
        }
    }
    Ok(ours)
}
