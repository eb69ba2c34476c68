//! A consumer fault run on one queue with a lock path: producers put items while consumers take
//! them — a steady in-process consumer, two in-process consumers behind fault proxies whose links
//! are cut or blackholed, briefly and past their 2 s session timeout, and consumer processes, two
//! of them killed with SIGKILL while they process an item. Each consumer processes an item by
//! racing its work (a short sleep) against the item's hold state, and acknowledges it only if the
//! work finished while `Held`. Once the faults stopped and the queue drained:
//!
//! * every item whose `put` returned Ok was delivered, and acknowledged exactly once (the only
//!   acknowledgements not seen are those of a killed process, or of an ack whose outcome the
//!   consumer could not learn, and the drained queue shows them done);
//! * an item was delivered again only after a delivery that ended without a successful ack: its
//!   process killed, or its in-process consumer's hold no longer `Held` (its work abandoned, or its
//!   ack refused). The steady consumer and the surviving process never lose one, so an item that
//!   only they were given was delivered exactly once;
//! * no item was ever processed by two consumers both holding it: at each delivery, no in-process
//!   consumer still processing that item is `Held`, and no process that started it and did not
//!   finish it is alive;
//! * no item node and no lock node is left.
//!
//! The run has its own waits: the faults follow a schedule against the session timeout (a cut
//! shorter than it must come back `Held`, a longer one must end `Lost`), and a killed process's
//! items come back only when its session expires.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};
use zk_curator::locks::HoldState;
use zk_curator::queue::DistributedQueue;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::CuratorClient;

use crate::support;

/// The session timeout of the faulty and the process consumers.
const SESSION: Duration = Duration::from_secs(2);
/// The work of one item: long enough that the consumers are busy while the items come (a fault
/// then meets a consumer in the middle of an item).
const WORK: Duration = Duration::from_millis(150);
/// Items put in all, by two producers.
const ITEMS: usize = 240;
/// Nodes one consumer holds at once.
const IN_FLIGHT: usize = 4;
/// A hang guard for the whole run, never a performance bound.
const RUN_LIMIT: Duration = Duration::from_secs(90);
/// Where a consumer process finds its queue: `connect|queue path|lock path`.
const PROCESS_ENV: &str = "ZKC_QUEUE_FAULT_CONSUMER";
/// The process consumer, run from this test binary.
const PROCESS_TEST: &str = "queue::consumer_faults::a_consumer_process_of_the_fault_run";

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Processing,
    Acked,
    /// The work stopped: the hold was `Lost` (the item was dropped, for the next consumer).
    Abandoned,
    /// The work finished while `Held`, the ack failed (refused, or its outcome unknown).
    AckFailed(String),
    /// A process killed while processing it (its ack may have happened unreported).
    Killed,
}

#[derive(Debug)]
struct Delivery {
    consumer: String,
    outcome: Outcome,
}

#[derive(Default)]
struct Ledger {
    deliveries: BTreeMap<String, Vec<Delivery>>,
    /// In-process consumers processing an item now, with their hold states.
    processing: HashMap<String, Vec<(String, watch::Receiver<HoldState>)>>,
    /// Process consumers that started an item and have not finished it.
    started_by_process: HashMap<String, HashSet<String>>,
    killed: HashSet<String>,
    violations: Vec<String>,
    /// In-process holds seen `Suspended` and then `Held` again.
    resumed: usize,
}

impl Ledger {
    /// Records a delivery of `item` to `consumer`, checking that nobody else holds it now.
    fn deliver(&mut self, item: &str, consumer: &str, state: Option<watch::Receiver<HoldState>>) {
        for (other, other_state) in self.processing.get(item).into_iter().flatten() {
            if other != consumer && *other_state.borrow() == HoldState::Held {
                self.violations.push(format!("{item} delivered to {consumer} while {other} processes it Held"));
            }
        }
        for process in self.started_by_process.get(item).into_iter().flatten() {
            if process != consumer && !self.killed.contains(process) {
                self.violations.push(format!("{item} delivered to {consumer} while live {process} processes it"));
            }
        }
        match state {
            Some(state) => self.processing.entry(item.to_string()).or_default().push((consumer.to_string(), state)),
            None => {
                self.started_by_process.entry(item.to_string()).or_default().insert(consumer.to_string());
            }
        }
        self.deliveries
            .entry(item.to_string())
            .or_default()
            .push(Delivery { consumer: consumer.to_string(), outcome: Outcome::Processing });
    }

