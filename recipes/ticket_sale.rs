//! Ticket sale (a flash sale): several worker *processes*, each with many concurrent sale tasks,
//! sell tickets from one stock kept in ZooKeeper, each sale a read-modify-write done under an
//! `InterProcessMutex`. At the end the program proves that no ticket was sold twice, none was
//! oversold, and the fencing tokens of the sales increased from sale to sale.
//!
//! The tasks of one worker wait in the process's local queue: one ZooKeeper node per worker and
//! turn, and hand-offs between the worker's tasks without a round trip; the tokens still increase
//! across those local hand-offs.
//!
//! ```text
//! cargo run --release --example ticket_sale                 # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --example ticket_sale -- --tickets 200 --workers 5 --tasks 100
//! ```
//!
//! Each sale: lock → read the stock → (pause, to invite races) → write stock-1 and create
//! `sold/ticket-<n>` in one lock-guarded multi-op → release. Without the lock, two workers would
//! read the same stock and sell the same ticket (the `ticket-<n>` create would then fail with
//! NodeExists, and the stock would go wrong); with it, the proof below holds.

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_curator::locks::{GuardedWrite, InterProcessMutex};
use zk_curator::{CreateMode, CuratorClient};

#[derive(Parser, Debug)]
#[command(about = "Sell tickets from several processes under a ZooKeeper mutex, then prove nothing was oversold")]
struct Args {
    /// Tickets in stock.
    #[arg(long, default_value_t = 60)]
    tickets: u32,
    /// Worker processes.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Concurrent sale tasks per worker process (requests of one service instance).
    #[arg(long, default_value_t = 8)]
    tasks: u32,
    /// Internal: run as worker N against CONNECT and PATH.
    #[arg(long, num_args = 3, value_names = ["ID", "CONNECT", "PATH"], hide = true)]
    worker: Option<Vec<String>>,
}

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
        Some(w) => runtime.block_on(worker(&w[0], &w[1], &w[2], args.tasks)),
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

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let client = CuratorClient::builder(&connect).session_timeout(Duration::from_secs(15)).connect().await?;
    let base = format!("/ticket-sale/run-{}", std::process::id());
    client
        .create(&format!("{base}/stock"))
        .data(args.tickets.to_string().as_bytes())
        .creating_parent_containers_if_needed()
        .await?;
    client.create(&format!("{base}/sold")).creating_parent_containers_if_needed().await?;
    println!(
        "{} tickets in stock at {base}/stock; {} worker processes x {} tasks on lock {base}/lock",
        args.tickets, args.workers, args.tasks
    );

    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let mut children = Vec::new();
    for id in 0..args.workers {
        let mut child = tokio::process::Command::from(Command::new(&exe))
            .args(["--worker", &id.to_string(), &connect, &base, "--tasks", &args.tasks.to_string()])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("worker has no stdout")?;
        let lines = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut sold = 0u32;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(n) = line.strip_prefix("TOTAL ") {
                    sold = n.trim().parse().unwrap_or(0);
                } else {
                    println!("{line}");
                }
            }
            sold
        });
        children.push((child, lines));
    }
    let mut reported = 0u32;
    for (mut child, lines) in children {
        let status = child.wait().await?;
        reported += lines.await?;
        if !status.success() {
            return Err(format!("a worker failed: {status}").into());
        }
    }
    let elapsed = start.elapsed();

    // The proof, read back from ZooKeeper.
    let (stock, _) = client.get_data(&format!("{base}/stock")).await?;
    let stock: i64 = String::from_utf8_lossy(&stock).parse()?;
    let mut sold = client.get_children(&format!("{base}/sold")).await?;
    sold.sort();
    let expected: Vec<String> = (1..=args.tickets).map(|n| format!("ticket-{n:05}")).collect();
    let mut owners = std::collections::BTreeMap::new();
    // Tickets are sold from the top of the stock down: in sale order, the highest number first.
    let mut tokens_in_sale_order = Vec::new();
    for ticket in sold.iter().rev() {
        let (data, _) = client.get_data(&format!("{base}/sold/{ticket}")).await?;
        let record = String::from_utf8_lossy(&data).to_string();
        *owners.entry(record.split(' ').next().unwrap_or("").to_string()).or_insert(0u32) += 1;
        let token = record.split("token128=").nth(1).and_then(|t| t.trim().parse::<u128>().ok());
        tokens_in_sale_order.push(token);
    }
    let tokens_increase = tokens_in_sale_order.iter().all(Option::is_some)
        && tokens_in_sale_order.windows(2).all(|pair| pair[0] < pair[1]);
    println!();
    println!(
        "sold {} tickets in {:.2?} ({:.0} sales/s)",
        sold.len(),
        elapsed,
        sold.len() as f64 / elapsed.as_secs_f64()
    );
    println!("sales per worker: {owners:?}");
    let checks = [
        ("stock left is 0", stock == 0),
        ("every ticket 1..=N sold exactly once", sold == expected),
        ("workers' own counts add up to the stock", reported == args.tickets),
        ("fencing tokens increased from sale to sale", tokens_increase),
    ];
    let mut ok = true;
    for (what, passed) in checks {
        println!("PROOF {what}: {}", if passed { "yes" } else { "NO" });
        ok &= passed;
    }
    // Tidy up (the lock path is a container and goes by itself).
    for node in ["sold", "stock"] {
        let _ = client.delete(&format!("{base}/{node}")).deleting_children_if_needed().await;
    }
    client.close().await;
    Ok(if ok {
        println!("no ticket was sold twice, none was oversold");
        ExitCode::SUCCESS
    } else {
        println!("OVERSOLD: the lock did not protect the stock");
        ExitCode::FAILURE
    })
}

async fn worker(id: &str, connect: &str, base: &str, tasks: u32) -> AnyResult<ExitCode> {
    let client = CuratorClient::builder(connect).session_timeout(Duration::from_secs(15)).connect().await?;
    let mutex = InterProcessMutex::new(&client, &format!("{base}/lock"))?;
    let mut sellers = tokio::task::JoinSet::new();
    for task in 0..tasks.max(1) {
        let (client, mutex, seller) = (client.clone(), mutex.clone(), format!("worker-{id}.{task}"));
        let base = base.to_string();
        sellers.spawn(async move { sell(&client, &mutex, &base, &seller).await });
    }
    let mut sold = 0u32;
    while let Some(joined) = sellers.join_next().await {
        sold += joined??;
    }
    println!("TOTAL {sold}");
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// One sale task: sells until the stock is empty; returns how many it sold.
async fn sell(client: &CuratorClient, mutex: &InterProcessMutex, base: &str, seller: &str) -> AnyResult<u32> {
    let stock_path = format!("{base}/stock");
    let mut sold = 0u32;
    loop {
        let guard = mutex.lock().await?;
        let (data, _) = client.get_data(&stock_path).await?;
        let stock: u32 = String::from_utf8_lossy(&data).parse()?;
        if stock == 0 {
            guard.release().await?;
            return Ok(sold);
        }
        // Widen the race window: without the lock, another task would read the same stock now.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let ticket = format!("{base}/sold/ticket-{stock:05}");
        let token = guard.fencing_token();
        let record = format!("{seller} token={token} token128={}", token.as_u128());
        let write = GuardedWrite::new().set_data(&stock_path, (stock - 1).to_string().as_bytes(), None).create(
            &ticket,
            record.as_bytes(),
            CreateMode::Persistent,
        );
        guard.guarded_write(write).await?;
        sold += 1;
        println!("{seller}: sold ticket {stock:>5} (fencing token {token})");
        guard.release().await?;
    }
}
