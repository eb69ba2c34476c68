//! A randomized fault run for work claims: three workers, each on its own client behind its own
//! `FaultProxy` (2 s sessions), claim, "process" and complete items that a loader (on a clean
//! link) keeps adding, while a driver cuts, blackholes (briefly, and past the session timeout),
//! drops the replies of, expires the session of, and slows down (random latency) their links,
//! in an order drawn from a printed seed (`CLAIM_FAULTS_SEED=<n>` replays the schedule; the
//! workers' timing is the machine's).
//!
//! Every worker is the careful user of the docs: it works on an item only while its claim is
//! `Held`, stops on `Suspended` (going on once `Held` again) and gives up on `Lost`. The ledger,
//! which does not trust the library, records for every claim when its own state feed
//! (`Claim::state_changes`) said it was `Held` — from the moment `claim` returned to `Suspended`,
//! `Lost`, or the worker's call to `complete` — with its creation zxid, fence and `granted_at`,
//! and what every `complete` returned. The checks:
//!
//! * no two claims on one item were `Held` at overlapping times, and later holds have later
//!   claims (larger czxid, larger fence, no earlier `granted_at`); the one slack is the one the
//!   leader runs allow: a session expired from outside removes the claim node while its holder
//!   learns of it on its own connection, so its hold may end up to 100 ms after the next one
//!   began (never across a server-side expiry or any other fault);
//! * every item was completed exactly once: at most one `complete` per item succeeded, one whose
//!   claim was the item's last, and an item with none had a `complete` of unknown outcome (a lost
//!   reply); no `complete` after the claim was seen `Lost` succeeded; no item and no claim node is
//!   left at the end;
//! * the workers met no errors but those the docs call transient (`Retryable`, `SessionLost` of a
//!   replaced session) and the refusals and unknown outcomes of `complete`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::oneshot;
use zk_curator::claims::{Claim, ClaimState, WorkClaims};
use zk_curator::locks::HoldState;
use zk_curator::testing::{expire_session, FaultProxy, Latency, ProxyMode};
use zk_curator::{CuratorClient, Error, ErrorKind};

use super::claims;
use crate::support;

/// Session timeout of the workers' clients (server tick 200 ms): a blackhole longer than this
/// expires the session.
const SESSION: Duration = Duration::from_secs(2);
/// Connection timeout of the workers' clients.
const CONNECTION: Duration = Duration::from_secs(1);
const WORKERS: usize = 3;
/// The loader keeps about this many items unclaimed: few, so that an item a worker lost is soon
/// claimed by another (the overlaps the run looks for need that), yet the workers never run dry.
const BACKLOG: usize = 6;
/// Largest latency of a latency phase, per direction: under 0.15 of `SESSION` (300 ms), so a
/// worker's `Lost` still comes before the server can expire its session (support/latency.rs).
const MOST_LATENCY_MS: u64 = 200;
/// How long a holder whose session was expired from outside may go on reporting `Held` after the
/// next holder's claim began: both learn of it on their own connections, in no order ZooKeeper
/// guarantees (as `REMOVAL_NOTIFICATION_SLACK` of the leader runs).
const REMOVAL_NOTIFICATION_SLACK: Duration = Duration::from_millis(100);
/// A hang guard, never a performance bound.
const HANG: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// the ledger and its checker
// ---------------------------------------------------------------------------------------------

/// Why a span of `Held` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpanEnd {
    Suspended,
    Lost,
    /// The worker was about to call `complete`.
    Done,
}

/// One stretch of time a claim's state feed said `Held`.
#[derive(Clone, Debug)]
struct HeldSpan {
    item: String,
    who: usize,
    czxid: i64,
    fence: i32,
    granted_at: SystemTime,
    start: Instant,
    end: Instant,
    ended: SpanEnd,
    /// May overlap its successor by this much (see `REMOVAL_NOTIFICATION_SLACK`).
    soft_end: Option<Duration>,
}

/// What one `complete` returned, as the exactly-once check counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Completed,
    /// `OutcomeUnknown`, or a connection error after the retry policy: it may have applied.
    Unknown,
    /// `LockLost` / `NotOwner`: nothing was deleted.
    Refused,
}

#[derive(Clone, Debug)]
struct Completion {
    item: String,
    who: usize,
    czxid: i64,
    outcome: Outcome,
    /// The worker had seen the claim `Lost` before calling `complete`.
    after_lost: bool,
}