    /// Ends `consumer`'s delivery of `item` in progress with `outcome`.
    fn finish(&mut self, item: &str, consumer: &str, outcome: Outcome) {
        if let Some(holders) = self.processing.get_mut(item) {
            holders.retain(|(c, _)| c != consumer);
        }
        if let Some(processes) = self.started_by_process.get_mut(item) {
            processes.remove(consumer);
        }
        let open = self
            .deliveries
            .get_mut(item)
            .and_then(|ds| ds.iter_mut().rev().find(|d| d.consumer == consumer && d.outcome == Outcome::Processing));
        match open {
            Some(delivery) => delivery.outcome = outcome,
            None => self.violations.push(format!("{consumer} finished {item}, which it was not processing")),
        }
    }

    /// `process` was killed: its items in progress end `Killed`.
    fn killed(&mut self, process: &str) {
        self.killed.insert(process.to_string());
        let items: Vec<String> = self
            .started_by_process
            .iter()
            .filter(|(_, ps)| ps.contains(process))
            .map(|(item, _)| item.clone())
            .collect();
        for item in items {
            self.finish(&item, process, Outcome::Killed);
        }
    }
}

fn item_name(k: usize) -> String {
    format!("item-{k:04}")
}

fn queue_of(client: &CuratorClient, path: &str, lock: &str) -> DistributedQueue<Vec<u8>> {
    DistributedQueue::builder(client, path)
        .lock_path(lock)
        .put_in_background(false)
        .max_in_flight(IN_FLIGHT)
        .build()
        .expect("build the queue")
}

/// An in-process consumer: takes items until `stop`, racing each item's work against its hold
/// state; a suspended item's work starts again once it is `Held` again, a lost one is dropped.
async fn consume(
    name: String,
    queue: DistributedQueue<Vec<u8>>,
    ledger: Arc<Mutex<Ledger>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut items = queue.consume().expect("consume");
    loop {
        let next = tokio::select! {
            next = items.next() => next,
            _ = stop.wait_for(|s| *s) => break,
        };
        let item = match next {
            Some(Ok(item)) => item,
            Some(Err(e)) => {
                ledger.lock().unwrap().violations.push(format!("{name} was told {e}"));
                continue;
            }
            None => break,
        };
        let value = String::from_utf8(item.value().clone()).expect("an item name");
        let mut state = item.watch_state();
        ledger.lock().unwrap().deliver(&value, &name, Some(state.clone()));
        let outcome = loop {
            let worked = tokio::select! {
                () = tokio::time::sleep(WORK) => true,
                _ = state.wait_for(|s| *s != HoldState::Held) => false,
            };
            if worked && item.hold_state() == HoldState::Held {
                break match item.ack().await {
                    Ok(()) => Outcome::Acked,
                    Err(e) => Outcome::AckFailed(e.to_string()),
                };
            }
            let settled = match state.wait_for(|s| *s != HoldState::Suspended).await {
                Ok(s) => *s,
                Err(_) => HoldState::Lost,
            };
            if settled != HoldState::Held {
                drop(item);
                break Outcome::Abandoned;
            }
            ledger.lock().unwrap().resumed += 1;
        };
        ledger.lock().unwrap().finish(&value, &name, outcome);
    }
    drop(items);
    queue.close().await;
}

/// A consumer process: what `consume` does, reporting each item on stdout (`QC STARTED item`,
/// then `QC DONE item` once acknowledged or `QC NOT-ACKED item`), until its stdin closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the consumer process of consumers_killed_cut_and_blackholed_lose_no_item_and_never_share_one; \
            started by it with its queue in ZKC_QUEUE_FAULT_CONSUMER"]
