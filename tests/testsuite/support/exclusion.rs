//! The one mutual-exclusion checker every test that checks exclusion uses. It does not trust the
//! library: every holder records `(who, token, start, end)` — `start` taken after its acquire
//! returned, `end` before it calls release (or when it observed `Lost`) — and the checker asserts
//! that, in start order, no two holds overlap and fencing tokens strictly increase. Shared holds
//! (readers of a read-write lock) may overlap each other, never an exclusive one.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One hold as its holder saw it.
#[derive(Clone, Debug)]
pub struct Interval {
    pub who: String,
    pub token: u128,
    pub start: Instant,
    pub end: Instant,
    /// The hold ended because the holder observed `Lost` (at `end`).
    pub lost: bool,
    /// A shared hold (a reader): may overlap other shared holds.
    pub shared: bool,
}

/// The shared log every holder writes into.
#[derive(Clone, Default)]
pub struct HoldLog {
    entries: Arc<Mutex<Vec<Interval>>>,
}

impl HoldLog {
    pub fn record(&self, who: &str, token: u128, start: Instant, end: Instant, lost: bool) {
        let interval = Interval { who: who.to_string(), token, start, end, lost, shared: false };
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).push(interval);
    }

    /// Records a hold as given (shared or not, ended by `Lost` or not).
    pub fn push(&self, interval: Interval) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).push(interval);
    }

    /// How many holds are recorded so far.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn intervals(&self) -> Vec<Interval> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Panics (naming the scenario and the offending holds) unless the log is a valid history.
    #[track_caller]
    pub fn assert_exclusive(&self, scenario: &str) -> Vec<Interval> {
        let intervals = self.intervals();
        if let Err(violation) = check_exclusion(&intervals) {
            panic!("{scenario}: mutual exclusion violated ({} holds logged): {violation}", intervals.len());
        }
        intervals
    }
}

/// The checker: sorted by start, no exclusive hold overlaps any other hold, and wherever one of
/// two holds is exclusive, the later one has the larger fencing token.
pub fn check_exclusion(log: &[Interval]) -> Result<(), String> {
    let Some(origin) = log.iter().map(|i| i.start).min() else {
        return Ok(());
    };
    let at = |t: Instant| format!("{:.3} ms", t.saturating_duration_since(origin).as_secs_f64() * 1e3);
    let show = |i: &Interval| {
        format!(
            "{}{} token {} [{} .. {}]{}",
            i.who,
            if i.shared { " (shared)" } else { "" },
            i.token,
            at(i.start),
            at(i.end),
            if i.lost { " (ended by Lost)" } else { "" }
        )
    };
    let mut sorted: Vec<&Interval> = log.iter().collect();
    sorted.sort_by_key(|i| i.start);
    if let Some(bad) = sorted.iter().find(|i| i.end < i.start) {
        return Err(format!("hold ends before it starts: {}", show(bad)));
    }
    for (n, a) in sorted.iter().enumerate() {
        for b in &sorted[n + 1..] {
            if a.shared && b.shared {
                continue;
            }
            if b.start < a.end {
                return Err(format!(
                    "overlap of {:?}: {} was still held when {} started",
                    a.end.min(b.end) - b.start,
                    show(a),
                    show(b)
                ));
            }
            if b.token <= a.token {
                return Err(format!("fencing token did not increase: {} then {}", show(a), show(b)));
            }
        }
    }
    Ok(())
}

impl HoldLog {
    /// Records a hold that starts now; the returned [`Holding`] records its end when
    /// [`end`](Holding::end) is called (before the release).
    pub fn start(&self, who: impl Into<String>, token: u128) -> Holding {
        Holding { log: self.clone(), who: who.into(), token, start: Instant::now(), shared: false }
    }

    /// Like [`start`](Self::start) for a shared hold (a reader).
    pub fn start_shared(&self, who: impl Into<String>, token: u128) -> Holding {
        Holding { shared: true, ..self.start(who, token) }
    }

    /// The largest number of holds that overlapped at one moment.
    pub fn max_concurrent(&self) -> usize {
        let intervals = self.intervals();
        intervals
            .iter()
            .map(|a| intervals.iter().filter(|b| b.start <= a.start && a.start < b.end).count())
            .max()
            .unwrap_or(0)
    }
}

/// A hold in progress; see [`HoldLog::start`].
#[must_use = "call end() before releasing"]
pub struct Holding {
    log: HoldLog,
    who: String,
    token: u128,
    start: Instant,
    shared: bool,
}

impl Holding {
    /// The hold ends now (call it before the release).
    pub fn end(self) {
        let interval = Interval {
            who: self.who,
            token: self.token,
            start: self.start,
            end: Instant::now(),
            lost: false,
            shared: self.shared,
        };
        self.log.entries.lock().unwrap_or_else(|e| e.into_inner()).push(interval);
    }
}
