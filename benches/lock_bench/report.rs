//! The output every mode shares: `RESULT rust.<bench>.<metric>=<value>` lines, percentiles, and
//! this process's memory and CPU time.

use std::fmt::Display;
use std::io::Write as _;
use std::time::Duration;

use zk_curator::Error;

/// Prints one line and flushes, so a reading process sees it at once.
pub(crate) fn say(line: impl Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub(crate) struct Report {
    pub(crate) bench: &'static str,
}

impl Report {
    pub(crate) fn metric(&self, name: &str, value: impl Display) {
        say(format_args!("RESULT rust.{}.{}={}", self.bench, name, value));
    }

    pub(crate) fn us(&self, name: &str, d: Duration) {
        self.metric(name, format_args!("{:.1}", d.as_secs_f64() * 1e6));
    }

    pub(crate) fn ms(&self, name: &str, d: Duration) {
        self.metric(name, format_args!("{:.1}", d.as_secs_f64() * 1e3));
    }

    pub(crate) fn rate(&self, name: &str, count: usize, elapsed: Duration) {
        let rate = if elapsed.is_zero() { 0.0 } else { count as f64 / elapsed.as_secs_f64() };
        self.metric(name, format_args!("{rate:.1}"));
    }
}

/// Nearest-rank percentile of an already sorted sample.
pub(crate) fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn mean(v: &[Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / v.len() as u32
}

pub(crate) fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort_unstable();
    v
}

/// Awaits every contender task: all acquire latencies (sorted) and how many each task made, or
/// the first failure.
pub(crate) async fn collect_latencies(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, Error>>>,
) -> Result<(Vec<Duration>, Vec<usize>), String> {
    let mut acquire = Vec::new();
    let mut per_task = Vec::with_capacity(tasks.len());
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(latencies)) => {
                per_task.push(latencies.len());
                acquire.extend(latencies);
            }
            Ok(Err(e)) => failure = Some(e.to_string()),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((sorted(acquire), per_task)),
    }
}

/// A field of `/proc/self/status` in kB (`VmHWM`, `VmRSS`).
pub(crate) fn proc_status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of this process so far.
pub(crate) fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ") state".
    let ticks: u64 = [11usize, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
    Duration::from_secs_f64(ticks as f64 / CLOCK_TICKS_PER_S)
}

/// `sysconf(_SC_CLK_TCK)`: 100 on every Linux this runs on.
const CLOCK_TICKS_PER_S: f64 = 100.0;
