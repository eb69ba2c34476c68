//! Service discovery: several provider *processes* each serve a tiny TCP echo service and register
//! an instance of it (`ServiceDiscovery`, a `DYNAMIC` instance: its node goes with the session).
//! A client keeps calling the service through a `ServiceProvider` while providers come and go:
//! some are killed with -9 (their instances vanish when their sessions expire), new ones start
//! (and are called as soon as they are seen). At the end the program proves that every call was
//! answered, that a call only ever failed on a killed provider still in the cache (picked after its
//! kill, before its instance vanished), that each killed provider vanished from the cache within
//! twice the session timeout, that every new provider was called, and that the registry ends equal
//! to the live providers (and empty once they stop).
//!
//! ```text
//! cargo run --example service_discovery                    # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --example service_discovery -- --providers 5 --kills 2
//! ```

use std::collections::{BTreeSet, HashMap};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, ChildStdin};
use zk_curator::discovery::{DownInstancePolicy, ServiceDiscovery, ServiceInstance, ServiceProvider, ServiceType};
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(about = "Call a service whose provider processes come and go, found through ZooKeeper")]
struct Args {
    /// Provider processes at the start.
    #[arg(long, default_value_t = 4)]
    providers: u32,
    /// Providers killed with -9 during the run (as many new ones start); fewer than `providers`.
    #[arg(long, default_value_t = 2)]
    kills: u32,
    /// Internal: run as a provider.
    #[arg(long, num_args = 3, value_names = ["ID", "CONNECT", "BASE"], hide = true)]
    provider: Option<Vec<String>>,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The providers' session timeout: a killed provider's instance vanishes about this long after.
const SESSION: Duration = Duration::from_millis(1500);
const SERVICE: &str = "echo";

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &args.provider {
        Some(p) => runtime.block_on(provider(p)),
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

/// A provider process, as the coordinator started it.
struct Provider {
    id: String,
    child: Child,
    /// Closed to stop the provider gracefully (it unregisters).
    stdin: Option<ChildStdin>,
    /// Its negotiated session timeout.
    session: Duration,
}

/// One try of a call: the provider picked, when, and whether it answered.
struct Attempt {
    id: String,
    picked_at: Instant,
    ended_at: Instant,
    answered: bool,
}

#[derive(Default)]
struct Calls {
    attempts: Vec<Attempt>,
    /// Calls no provider answered (after every retry).
    unanswered: usize,
    /// Calls answered, by the provider that answered.
    answered_by: HashMap<String, usize>,
}

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    if args.providers < 2 || args.kills == 0 || args.kills >= args.providers {
        return Err("--providers must be at least 2, --kills at least 1 and fewer than --providers".into());
    }
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let base = format!("/service-discovery/run-{}", std::process::id());
    let client = CuratorClient::connect(&connect).await?;
    let discovery = ServiceDiscovery::<()>::builder(&client, &base).build()?;
    // One failed call takes an instance out of the picks (until it vanishes from the cache).
    let picker = Arc::new(
        discovery
            .provider_builder(SERVICE)
            .down_instance_policy(DownInstancePolicy::new(Duration::from_secs(60), 1))
            .start()?,
    );
    if !picker.wait_initialized_timeout(Duration::from_secs(10)).await? {
        return Err("the service cache did not load".into());
    }

    let exe = std::env::current_exe()?;
    let mut live: Vec<Provider> = Vec::new();
    let mut next_id = 0;
    for _ in 0..args.providers {
        live.push(start_provider(&exe, next_id, &connect, &base).await?);
        next_id += 1;
    }
    let ids: Vec<String> = live.iter().map(|p| p.id.clone()).collect();
    wait_cached(&picker, &ids, true).await?;
    println!("{} providers registered under {base}/{SERVICE}", live.len());

    let calls = Arc::new(parking_lot::Mutex::new(Calls::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let caller = tokio::spawn(call_until_stopped(picker.clone(), calls.clone(), stop.clone()));
    wait_answered(&calls, &ids).await?;

    // Kill some with -9 while the calls go on; each vanishes when its session expires.
    let mut kills: HashMap<String, Instant> = HashMap::new();
    let mut killed_sessions = Vec::new();
    for _ in 0..args.kills {
        let mut doomed = live.remove(0);
        kills.insert(doomed.id.clone(), Instant::now());
        doomed.child.start_kill()?; // SIGKILL
        doomed.child.wait().await?;
        println!("provider {} killed with -9", doomed.id);
        killed_sessions.push((doomed.id, doomed.session));
    }
    // Each one's vanishing from the cache the client picks from, in turn.
    let mut removed: HashMap<String, Instant> = HashMap::new();
    for (id, _) in &killed_sessions {
        removed.insert(id.clone(), wait_cached(&picker, std::slice::from_ref(id), false).await?);
    }
    // New providers come: the client calls them as soon as its cache sees them.
    let mut joined = Vec::new();
    for _ in 0..args.kills {
        let provider = start_provider(&exe, next_id, &connect, &base).await?;
        next_id += 1;
        joined.push(provider.id.clone());
        live.push(provider);
    }
    wait_cached(&picker, &joined, true).await?;
    wait_answered(&calls, &joined).await?;
    stop.store(true, Ordering::SeqCst);
    caller.await?;

    // The proof.
    let calls = std::mem::take(&mut *calls.lock());
    let mut ok = true;
    let answered: usize = calls.answered_by.values().sum();
    let failed: Vec<&Attempt> = calls.attempts.iter().filter(|a| !a.answered).collect();
    println!(
        "{answered} calls answered by {} providers, {} unanswered; {} tries failed, on a provider killed and not yet gone",
        calls.answered_by.len(),
        calls.unanswered,
        failed.len()
    );
    if calls.unanswered > 0 || answered == 0 {
        println!("PROOF FAILED: {} calls were not answered", calls.unanswered);
        ok = false;
    }
    for attempt in &failed {
        // Ended after the kill (picked after it, or in flight), picked while still cached.
        let picked_dead = kills.get(&attempt.id).is_some_and(|killed| attempt.ended_at >= *killed)
            && removed.get(&attempt.id).is_some_and(|removed| attempt.picked_at <= *removed);
        if !picked_dead {
            println!(
                "PROOF FAILED: a call to {} failed though it was live (or already gone from the cache)",
                attempt.id
            );
            ok = false;
        }
    }
    for (id, session) in &killed_sessions {
        let vanished = removed[id].duration_since(kills[id]);
        println!("provider {id} vanished from the cache {vanished:?} after its kill (session timeout {session:?})");
        if vanished > *session * 2 {
            println!("PROOF FAILED: provider {id} stayed in the cache longer than twice its session timeout");
            ok = false;
        }
    }
    for id in &joined {
        if !calls.answered_by.contains_key(id) {
            println!("PROOF FAILED: the new provider {id} was never called");
            ok = false;
        }
    }
    let live_ids: BTreeSet<String> = live.iter().map(|p| p.id.clone()).collect();
    let registered: BTreeSet<String> =
        discovery.query_for_instances(SERVICE).await?.iter().map(|i| i.id().to_string()).collect();
    if registered != live_ids {
        println!("PROOF FAILED: the registry holds {registered:?}, the live providers are {live_ids:?}");
        ok = false;
    }
    // The survivors stop gracefully: they unregister on their way out.
    for provider in &mut live {
        provider.stdin.take();
    }
    for provider in &mut live {
        provider.child.wait().await?;
    }
    let left = discovery.query_for_instances(SERVICE).await?;
    if !left.is_empty() {
        println!("PROOF FAILED: {} instances left after every provider stopped", left.len());
        ok = false;
    }
    if ok {
        println!(
            "PROOF OK: every call answered; failures only on killed providers still cached; each killed one gone within \
             its session timeout x2; new ones called; the registry matched the live providers, then emptied"
        );
    }
    picker.close().await;
    discovery.close().await?;
    client.close().await;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn start_provider(exe: &std::path::Path, id: u32, connect: &str, base: &str) -> AnyResult<Provider> {
    let id = format!("provider-{id}");
    let mut child = tokio::process::Command::new(exe)
        .args(["--provider", &id, connect, base])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take();
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .map_err(|_| format!("{id} did not start"))??
        .ok_or_else(|| format!("{id} exited before it registered"))?;
    let session = match ready.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["READY", _port, session_ms] => Duration::from_millis(session_ms.parse()?),
        _ => return Err(format!("{id} said {ready:?}").into()),
    };
    Ok(Provider { id, child, stdin, session })
}

/// Calls the service until `stop`: each call picks a provider, and picks again (at most 10 times)
/// if the one picked does not answer, noting the error so that it is not picked again.
async fn call_until_stopped(
    picker: Arc<ServiceProvider<()>>,
    calls: Arc<parking_lot::Mutex<Calls>>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        let mut answered = false;
        for _ in 0..10 {
            let Some(instance) = picker.get_instance() else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let picked_at = Instant::now();
            let reply = call(instance.address().unwrap_or("127.0.0.1"), instance.port().unwrap_or(0)).await;
            let id = instance.id().to_string();
            let mut calls = calls.lock();
            match reply {
                Some(who) if who == id => {
                    calls.attempts.push(Attempt {
                        id: id.clone(),
                        picked_at,
                        ended_at: Instant::now(),
                        answered: true,
                    });
                    *calls.answered_by.entry(id).or_default() += 1;
                    answered = true;
                    break;
                }
                _ => {
                    calls.attempts.push(Attempt { id, picked_at, ended_at: Instant::now(), answered: false });
                    picker.note_error(&instance);
                }
            }
        }
        if !answered {
            calls.lock().unanswered += 1;
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// One echo call: the answering provider's id, `None` if it did not answer.
async fn call(address: &str, port: u16) -> Option<String> {
    let exchange = async {
        let mut stream = TcpStream::connect((address, port)).await.ok()?;
        stream.write_all(b"who\n").await.ok()?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await.ok()?;
        Some(reply.trim().to_string()).filter(|r| !r.is_empty())
    };
    tokio::time::timeout(Duration::from_secs(2), exchange).await.ok().flatten()
}

/// Waits until each of `ids` answered at least one call (a hang bound of 30 s).
async fn wait_answered(calls: &parking_lot::Mutex<Calls>, ids: &[String]) -> AnyResult<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ids.iter().all(|id| calls.lock().answered_by.contains_key(id)) {
        if Instant::now() > deadline {
            return Err(format!("not every one of {ids:?} was called within 30 s").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Waits until the picker's cache holds each of `ids` (`present`) or none of them, watching it
/// every millisecond (a hang bound of 30 s); when it did, to the millisecond.
async fn wait_cached(picker: &ServiceProvider<()>, ids: &[String], present: bool) -> AnyResult<Instant> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cached = picker.cache().instances();
        if ids.iter().all(|id| cached.iter().any(|i| i.id() == id) == present) {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            return Err(format!("the cache did not follow within 30 s: {ids:?} present {present}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A provider: serves the echo service (answers each connection with its id), registers an
/// instance of it, and runs until killed or until its stdin closes (then unregisters).
async fn provider(p: &[String]) -> AnyResult<ExitCode> {
    let (id, connect, base) = (p[0].clone(), &p[1], &p[2]);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let me = id.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let me = me.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let mut request = String::new();
                if stream.read_line(&mut request).await.is_ok() {
                    let _ = stream.get_mut().write_all(format!("{me}\n").as_bytes()).await;
                }
            });
        }
    });
    let client = CuratorClient::builder(connect).session_timeout(SESSION).connect().await?;
    let discovery = ServiceDiscovery::<()>::builder(&client, base).build()?;
    let instance = ServiceInstance::builder(SERVICE)
        .id(&id)
        .address("127.0.0.1")
        .port(port)
        .service_type(ServiceType::Dynamic)
        .build()?;
    discovery.register(&instance).await?;
    println!("READY {port} {}", client.negotiated_session_timeout().as_millis());
    // Until the coordinator closes stdin (or kills this process with -9).
    let mut rest = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut rest).await;
    discovery.close().await?;
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
