//! Work claims ("lock tags"): several worker *processes* claim batches of work items under their
//! own tags and complete them. One worker is killed with -9 in the middle of its batch (its claims
//! go with its session), one stalls holding its batch and is reclaimed by a supervisor (it is told
//! its claims are lost, and its late completes are refused). At the end the program proves, from
//! what the workers reported, that every item was completed exactly once and that no claim node
//! was left behind.
//!
//! ```text
//! cargo run --example work_claims                    # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example work_claims -- --workers 5 --items 500 --batch 20
//! ```

use std::collections::HashMap;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_curator::claims::WorkClaims;
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(about = "Process work items from several processes with ZooKeeper work claims")]
struct Args {
    /// Worker processes (the first is killed with -9, the second stalls; at least 3).
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Work items.
    #[arg(long, default_value_t = 300)]
    items: usize,
    /// Items claimed per call.
    #[arg(long, default_value_t = 25)]
    batch: usize,
    /// Internal: run as a worker.
    #[arg(long, num_args = 4, value_names = ["ROLE", "ID", "CONNECT", "PATH"], hide = true)]
    worker: Option<Vec<String>>,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SESSION: Duration = Duration::from_secs(4);

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
        Some(w) => runtime.block_on(worker(w, args.batch)),
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

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    if args.workers < 3 || args.items == 0 || args.batch == 0 {
        return Err("--workers must be at least 3, --items and --batch at least 1".into());
    }
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let path = format!("/work-claims/run-{}", std::process::id());
    let client = CuratorClient::connect(&connect).await?;
    let supervisor = WorkClaims::new(&client, &path, "supervisor")?;
    for i in 0..args.items {
        supervisor.add(&format!("item-{i:05}"), format!("payload {i}").as_bytes()).await?;
    }
    println!("{} items under {path}; {} worker processes, batch {}", args.items, args.workers, args.batch);

    let exe = std::env::current_exe()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u32, String)>();
    let mut children = Vec::new();
    for id in 0..args.workers {
        let role = match id {
            0 => "doomed",
            1 => "stalled",
            _ => "worker",
        };
        let mut child = tokio::process::Command::new(&exe)
            .args(["--worker", role, &id.to_string(), &connect, &path, "--batch", &args.batch.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send((id, line));
            }
        });
        children.push(child);
    }
    drop(tx);

    let mut done: HashMap<String, Vec<u32>> = HashMap::new();
    let mut refused = 0;
    let mut killed = false;
    let mut reclaim = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            line = rx.recv() => {
                let Some((id, line)) = line else { break };
                match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                    ["DONE", item] => done.entry(item.to_string()).or_default().push(id),
                    ["REFUSED", _] => refused += 1,
                    ["CLAIMED", n] if id == 0 && !killed => {
                        children[0].start_kill()?; // SIGKILL, mid-batch
                        killed = true;
                        println!("worker 0 claimed {n} items and was killed with -9");
                    }
                    _ => println!("worker {id}: {line}"),
                }
            }
            _ = reclaim.tick() => {
                for r in supervisor.reclaim_older_than(Duration::from_secs(2)).await? {
                    println!("reclaimed {} from {} (held {:?})", r.item, r.tag, r.held_for);
                }
            }
        }
    }
    for child in &mut children {
        let _ = child.wait().await;
    }

    let twice: Vec<_> = done.iter().filter(|(_, by)| by.len() > 1).collect();
    let claims_left = supervisor.unclaimed().await?.len();
    let zk_left = client.get_children(&format!("{path}/claims")).await?.len();
    let items_left = client.get_children(&format!("{path}/items")).await?.len();
    let mut ok = true;
    println!("{} items completed, {refused} late completes refused", done.len());
    if done.len() != args.items || items_left > 0 || claims_left > 0 {
        println!("PROOF FAILED: {} of {} items completed, {items_left} left", done.len(), args.items);
        ok = false;
    }
    if !twice.is_empty() {
        println!("PROOF FAILED: completed more than once: {twice:?}");
        ok = false;
    }
    if zk_left > 0 {
        println!("PROOF FAILED: {zk_left} claim nodes left behind");
        ok = false;
    }
    if !killed || refused == 0 {
        println!("PROOF FAILED: the kill ({killed}) or the stalled worker's refusal ({refused}) did not happen");
        ok = false;
    }
    if ok {
        println!("PROOF OK: every item completed exactly once despite a kill -9 and a stalled worker; no claim left");
    }
    client.close().await;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn worker(w: &[String], batch: usize) -> AnyResult<ExitCode> {
    let (role, id, connect, path) = (w[0].as_str(), &w[1], &w[2], &w[3]);
    let client = CuratorClient::builder(connect).session_timeout(SESSION).connect().await?;
    let work = WorkClaims::new(&client, path, &format!("{role}-{id}-pid{}", std::process::id()))?;
    if role != "worker" {
        let claims = work.claim(batch).await?;
        println!("CLAIMED {}", claims.len());
        if role == "doomed" {
            std::future::pending::<()>().await; // killed with -9 here
        }
        // Stalled: never completes in time; the supervisor reclaims the batch.
        for claim in &claims {
            claim.lost().await;
        }
        for claim in &claims {
            if work.complete(claim.item()).await.is_err() {
                println!("REFUSED {}", claim.item());
            } else {
                println!("DONE {}", claim.item());
            }
        }
    }
    loop {
        let claims = work.claim(batch).await?;
        if claims.is_empty() {
            // Items held by the killed worker come back when its session expires.
            if !work.wait_for_work(SESSION * 3).await? {
                break;
            }
            continue;
        }
        for claim in claims {
            tokio::time::sleep(Duration::from_millis(2)).await; // the work itself
            work.complete(claim.item()).await?;
            println!("DONE {}", claim.item());
        }
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