#[derive(Default)]
struct Ledger {
    spans: Vec<HeldSpan>,
    completions: Vec<Completion>,
    /// Claims whose state feed said `Lost` before the worker was done with them.
    lost_claims: usize,
    /// Transient errors the workers met (kind -> count).
    transient: BTreeMap<String, usize>,
    /// Anything the docs do not allow.
    unexpected: Vec<String>,
}

type SharedLedger = Arc<Mutex<Ledger>>;

impl Ledger {
    /// Counts a transient error of `call`, or notes it as unexpected.
    fn error(&mut self, who: usize, call: &str, e: &Error) {
        if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
            *self.transient.entry(format!("{call}: {:?}", e.kind())).or_default() += 1;
        } else {
            self.unexpected.push(format!("worker {who}: {call}: {e}"));
        }
    }
}

/// The spans of one item, checked: no two overlap (touching is fine) except a soft end within its
/// slack, and the later span is of the same claim (same worker, same czxid: a hold resumed after
/// `Suspended`) or of a later claim (larger czxid). Across the item's claims in czxid order, the
/// fence increases and `granted_at` never goes back. Returns the largest overlap tolerated.
fn check_item(spans: &[HeldSpan]) -> Result<Duration, String> {
    let Some(origin) = spans.iter().map(|s| s.start).min() else {
        return Ok(Duration::ZERO);
    };
    let at = |t: Instant| format!("{:.1} ms", t.saturating_duration_since(origin).as_secs_f64() * 1e3);
    let show = |s: &HeldSpan| {
        format!(
            "worker {} czxid {} fence {} [{} .. {}] ended by {:?}{}",
            s.who,
            s.czxid,
            s.fence,
            at(s.start),
            at(s.end),
            s.ended,
            s.soft_end.map_or(String::new(), |slack| format!(" (soft end {slack:?})"))
        )
    };
    let mut sorted: Vec<&HeldSpan> = spans.iter().collect();
    sorted.sort_by_key(|s| s.start);
    let mut tolerated = Duration::ZERO;
    for (n, a) in sorted.iter().enumerate() {
        if a.end < a.start {
            return Err(format!("a span ends before it starts: {}", show(a)));
        }
        for b in &sorted[n + 1..] {
            if b.start < a.end {
                let overlap = a.end.min(b.end) - b.start;
                if a.soft_end.is_some_and(|slack| overlap <= slack) && b.end >= a.end && a.czxid != b.czxid {
                    tolerated = tolerated.max(overlap);
                } else {
                    return Err(format!("two holds for {overlap:?}: {} and {}", show(a), show(b)));
                }
            }
            if b.czxid < a.czxid || (b.czxid == a.czxid && b.who != a.who) {
                return Err(format!("a later hold has no later claim: {} then {}", show(a), show(b)));
            }
        }
    }
    let mut claims: Vec<&HeldSpan> = spans.iter().collect();
    claims.sort_by_key(|s| s.czxid);
    claims.dedup_by_key(|s| s.czxid);
    for pair in claims.windows(2) {
        if pair[1].fence <= pair[0].fence {
            return Err(format!("the fence did not increase: {} then {}", show(pair[0]), show(pair[1])));
        }
        if pair[1].granted_at < pair[0].granted_at {
            return Err(format!("a later claim was granted earlier: {} then {}", show(pair[0]), show(pair[1])));
        }
    }
    Ok(tolerated)
}

