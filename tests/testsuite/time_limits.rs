//! The time limits' one rule (docs/failure-semantics.md, "Time limits"): every public timed call
//! of the crate, found in its source so that a new recipe cannot drift, is in the docs' table with
//! the shape the rule gives it — a wait for a state says `Ok(false)` / `Ok(None)` on time-out and
//! is named as a wait; an operation fails with `DeadlineExceeded` and is named as one — and an
//! instant deadline bounds chained waits.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{server_and_clients, unique_path};
use zk_curator::locks::InterProcessMutex;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A public timed call found in the source.
#[derive(Debug)]
struct TimedCall {
    blocking: bool,
    /// The type of its `impl` block; `None` inside a `macro_rules!` body.
    owner: Option<String>,
    name: String,
    returns: String,
    at: String,
}

impl TimedCall {
    /// How the docs' table names it: `Type::name` or `blocking::Type::name` (`_::name` when the
    /// type is only known where a macro is expanded).
    fn doc_name(&self) -> String {
        let prefix = if self.blocking { "blocking::" } else { "" };
        format!("{prefix}{}::{}", self.owner.as_deref().unwrap_or("_"), self.name)
    }

    /// Whether `listed` (a name in the table's first column) is this call.
    fn is(&self, listed: &str) -> bool {
        match &self.owner {
            Some(_) => listed == self.doc_name(),
            None => listed.starts_with("blocking::") == self.blocking && listed.ends_with(&format!("::{}", self.name)),
        }
    }
}

/// The names in backticks of a table row's first cell.
fn listed_names(row: &str) -> Vec<&str> {
    let cell = row.split('|').nth(1).unwrap_or("");
    cell.split('`').skip(1).step_by(2).collect()
}

/// The type an `impl` line is for: `impl<'a, D: X> Name<'a, D> {` gives `Name`; trait impls
/// (`impl Trait for Name`) give `None` (their methods are not inherent).
fn impl_type(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("impl")?;
    if line.contains(" for ") {
        return None;
    }
    // Skip the generics of `impl<...>`.
    let rest = if let Some(generic) = rest.strip_prefix('<') {
        let mut depth = 1;
        let end = generic.char_indices().find_map(|(i, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        })?;
        &generic[end + 1..]
    } else {
        rest
    };
    let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// A signature's parameters and return type: the parameters are up to the `)` that closes the
/// list (a parameter may hold parentheses: `Result<()>`), the return type up to `where` or `{`.
fn split_signature(signature: &str) -> (&str, String) {
    let Some(open) = signature.find('(') else { return ("", String::new()) };
    let mut depth = 0;
    let mut close = signature.len();
    for (i, c) in signature[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            close = open + i;
            break;
        }
    }
    let params = &signature[open + 1..close.min(signature.len())];
    let rest = signature.get(close + 1..).unwrap_or("");
    let rest = rest.split(" where ").next().unwrap_or("").split('{').next().unwrap_or("");
    (params, rest.trim().trim_start_matches("->").trim().to_string())
}

/// Every public inherent method of the library (not the command line tool, not the test kit)
/// whose name or parameters involve a time limit, deprecated ones aside.
fn timed_calls() -> Vec<TimedCall> {
    let mut files = Vec::new();
    crate::support::rust_sources(&Path::new(ROOT).join("src"), &mut files);
    let skipped = [Path::new(ROOT).join("src/bin"), Path::new(ROOT).join("src/testing")];
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !skipped.iter().any(|s| f.starts_with(s))) {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let blocking = file.starts_with(Path::new(ROOT).join("src/blocking"));
        let mut owner: Option<String> = None;
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with("macro_rules!") {
                owner = None;
            } else if line.trim_start().starts_with("impl") && line.trim_end().ends_with('{') {
                owner = impl_type(line);
            }
            let trimmed = line.trim_start();
            let Some(after) = trimmed.strip_prefix("pub fn ").or_else(|| trimmed.strip_prefix("pub async fn ")) else {
                continue;
            };
            let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            // The whole signature (rustfmt may break it over lines).
            let mut signature = String::new();
            for l in &lines[i..] {
                signature.push_str(l.trim());
                signature.push(' ');
                if l.contains('{') || l.trim_end().ends_with(';') {
                    break;
                }
            }
            let (params, returns) = split_signature(&signature);
            let timed_name = name.contains("timeout") || name.contains("deadline") || name.ends_with("_within");
            let timed_params = params.contains("Deadline")
                || params.contains("timeout: Duration")
                || params.contains("deadline:")
                || name.ends_with("_for") && params.contains("Duration");
            // Settings and getters of the client's configuration are not timed calls.
            let configuration = matches!(name.as_str(), "session_timeout" | "connection_timeout")
                || name.starts_with("negotiated_")
                || !timed_params && !name.contains("within");
            if !(timed_name || timed_params) || configuration {
                continue;
            }
            let deprecated = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("///") || l.starts_with("#[") || l.starts_with("note =") || l.starts_with(")]")
                })
                .any(|l| l.contains("#[deprecated"));
            if deprecated {
                continue;
            }
            let at = format!("{}:{}", file.strip_prefix(ROOT).unwrap().display(), i + 1);
            found.push(TimedCall { blocking, owner: owner.clone(), name, returns, at });
        }
    }
    found
}

