//! `barrier C [one-path]`: C sessions enter and leave a `DistributedDoubleBarrier(C)`, one untimed
//! round then 20 timed ones, a fresh path per round (`one-path`: every round on one path); the
//! same lines as the Curator side's `barrier` mode. `enter` is the time from the last member's
//! `enter` call until every member has returned; `leave` likewise.

use std::time::{Duration, Instant};

use zk_curator::barriers::DistributedDoubleBarrier;

use crate::report::{mean, pct, sorted, Report};
use crate::{connect_clients, unique_path, BenchResult};

const ROUNDS: usize = 20;
/// Each call's bound, as on the Curator side.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One member's call and return instants, per round.
#[derive(Clone, Default)]
struct Times {
    enter_call: Vec<Option<Instant>>,
    enter_ret: Vec<Option<Instant>>,
    leave_call: Vec<Option<Instant>>,
    leave_ret: Vec<Option<Instant>>,
}

pub(crate) async fn barrier(report: &Report, connect: &str, clients: usize, one_path: bool) -> BenchResult<()> {
    if clients == 0 {
        return Err("barrier needs at least one client".into());
    }
    let path = unique_path("barrier");
    let sessions = connect_clients(connect, clients).await?;
    let mut tasks = Vec::new();
    for client in sessions.clone() {
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let mut t = Times {
                enter_call: vec![None; ROUNDS + 1],
                enter_ret: vec![None; ROUNDS + 1],
                leave_call: vec![None; ROUNDS + 1],
                leave_ret: vec![None; ROUNDS + 1],
            };
            let mut barrier = DistributedDoubleBarrier::new(&client, &path, clients)?;
            for round in 0..=ROUNDS {
                if !one_path {
                    barrier = DistributedDoubleBarrier::new(&client, &format!("{path}/r-{round}"), clients)?;
                }
                t.enter_call[round] = Some(Instant::now());
                if !barrier.enter_timeout(CALL_TIMEOUT).await? {
                    return Ok::<_, zk_curator::Error>((t, Some(format!("enter timed out in round {round}"))));
                }
                t.enter_ret[round] = Some(Instant::now());
                t.leave_call[round] = Some(Instant::now());
                if !barrier.leave_timeout(CALL_TIMEOUT).await? {
                    return Ok((t, Some(format!("leave timed out in round {round}"))));
                }
                t.leave_ret[round] = Some(Instant::now());
            }
            Ok((t, None))
        }));
    }
    let mut times = Vec::new();
    let mut errors = 0;
    for task in tasks {
        match task.await {
            Ok(Ok((t, failure))) => {
                if let Some(failure) = failure {
                    errors += 1;
                    eprintln!("a member failed: {failure}");
                }
                times.push(t);
            }
            Ok(Err(e)) => {
                errors += 1;
                eprintln!("a member failed: {e}");
            }
            Err(e) => {
                errors += 1;
                eprintln!("a member panicked: {e}");
            }
        }
    }
    // Rounds every member completed; round 0 is untimed.
    let complete = if times.len() < clients {
        0
    } else {
        (0..=ROUNDS).take_while(|&r| times.iter().all(|t| t.leave_ret[r].is_some())).count()
    };
    let timed = complete.saturating_sub(1);
    let (mut enter, mut leave, mut early) = (Vec::new(), Vec::new(), 0);
    for r in 1..=timed {
        let last = |f: fn(&Times) -> &Vec<Option<Instant>>| times.iter().filter_map(|t| f(t)[r]).max();
        let (Some(last_enter_call), Some(all_entered), Some(last_leave_call), Some(all_left)) =
            (last(|t| &t.enter_call), last(|t| &t.enter_ret), last(|t| &t.leave_call), last(|t| &t.leave_ret))
        else {
            continue;
        };
        for t in &times {
            // Nobody may pass before the last member has arrived.
            early += usize::from(t.enter_ret[r].is_some_and(|x| x < last_enter_call));
            early += usize::from(t.leave_ret[r].is_some_and(|x| x < last_leave_call));
        }
        enter.push(all_entered - last_enter_call);
        leave.push(all_left - last_leave_call);
    }
    let secs = match (times.first().and_then(|t| t.leave_ret[0]), times.first().and_then(|t| t.leave_ret[timed])) {
        (Some(a), Some(b)) if timed > 0 => (b - a).as_secs_f64(),
        _ => f64::NAN,
    };
    let _ = sessions[0].delete(&path).deleting_children_if_needed().quietly().await;
    for client in &sessions {
        client.close().await;
    }
    let (enter, leave) = (sorted(enter), sorted(leave));
    report.metric("clients", clients);
    report.metric("rounds", timed);
    report.metric("rounds_per_s", format_args!("{:.1}", timed as f64 / secs));
    report.metric("one_path", one_path);
    for (what, v) in [("enter", &enter), ("leave", &leave)] {
        report.us(&format!("{what}_p50_us"), pct(v, 0.50));
        report.us(&format!("{what}_p99_us"), pct(v, 0.99));
        report.us(&format!("{what}_mean_us"), mean(v));
        report.us(&format!("{what}_max_us"), v.last().copied().unwrap_or_default());
    }
    report.metric("early_returns", early);
    report.metric("errors", errors);
    Ok(())
}
