//! Queue workers: producer *processes* put work items into a `DistributedQueue` with a lock path
//! (Curator's guaranteed delivery), and consumer processes take and acknowledge them. One consumer
//! is killed with -9 while it holds an item (the item, and every node it had taken ahead, comes
//! back when its session ends); another puts its first item back at the tail once (Curator's
//! `ErrorMode.REQUEUE`). At the end the program proves, from what the processes reported, that
//! every item put was processed exactly once, and that no item node and no lock node was left.
//!
//! ```text
//! cargo run --example queue_workers                    # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example queue_workers -- --producers 3 --consumers 5 --items 2000
//! ```
//!
//! A consumer prints `DONE <item>` only once its acknowledgement succeeded (the item node is
//! deleted with its lock node in one transaction), so an item counted twice would be an item
//! delivered to a second consumer after the first had finished it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_curator::queue::DistributedQueue;
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(
    about = "Put and take work items across processes with a ZooKeeper queue, then prove each was processed once"
)]
struct Args {
    /// Producer processes.
    #[arg(long, default_value_t = 2)]
    producers: u32,
    /// Consumer processes (the first is killed with -9 holding an item, the second requeues its
    /// first item; at least 3).
    #[arg(long, default_value_t = 3)]
    consumers: u32,
    /// Work items in all.
    #[arg(long, default_value_t = 400)]
    items: usize,
    /// Internal: run as a producer or consumer.
    #[arg(long, num_args = 5, value_names = ["ROLE", "ID", "CONNECT", "PATH", "RANGE"], hide = true)]
    worker: Option<Vec<String>>,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The workers' session timeout: the killed consumer's items come back this long after the kill.
const SESSION: Duration = Duration::from_secs(4);
/// A hang bound for the whole run.
const RUN_LIMIT: Duration = Duration::from_secs(150);

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

/// The queue of a run at `path`: items under `<path>/items`, lock nodes under `<path>/locks`.
fn queue(client: &CuratorClient, path: &str) -> AnyResult<DistributedQueue<Vec<u8>>> {
    Ok(DistributedQueue::builder(client, &format!("{path}/items")).lock_path(&format!("{path}/locks")).build()?)
}

fn item_name(i: usize) -> String {
    format!("item-{i:06}")
}

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    if args.consumers < 3 || args.producers == 0 || args.items == 0 {
        return Err("--consumers must be at least 3, --producers and --items at least 1".into());
    }
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let path = format!("/queue-workers/run-{}", std::process::id());
    let client = CuratorClient::connect(&connect).await?;
    println!(
        "{} items through {path}/items; {} producer and {} consumer processes",
        args.items, args.producers, args.consumers
    );