/// What the one rule says a call of this name and return type is: the words its table row must
/// show under "on time-out", or why it breaks the rule.
fn rule(call: &TimedCall) -> Result<&'static str, String> {
    let name = call.name.as_str();
    let returns = call.returns.as_str();
    let wait_name = name.ends_with("_timeout")
        || name.starts_with("try_") && name.ends_with("_for")
        || name.starts_with("wait_for_")
        || name.starts_with("block_until_");
    let setting = returns == "Self";
    let operation_name = name.ends_with("_within") || name == "with_retry";
    if setting {
        // A time limit set on a builder or handle: for its operations (`timeout`), or for a wait
        // inside one (`max_lock_time`), whose row says what running out of time gives.
        return Ok(if name == "timeout" { "`Err(DeadlineExceeded)`" } else { "" });
    }
    if name == "next_timeout" {
        // The blocking feeds' documented exception: `Ok(None)` is the end of the feed.
        return if returns.starts_with("Result<Option<") {
            Ok("`Err(DeadlineExceeded)`")
        } else {
            Err(format!("a feed's next_timeout returns Result<Option<_>>, not {returns}"))
        };
    }
    if operation_name {
        return if returns.starts_with("Result<") || returns.starts_with("crate::Result<") {
            Ok("`Err(DeadlineExceeded)`")
        } else {
            Err(format!("an operation returns a Result (DeadlineExceeded on time-out), not {returns}"))
        };
    }
    if !wait_name {
        return Err(format!(
            "{name}: a wait is named `*_timeout`, `try_*_for`, `wait_for_*` or `block_until_*`; an operation \
             `*_within` (or a `.timeout(d)` setting)"
        ));
    }
    match returns {
        "Result<bool>" => Ok("`Ok(false)`"),
        "bool" => Ok("`false`"),
        r if r.starts_with("Result<Option<") => Ok("`Ok(None)`"),
        other => Err(format!("a wait returns Result<bool> or Result<Option<_>> (false/None on time-out), not {other}")),
    }
}

/// The docs' table of timed calls.
fn time_limits_table() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/failure-semantics.md")).unwrap();
    let start = doc.find("## Time limits").expect("docs/failure-semantics.md has a Time limits section");
    let rest = &doc[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].lines().filter(|l| l.starts_with("| `")).map(str::to_string).collect()
}

#[test]
fn every_timed_call_is_in_the_docs_table_with_the_shape_of_the_one_rule() {
    let calls = timed_calls();
    assert!(calls.len() > 50, "the scan found the timed calls: {calls:#?}");
    let table = time_limits_table();
    let mut wrong = Vec::new();
    for call in &calls {
        let on_timeout = match rule(call) {
            Ok(on_timeout) => on_timeout,
            Err(why) => {
                wrong.push(format!("{} ({}): {why}", call.doc_name(), call.at));
                continue;
            }
        };
        let rows: Vec<&String> =
            table.iter().filter(|row| listed_names(row).iter().any(|listed| call.is(listed))).collect();
        if rows.is_empty() {
            wrong.push(format!("{} ({}) is not in the docs' table", call.doc_name(), call.at));
        } else if !rows.iter().any(|row| row.split('|').nth(2).unwrap_or("").contains(on_timeout)) {
            wrong.push(format!("{} ({}): its row does not say {on_timeout} on time-out", call.doc_name(), call.at));
        }
    }
    for row in &table {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if cells.len() < 5 || cells[2..5].iter().any(|c| c.is_empty()) {
            wrong.push(format!("a row without its time-out, deadline-error and cancellation cells: {row}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "timed calls off the one rule (docs/failure-semantics.md, Time limits):\n{}",
        wrong.join("\n")
    );
}

/// One instant bounds several waits: each returns "not acquired" (the rule's `Ok(false)` /
/// `Ok(None)`, never an error) and the chain ends at the instant, not a timeout later per call.
#[tokio::test]
async fn an_instant_deadline_bounds_chained_waits_on_a_held_lock() {
    let (_server, clients) = server_and_clients(2).await;
    let path = unique_path("time-limits-instant");
    let holder = InterProcessMutex::new(&clients[0], &path).unwrap();
    let _held = holder.lock().await.unwrap();
    let waiter = InterProcessMutex::new(&clients[1], &path).unwrap();

    let limit = Duration::from_millis(400);
    let start = Instant::now();
    let end = start + limit;
    // Upper bound against a hang (an instant read as "no limit", or as a fresh timeout per call).
    tokio::time::timeout(limit + Duration::from_secs(3), async {
        assert!(!waiter.acquire_timeout(end).await.unwrap(), "acquired a lock held by another client");
        let first = start.elapsed();
        // (The timer's 1 ms granularity aside.)
        assert!(first + Duration::from_millis(2) >= limit, "acquire_timeout returned before its instant: {first:?}");
        // The instant has passed: the next waits are one attempt each (tokio's Instant too).
        assert!(waiter.try_lock_for(end).await.unwrap().is_none(), "locked a lock held by another client");
        assert!(waiter.try_lock_for(tokio::time::Instant::from_std(end)).await.unwrap().is_none());
    })
    .await
    .expect("the chained waits ended at their instant");
    // A limit too long for the clock saturates instead of panicking.
    let waiting = tokio::time::timeout(Duration::from_millis(200), waiter.acquire_timeout(Duration::MAX)).await;
    assert!(waiting.is_err(), "acquire_timeout(Duration::MAX) returned: {waiting:?}");
}