#[test]
fn the_claims_checker_rejects_overlapping_holds_and_stale_claims() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let span = |who: usize, czxid: i64, start: u64, end: u64| HeldSpan {
        item: "i".into(),
        who,
        czxid,
        fence: czxid as i32,
        granted_at: SystemTime::UNIX_EPOCH + Duration::from_millis(czxid as u64),
        start: ms(start),
        end: ms(end),
        ended: SpanEnd::Done,
        soft_end: None,
    };
    assert_eq!(check_item(&[]), Ok(Duration::ZERO));
    // Out of order, touching, a hold resumed after Suspended: fine.
    assert!(check_item(&[span(1, 20, 10, 20), span(0, 10, 0, 5), span(0, 10, 7, 10)]).is_ok());
    // Overlaps, nested, with a non-neighbour.
    assert!(check_item(&[span(0, 10, 0, 11), span(1, 20, 10, 20)]).unwrap_err().contains("two holds"));
    assert!(check_item(&[span(0, 10, 0, 100), span(1, 20, 10, 20)]).is_err());
    assert!(check_item(&[span(0, 10, 0, 50), span(1, 20, 60, 70), span(2, 15, 40, 45)]).is_err());
    // A soft end may overlap its successor within the slack, never swallow it.
    let soft = |s: HeldSpan| HeldSpan { soft_end: Some(Duration::from_millis(5)), ..s };
    assert_eq!(check_item(&[soft(span(0, 10, 0, 13)), span(1, 20, 10, 20)]), Ok(Duration::from_millis(3)));
    assert!(check_item(&[soft(span(0, 10, 0, 16)), span(1, 20, 10, 20)]).is_err(), "beyond the slack");
    assert!(check_item(&[soft(span(0, 10, 0, 14)), span(1, 20, 10, 12)]).is_err(), "successor inside");
    // Claim order: a later hold of an earlier claim, or the same claim seen by two workers.
    assert!(check_item(&[span(0, 20, 0, 10), span(1, 10, 10, 20)]).unwrap_err().contains("no later claim"));
    assert!(check_item(&[span(0, 10, 0, 10), span(1, 10, 10, 20)]).unwrap_err().contains("no later claim"));
    // Fences and grant times follow the claims' order.
    let mut stale = span(1, 20, 10, 20);
    stale.fence = 10;
    assert!(check_item(&[span(0, 10, 0, 10), stale]).unwrap_err().contains("fence"));
    let mut early = span(1, 20, 10, 20);
    early.granted_at = SystemTime::UNIX_EPOCH;
    assert!(check_item(&[span(0, 10, 0, 10), early]).unwrap_err().contains("granted earlier"));
    assert!(check_item(&[span(0, 10, 10, 5)]).unwrap_err().contains("ends before"));
}

// ---------------------------------------------------------------------------------------------
// workers
// ---------------------------------------------------------------------------------------------

/// A claim being watched: its state feed records its `Held` spans until [`finish`](Self::finish).
struct Watched {
    claim: Claim,
    done: oneshot::Sender<()>,
    spans: tokio::task::JoinHandle<bool>,
}

impl Watched {
    /// Follows `claim`'s own state feed from `handed_out` (when `claim` returned it) into the
    /// ledger.
    fn start(claim: Claim, who: usize, ledger: SharedLedger, handed_out: Instant) -> Watched {
        let mut changes = claim.state_changes();
        let mut open = (claim.state() == ClaimState::Held).then_some(handed_out);
        let (done, mut done_rx) = oneshot::channel::<()>();
        let watched = claim.clone();
        let spans = crate::support::spawn(async move {
            let claim = watched;
            let record = |start: Instant, ended: SpanEnd| {
                ledger.lock().spans.push(HeldSpan {
                    item: claim.item().to_string(),
                    who,
                    czxid: claim.czxid(),
                    fence: claim.fence(),
                    granted_at: claim.granted_at(),
                    start,
                    end: Instant::now(),
                    ended,
                    soft_end: None,
                });
            };
            let mut lost = false;
            loop {
                tokio::select! {
                    biased;
                    change = changes.next(), if !lost => match change {
                        Some(HoldState::Held) => {
                            open.get_or_insert_with(Instant::now);
                        }
                        Some(HoldState::Suspended) => {
                            if let Some(start) = open.take() {
                                record(start, SpanEnd::Suspended);
                            }
                        }
                        _ => {
                            if let Some(start) = open.take() {
                                record(start, SpanEnd::Lost);
                            }
                            lost = true;
                        }
                    },
                    _ = &mut done_rx => {
                        if let Some(start) = open.take() {
                            record(start, SpanEnd::Done);
                        }
                        return lost;
                    }
                }
            }
        });
        Watched { claim, done, spans }
    }

    /// Ends the claim's span now (before `complete` is called); true when its feed said `Lost`.
    async fn finish(self) -> bool {
        let _ = self.done.send(());
        support::join("a claim's state feed", HANG, self.spans).await
    }
}