async fn a_consumer_process_of_the_fault_run() {
    let Ok(spec) = std::env::var(PROCESS_ENV) else {
        eprintln!("{PROCESS_ENV} is not set: nothing to consume");
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [connect, path, lock] = parts[..] else { panic!("{PROCESS_ENV}: connect|path|lock, got {spec}") };
    let client = support::client_with(connect, SESSION).await;
    let queue = queue_of(&client, path, lock);
    let mut items = queue.consume().expect("consume");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    println!("QC READY");
    loop {
        let item = tokio::select! {
            item = items.next() => item,
            _ = stdin.next_line() => break,
        };
        let item = match item {
            Some(Ok(item)) => item,
            Some(Err(e)) => {
                println!("QC REPORTED {e}");
                continue;
            }
            None => break,
        };
        let value = String::from_utf8_lossy(item.value()).into_owned();
        println!("QC STARTED {value}");
        let worked = tokio::select! {
            () = tokio::time::sleep(WORK) => true,
            () = item.lost() => false,
        };
        if worked && item.hold_state() == HoldState::Held {
            match item.ack().await {
                Ok(()) => println!("QC DONE {value}"),
                Err(e) => println!("QC NOT-ACKED {value} {e}"),
            }
        } else {
            drop(item);
            println!("QC NOT-ACKED {value} not held");
        }
    }
    drop(items);
    queue.close().await;
    client.close().await;
}

/// A consumer process of `queue`, its stdout lines sent to `lines` as `(name, line)`.
fn start_process(name: &str, spec: &str, lines: &mpsc::UnboundedSender<(String, String)>) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([PROCESS_TEST, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(PROCESS_ENV, spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start a consumer process");
    let mut out = BufReader::new(child.stdout.take().expect("its stdout")).lines();
    let (lines, name) = (lines.clone(), name.to_string());
    drop(support::spawn(async move {
        while let Ok(Some(line)) = out.next_line().await {
            // libtest writes `test NAME ... ` before the test runs, without a line end.
            if let Some(at) = line.find("QC ") {
                let _ = lines.send((name.clone(), line[at + 3..].to_string()));
            }
        }
    }));
    child
}

/// One fault of a proxied consumer's link: from `at` (after the run's start) for `lasting`.
struct Fault {
    proxy: usize,
    at: Duration,
    mode: ProxyMode,
    lasting: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_killed_cut_and_blackholed_lose_no_item_and_never_share_one() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("queue-consumer-faults");
    let lock = format!("{path}-locks");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let (stop_tx, stop) = watch::channel(false);

    // Consumer processes first (they take a moment to start): two to be killed, one survivor.
    let spec = format!("{connect}|{path}|{lock}");
    let (lines_tx, mut lines) = mpsc::unbounded_channel();
    let mut processes: BTreeMap<String, tokio::process::Child> = BTreeMap::new();
    for name in ["process-doomed-1", "process-doomed-2", "process-survivor"] {
        processes.insert(name.to_string(), start_process(name, &spec, &lines_tx));
    }
    let mut ready = 0;
    while ready < processes.len() {
        match tokio::time::timeout(RUN_LIMIT, lines.recv()).await {
            Ok(Some((_, line))) if line == "READY" => ready += 1,
            Ok(Some(_)) => {}
            _ => panic!("the consumer processes did not start"),
        }
    }

    // In-process consumers: a steady one, and two behind fault proxies.
    let mut consumers = Vec::new();
    let mut proxies = Vec::new();
    let steady = support::client(&connect).await;
    consumers.push(support::spawn(consume(
        "steady".into(),
        queue_of(&steady, &path, &lock),
        ledger.clone(),
        stop.clone(),
    )));
    for k in 0..2 {
        let proxy = Arc::new(FaultProxy::start(&connect).await.expect("proxy"));
        let client = support::client_with(&proxy.connect_string(), SESSION).await;
        let queue = queue_of(&client, &path, &lock);
        consumers.push(support::spawn(consume(format!("proxied-{k}"), queue, ledger.clone(), stop.clone())));
        proxies.push((proxy, client));
    }

    // Producers: two, each putting half the items, a few milliseconds apart.
    let started = Instant::now();
    let mut producers = Vec::new();
    for p in 0..2 {
        let client = support::client(&connect).await;
        let queue = queue_of(&client, &path, &lock);
        producers.push(support::spawn(async move {
            let mut put = Vec::new();
            for k in (p..ITEMS).step_by(2) {
                let item = item_name(k);
                if queue.put(item.clone().into_bytes()).await.is_ok() {
                    put.push(item);
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            queue.close().await;
            client.close().await;
            put
        }));
    }

    // The faults: each proxied link cut or blackholed past the session timeout and briefly.
    let faults = vec![
        Fault { proxy: 0, at: Duration::from_millis(800), mode: ProxyMode::Cut, lasting: SESSION * 2 },
        Fault { proxy: 1, at: Duration::from_millis(1500), mode: ProxyMode::Blackhole, lasting: SESSION * 2 },
        Fault { proxy: 0, at: Duration::from_millis(5500), mode: ProxyMode::Cut, lasting: SESSION / 4 },
        Fault { proxy: 1, at: Duration::from_millis(6000), mode: ProxyMode::Blackhole, lasting: SESSION / 3 },
        Fault { proxy: 0, at: Duration::from_millis(7000), mode: ProxyMode::Blackhole, lasting: SESSION * 3 / 2 },
        Fault { proxy: 1, at: Duration::from_millis(7500), mode: ProxyMode::Cut, lasting: SESSION * 3 / 2 },
    ];
    let schedule = {
        let proxies: Vec<_> = proxies.iter().map(|(p, _)| p.clone()).collect();
        support::spawn(async move {
            let mut ends: Vec<(Instant, usize)> = Vec::new();
            for fault in faults {
                tokio::time::sleep_until((started + fault.at).into()).await;
                proxies[fault.proxy].set_mode(fault.mode);
                ends.push((started + fault.at + fault.lasting, fault.proxy));
                // Heal what is due before the next fault.
                ends.sort();
                while let Some(&(end, proxy)) = ends.first() {
                    if end > Instant::now() + Duration::from_millis(400) {
                        break;
                    }
                    tokio::time::sleep_until(end.into()).await;
                    proxies[proxy].set_mode(ProxyMode::Pass);
                    ends.remove(0);
                }
            }
            for (end, proxy) in ends {
                tokio::time::sleep_until(end.into()).await;
                proxies[proxy].set_mode(ProxyMode::Pass);
            }
        })
    };

    // The process lines, and the kills: each doomed process once it started its k-th item at
    // the earliest at the given time, so it dies holding that item (and the nodes taken ahead).
    let kills: HashMap<&str, (usize, Duration)> = [
        ("process-doomed-1", (5, Duration::from_millis(1000))),
        ("process-doomed-2", (5, Duration::from_millis(4000))),
    ]
    .into_iter()
    .collect();
    let mut started_count: HashMap<String, usize> = HashMap::new();
    let mut put = Vec::new();
    let mut producers = Some(producers);
    let deadline = started + RUN_LIMIT;
    loop {
        if let Some(done) = producers.take_if(|ps| ps.iter().all(|p| p.is_finished())) {
            for producer in done {
                put.extend(support::join("a producer", RUN_LIMIT, producer).await);
            }
        }
        let drained = producers.is_none()
            && schedule.is_finished()
            && support::sorted_children(&obs, &path).await.is_empty()
            && support::sorted_children(&obs, &lock).await.is_empty();
        if drained {
            break;
        }
        assert!(Instant::now() < deadline, "the queue did not drain within {RUN_LIMIT:?}");
        let Ok(Some((process, line))) = tokio::time::timeout(Duration::from_millis(100), lines.recv()).await else {
            continue;
        };
        let mut words = line.splitn(3, ' ');
        let (what, item) = (words.next().unwrap_or(""), words.next().unwrap_or("").to_string());
        let kill = {
            let mut ledger_now = ledger.lock().unwrap();
            match what {
                "STARTED" => {
                    ledger_now.deliver(&item, &process, None);
                    let n = started_count.entry(process.clone()).or_default();
                    *n += 1;
                    kills.get(process.as_str()).is_some_and(|&(k, after)| {
                        *n >= k && started.elapsed() >= after && !ledger_now.killed.contains(&process)
                    })
                }
                "DONE" => {
                    ledger_now.finish(&item, &process, Outcome::Acked);
                    false
                }
                "NOT-ACKED" => {
                    ledger_now.finish(&item, &process, Outcome::AckFailed(line.clone()));
                    false
                }
                _ => {
                    ledger_now.violations.push(format!("{process}: {line}"));
                    false
                }
            }
        };
        if kill {
            // Killed holding the item it just started (and the nodes it took ahead).
            let child = processes.get_mut(&process).expect("a process of ours");
            child.start_kill().expect("SIGKILL the consumer process");
            let _ = child.wait().await;
            ledger.lock().unwrap().killed(&process);
        }
    }
    let elapsed = started.elapsed();

    // Stop everyone: the in-process consumers, then the surviving process (stdin closed).
    stop_tx.send(true).unwrap();
    for consumer in consumers {
        support::join("an in-process consumer", Duration::from_secs(30), consumer).await;
    }
    for (name, child) in processes.iter_mut() {
        drop(child.stdin.take());
        if !ledger.lock().unwrap().killed.contains(name) {
            let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
            assert!(matches!(status, Ok(Ok(s)) if s.success()), "{name} ended with {status:?}");
        }
    }
    while let Ok((process, line)) = lines.try_recv() {
        ledger.lock().unwrap().violations.push(format!("{process} after the drain: {line}"));
    }
    for (_, client) in &proxies {
        client.close().await;
    }
    steady.close().await;

    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    assert!(ledger.violations.is_empty(), "violations: {:#?}", ledger.violations);
    assert_eq!(ledger.killed.len(), 2, "both doomed processes were killed holding an item");
    assert_eq!(put.len(), ITEMS, "every put returned Ok (the producers' links have no faults)");
    let steady_consumers = ["steady", "process-survivor"];
    let (mut again, mut abandoned_in_process) = (0, 0);
    for item in &put {
        let deliveries = ledger.deliveries.get(item).unwrap_or_else(|| panic!("{item} was put and never delivered"));
        let acked = deliveries.iter().filter(|d| d.outcome == Outcome::Acked).count();
        assert!(acked <= 1, "{item} acknowledged {acked} times: {deliveries:?}");
        let (last, before) = deliveries.split_last().unwrap();
        // Done exactly once: acknowledged by its last consumer, or by a killed process or an
        // ack whose outcome was unknown (then it is not in the drained queue any more either).
        assert!(
            last.outcome == Outcome::Acked
                || (acked == 0 && matches!(last.outcome, Outcome::Killed | Outcome::AckFailed(_))),
            "{item}: {deliveries:?}"
        );
        for d in before {
            assert!(
                matches!(d.outcome, Outcome::Abandoned | Outcome::AckFailed(_) | Outcome::Killed),
                "{item} delivered again after a delivery that ended {:?}: {deliveries:?}",
                d.outcome
            );
            assert!(
                !steady_consumers.contains(&d.consumer.as_str()),
                "{item} lost by a consumer without faults: {deliveries:?}"
            );
            abandoned_in_process += usize::from(d.consumer.starts_with("proxied") && d.outcome == Outcome::Abandoned);
        }
        again += before.len();
    }
    let delivered: HashSet<&String> = ledger.deliveries.keys().collect();
    assert_eq!(delivered.len(), put.len(), "only items put were delivered");
    assert!(abandoned_in_process > 0, "a proxied consumer lost an item to a fault (the run tested nothing)");
    println!(
        "{} items in {elapsed:?}: {again} deliveries again ({abandoned_in_process} abandoned by proxied consumers), \
         {} suspended holds held again",
        put.len(),
        ledger.resumed
    );
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no item node left");
    assert!(support::sorted_children(&obs, &lock).await.is_empty(), "no lock node left");
}