    let exe = std::env::current_exe()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let mut consumers = Vec::new();
    let mut producers = Vec::new();
    let spawn = |role: &str, id: u32, range: String| -> AnyResult<tokio::process::Child> {
        let mut child = tokio::process::Command::new(&exe)
            .args(["--worker", role, &id.to_string(), &connect, &path, &range])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let (tx, who) = (tx.clone(), format!("{role} {id}"));
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send((who.clone(), line));
            }
        });
        Ok(child)
    };
    // The doomed consumer first: the others start once it was killed holding an item, so that
    // they cannot have drained the queue before it took one.
    consumers.push(spawn("doomed", 0, String::new())?);
    let share = args.items.div_ceil(args.producers as usize);
    for id in 0..args.producers {
        let start = (id as usize * share).min(args.items);
        let end = (start + share).min(args.items);
        producers.push(spawn("producer", id, format!("{start}..{end}"))?);
    }

    let mut done: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut put = 0usize;
    let (mut killed, mut requeued) = (false, 0);
    let limit = tokio::time::sleep(RUN_LIMIT);
    tokio::pin!(limit);
    while done.len() < args.items {
        tokio::select! {
            line = rx.recv() => {
                let Some((who, line)) = line else { break };
                match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                    ["DONE", item] => done.entry(item.to_string()).or_default().push(who),
                    ["PUT", n] => put += n.parse::<usize>()?,
                    ["REQUEUED", _] => requeued += 1,
                    ["TAKEN", item] if who == "doomed 0" && !killed => {
                        consumers[0].start_kill()?; // SIGKILL, holding the item
                        killed = true;
                        println!("consumer 0 took {item} and was killed with -9");
                        for id in 1..args.consumers {
                            consumers.push(spawn(if id == 1 { "requeuing" } else { "consumer" }, id, String::new())?);
                        }
                    }
                    _ => println!("{who}: {line}"),
                }
            }
            () = &mut limit => {
                println!("PROOF FAILED: {} of {} items done after {RUN_LIMIT:?}", done.len(), args.items);
                break;
            }
        }
    }
    // Every item is done: the consumers close their queues (stdin closed) and exit.
    for child in producers.iter_mut().chain(consumers.iter_mut()) {
        drop(child.stdin.take());
    }
    for child in producers.iter_mut().chain(consumers.iter_mut()) {
        let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    }

    let expected: BTreeSet<String> = (0..args.items).map(item_name).collect();
    let missing: Vec<_> = expected.iter().filter(|i| !done.contains_key(*i)).collect();
    let twice: Vec<_> = done.iter().filter(|(_, by)| by.len() > 1).collect();
    let unknown: Vec<_> = done.keys().filter(|i| !expected.contains(*i)).collect();
    let items_left = client.get_children(&format!("{path}/items")).await?.len();
    // The killed consumer's lock nodes go with its session; the others deleted theirs.
    let locks_left = client.get_children(&format!("{path}/locks")).await?;
    let mut ok = true;
    println!("{put} items put, {} done, {requeued} requeued once", done.len());
    if put != args.items || !missing.is_empty() || !unknown.is_empty() {
        println!("PROOF FAILED: {put} put; not done: {missing:?}; done but never put: {unknown:?}");
        ok = false;
    }
    if !twice.is_empty() {
        println!("PROOF FAILED: done more than once: {twice:?}");
        ok = false;
    }
    if items_left > 0 || !locks_left.is_empty() {
        println!("PROOF FAILED: {items_left} item nodes and lock nodes {locks_left:?} left");
        ok = false;
    }
    if !killed || requeued == 0 {
        println!("PROOF FAILED: the kill ({killed}) or the requeue ({requeued}) did not happen");
        ok = false;
    }
    if ok {
        println!(
            "PROOF OK: every item processed exactly once despite a kill -9 holding an item and a requeue; no node left"
        );
    }
    let _ = client.delete(&path).deleting_children_if_needed().await;
    client.close().await;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn worker(w: &[String]) -> AnyResult<ExitCode> {
    let (role, connect, path, range) = (w[0].as_str(), &w[2], &w[3], &w[4]);
    let client = CuratorClient::builder(connect).session_timeout(SESSION).connect().await?;
    let queue = queue(&client, path)?;
    if role == "producer" {
        let (start, end) = range.split_once("..").ok_or("a range START..END")?;
        let (start, end): (usize, usize) = (start.parse()?, end.parse()?);
        let names: Vec<String> = (start..end).map(item_name).collect();
        // Half one by one, half as multi-item nodes (Curator's putMulti), ten at a time.
        let (single, multi) = names.split_at(names.len() / 2);
        for name in single {
            queue.put(name.as_bytes().to_vec()).await?;
        }
        for chunk in multi.chunks(10) {
            queue.put_multi(chunk.iter().map(|n| n.as_bytes().to_vec()).collect()).await?;
        }
        if !queue.flush_puts_timeout(Duration::from_secs(60)).await? {
            return Err("the puts did not reach the server within 60 s".into());
        }
        println!("PUT {}", names.len());
        queue.close().await;
        client.close().await;
        return Ok(ExitCode::SUCCESS);
    }
    let mut items = queue.consume()?;
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut requeue_next = role == "requeuing";
    loop {
        let item = tokio::select! {
            item = items.next() => item,
            // The coordinator closes our stdin once every item is done.
            _ = stdin.next_line() => break,
        };
        let item = match item {
            Some(Ok(item)) => item,
            Some(Err(e)) => {
                println!("REPORTED {e}");
                continue;
            }
            None => break,
        };
        let name = String::from_utf8_lossy(item.value()).into_owned();
        if role == "doomed" {
            println!("TAKEN {name}");
            std::future::pending::<()>().await; // killed with -9 here
        }
        if requeue_next {
            requeue_next = false;
            item.requeue().await?;
            println!("REQUEUED {name}");
            continue;
        }
        tokio::time::sleep(Duration::from_millis(1)).await; // the work itself
        match item.ack().await {
            Ok(()) => println!("DONE {name}"),
            // Its lock was lost: the item goes to another consumer, which reports it.
            Err(e) => println!("NOT-ACKED {name}: {e}"),
        }
    }
    drop(items);
    queue.close().await;
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