/// "Processes" `claim` for `work` of `Held` time: pauses while it is `Suspended`, gives up on
/// `Lost`. True when the work was done.
async fn process(claim: &Claim, work: Duration) -> bool {
    let mut changes = claim.state_changes();
    let mut left = work;
    loop {
        match claim.state() {
            ClaimState::Held => {
                let started = Instant::now();
                tokio::select! {
                    () = tokio::time::sleep(left) => return true,
                    change = changes.next() => {
                        left = left.saturating_sub(started.elapsed());
                        if change.is_none() {
                            return false;
                        }
                    }
                }
            }
            ClaimState::Suspended => {
                if changes.next().await.is_none() {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Completes `claim`'s item, again while the error is transient and the claim may still be held;
/// records what it returned.
async fn complete(work: &WorkClaims, claim: &Claim, who: usize, after_lost: bool, ledger: &SharedLedger) {
    for _ in 0..20 {
        let result = work.complete(claim.item()).await;
        let outcome = match &result {
            Ok(()) => Outcome::Completed,
            Err(Error::OutcomeUnknown { .. }) => Outcome::Unknown,
            Err(e) if matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotOwner) => Outcome::Refused,
            Err(e) => {
                {
                    let mut ledger = ledger.lock();
                    ledger.error(who, "complete", e);
                    ledger.completions.push(Completion {
                        item: claim.item().to_string(),
                        who,
                        czxid: claim.czxid(),
                        outcome: Outcome::Unknown,
                        after_lost,
                    });
                }
                if matches!(claim.state(), ClaimState::Held | ClaimState::Suspended) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                return;
            }
        };
        ledger.lock().completions.push(Completion {
            item: claim.item().to_string(),
            who,
            czxid: claim.czxid(),
            outcome,
            after_lost,
        });
        return;
    }
}

async fn worker(who: usize, work: WorkClaims, ledger: SharedLedger, seed: u64, drained: Arc<AtomicBool>) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !drained.load(Ordering::SeqCst) {
        let batch = match work.claim(rng.gen_range(1..=3)).await {
            Ok(batch) => batch,
            Err(e) => {
                ledger.lock().error(who, "claim", &e);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let handed_out = Instant::now();
        if batch.is_empty() {
            if let Err(e) = work.wait_for_work(Duration::from_millis(200)).await {
                ledger.lock().error(who, "wait_for_work", &e);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            continue;
        }
        let watched: Vec<Watched> =
            batch.into_iter().map(|claim| Watched::start(claim, who, ledger.clone(), handed_out)).collect();
        for claim in watched {
            let worked = process(&claim.claim, Duration::from_millis(rng.gen_range(20..=120))).await;
            let handle = claim.claim.clone();
            let lost = claim.finish().await;
            ledger.lock().lost_claims += usize::from(lost);
            // Given up on `Lost`: its complete must be refused (and is recorded as such).
            complete(&work, &handle, who, lost || !worked, &ledger).await;
        }
    }
}

/// Keeps about [`BACKLOG`] items unclaimed until `stop`; returns the items added.
async fn feed(loader: WorkClaims, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut added = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let free = loader.unclaimed().await.expect("the loader's link is never faulted").len();
        for _ in free..BACKLOG {
            let item = format!("item-{:05}", added.len());
            loader.add(&item, item.as_bytes()).await.expect("add an item");
            added.push(item);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    added
}

// ---------------------------------------------------------------------------------------------
// the fault driver
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The victim's link is cut (connection closed, refused): `Suspended`, the same session back.
    Cut,
    /// The victim's link goes silent, far shorter than its session.
    ShortBlackhole,
    /// The victim's link goes silent past its session timeout: the server expires it.
    LongBlackhole,
    /// The victim's requests reach the server, their replies are dropped.
    DropReplies,
    /// The victim's session is closed on the server from outside.
    Expiry,
    /// Every link delays each direction by a random amount.
    Latency,
}

/// A session expired from outside: whose, and when the call began and returned.
struct Expired {
    who: usize,
    began: Instant,
    ended: Instant,
}

/// Runs each kind of phase once (an expiry twice) and a few more drawn from `rng`, each a short while, healing every
/// link after each; returns the expiries done from outside.
async fn drive(
    rng: &mut StdRng,
    connect: &str,
    proxies: &[FaultProxy],
    clients: &[CuratorClient],
    works: &[WorkClaims],
) -> Vec<Expired> {
    use Phase::{Cut, DropReplies, Expiry, LongBlackhole, ShortBlackhole};
    // Two expiries: each hands the victim's items to the others, which the overlap check needs.
    let mut schedule = vec![Cut, ShortBlackhole, LongBlackhole, DropReplies, Expiry, Expiry, Phase::Latency];
    for _ in 0..3 {
        schedule.push(*[Cut, ShortBlackhole, DropReplies, Expiry, Phase::Latency].choose(rng).unwrap());
    }
    schedule.shuffle(rng);
    let mut expired = Vec::new();
    for (n, phase) in schedule.into_iter().enumerate() {
        let victim = rng.gen_range(0..proxies.len());
        let lasts = Duration::from_millis(match phase {
            Cut | DropReplies => rng.gen_range(300..=800),
            ShortBlackhole => rng.gen_range(400..=1000),
            LongBlackhole => (SESSION + Duration::from_secs(1)).as_millis() as u64,
            Expiry => 1000,
            Phase::Latency => rng.gen_range(800..=1500),
        });
        println!("phase {n}: {phase:?} of worker {victim} for {lasts:?}");
        match phase {
            Cut => proxies[victim].set_mode(ProxyMode::Cut),
            ShortBlackhole | LongBlackhole => proxies[victim].set_mode(ProxyMode::Blackhole),
            DropReplies => proxies[victim].set_mode(ProxyMode::DropReplies),
            Expiry => {
                // On a live session (an earlier phase may have just replaced it).
                let client = &clients[victim];
                support::eventually(HANG, "the victim is connected", || async { client.is_connected() }).await;
                // Holding claims, so that the expiry hands items over (between two batches it
                // would hand over nothing, and the run would test no hand-over).
                let work = &works[victim];
                support::eventually(HANG, "the victim holds a claim", || async { !work.my_claims().is_empty() }).await;
                let began = Instant::now();
                expire_session(connect, client).await.expect("expire a session");
                expired.push(Expired { who: victim, began, ended: Instant::now() });
                // The victim stays cut off a while, as a worker that died would: its items go to
                // the others (it would often take them back itself on a link that stayed up).
                proxies[victim].set_mode(ProxyMode::Cut);
            }
            Phase::Latency => {
                for (i, proxy) in proxies.iter().enumerate() {
                    let set = support::latency::set_random(proxy, rng, MOST_LATENCY_MS);
                    println!("phase {n}: worker {i}'s latency {}", support::latency::describe(&set));
                }
            }
        }
        tokio::time::sleep(lasts).await;
        for proxy in proxies {
            proxy.set_mode(ProxyMode::Pass);
            proxy.set_latency(Latency::NONE);
        }
        // Healthy for a while: the workers reconnect and get on with the work.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..=600))).await;
    }
    expired
}

// ---------------------------------------------------------------------------------------------
// the run
// ---------------------------------------------------------------------------------------------

/// About 15 s: the schedule's ten phases of up to 1.5 s (one of 3 s: a server-side expiry needs
/// the session timeout to pass), each followed by a healthy half second, and the drain after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_item_is_completed_exactly_once_and_never_held_twice_through_cuts_blackholes_expiries_and_latency() {
    support::init_tracing();
    let mut rng = StdRng::seed_from_u64(support::seed("CLAIM_FAULTS_SEED"));
    let started = Instant::now();
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("claims-faults");
    let zk = support::observer(&connect).await;
    let loader = claims(&support::client(&connect).await, &path, "loader");
    let mut proxies = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..WORKERS {
        let proxy = FaultProxy::start(&connect).await.expect("proxy");
        let client = support::client_with_timeouts(&proxy.connect_string(), SESSION, CONNECTION).await;
        assert_eq!(client.negotiated_session_timeout(), SESSION, "negotiated session timeout");
        clients.push(client);
        proxies.push(proxy);
    }

    let ledger = SharedLedger::default();
    let (stop_feeding, drained) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let feeder = crate::support::spawn(feed(loader.clone(), stop_feeding.clone()));
    let works: Vec<WorkClaims> =
        clients.iter().enumerate().map(|(who, client)| claims(client, &path, &format!("worker-{who}"))).collect();
    let workers: Vec<_> = works
        .iter()
        .enumerate()
        .map(|(who, work)| {
            crate::support::spawn(worker(who, work.clone(), ledger.clone(), rng.r#gen(), drained.clone()))
        })
        .collect();

    let expired = drive(&mut rng, &connect, &proxies, &clients, &works).await;
    stop_feeding.store(true, Ordering::SeqCst);
    let added = support::join("the loader", HANG, feeder).await;
    let items_dir = format!("{path}/items");
    let left = support::children_become(&zk, &items_dir, &[], HANG).await;
    drained.store(true, Ordering::SeqCst);
    for (who, task) in workers.into_iter().enumerate() {
        support::join(&format!("worker {who}"), HANG, task).await;
    }
    assert!(left.is_empty(), "items never completed: {left:?}");
    let claims_left = support::children_become(&zk, &format!("{path}/claims"), &[], Duration::from_secs(5)).await;
    assert!(claims_left.is_empty(), "claim nodes left behind: {claims_left:?}");

    let mut ledger = std::mem::take(&mut *ledger.lock());
    // The holds a session expired from outside ended: the notification slack.
    for span in &mut ledger.spans {
        if expired.iter().any(|e| e.who == span.who && span.start <= e.ended && span.end >= e.began) {
            span.soft_end = Some(REMOVAL_NOTIFICATION_SLACK);
        }
    }
    let mut by_item: HashMap<&str, Vec<HeldSpan>> = HashMap::new();
    for span in &ledger.spans {
        by_item.entry(span.item.as_str()).or_default().push(span.clone());
    }
    let mut tolerated = Duration::ZERO;
    for (item, spans) in &by_item {
        match check_item(spans) {
            Ok(overlap) => tolerated = tolerated.max(overlap),
            Err(violation) => panic!("{item}: {violation}"),
        }
    }

    // Exactly once.
    let mut completions: HashMap<&str, Vec<&Completion>> = HashMap::new();
    for c in &ledger.completions {
        completions.entry(c.item.as_str()).or_default().push(c);
    }
    let mut unknown_only = 0;
    for item in &added {
        let tried = completions.get(item.as_str()).cloned().unwrap_or_default();
        let ok: Vec<_> = tried.iter().filter(|c| c.outcome == Outcome::Completed).collect();
        assert!(ok.len() <= 1, "{item} completed {} times: {tried:?}", ok.len());
        match ok.first() {
            Some(done) => {
                let last = by_item.get(item.as_str()).and_then(|spans| spans.iter().map(|s| s.czxid).max());
                assert_eq!(last, Some(done.czxid), "{item} was completed by a claim not its last: {tried:?}");
            }
            None => {
                assert!(
                    tried.iter().any(|c| c.outcome == Outcome::Unknown),
                    "{item} is gone, yet no complete succeeded or had an unknown outcome: {tried:?}"
                );
                unknown_only += 1;
            }
        }
    }
    let after_lost: Vec<_> =
        ledger.completions.iter().filter(|c| c.after_lost && c.outcome == Outcome::Completed).collect();
    assert!(after_lost.is_empty(), "a complete after the claim was seen Lost succeeded: {after_lost:?}");
    assert!(ledger.unexpected.is_empty(), "errors the docs do not allow: {:#?}", ledger.unexpected);

    let ended = |how: SpanEnd| ledger.spans.iter().filter(|s| s.ended == how).count();
    let shared = by_item.values().filter(|spans| spans.iter().map(|s| s.who).collect::<HashSet<_>>().len() > 1);
    let shared = shared.count();
    let mut per_worker = [0usize; WORKERS];
    for c in ledger.completions.iter().filter(|c| c.outcome == Outcome::Completed) {
        per_worker[c.who] += 1;
    }
    println!(
        "{} items, {} claims, {} held spans ({} ended by Suspended, {} by Lost), {} claims lost, {} items held by two \
         workers, completed per worker {:?}, {} with an unknown outcome only, largest tolerated overlap {:?}, transient errors \
         {:?}; took {:?}",
        added.len(),
        ledger.spans.iter().map(|s| s.czxid).collect::<HashSet<_>>().len(),
        ledger.spans.len(),
        ended(SpanEnd::Suspended),
        ended(SpanEnd::Lost),
        ledger.lost_claims,
        shared,
        per_worker,
        unknown_only,
        tolerated,
        ledger.transient,
        started.elapsed()
    );
    // The faults bit: holds were lost, and items went from one worker to another.
    assert!(ended(SpanEnd::Lost) + ended(SpanEnd::Suspended) > 0, "no fault ever reached a held claim");
    assert!(shared > 0, "no item went from one worker to another: the run tested no hand-over");
}
