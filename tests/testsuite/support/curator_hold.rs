//! A real Curator 5.4 participant in a process of its own: `shared/bench/curator/run.sh CONNECT
//! hold PATH SECONDS KIND` (shared/ lies beside the checkout) (`latch:ID`, `selector:ID`, `mutex`, ...), which prints
//! `ACQUIRED` once it leads or holds and `RELEASED` after, among lines of tree dumps.

use std::time::Duration;

use tokio::io::AsyncBufReadExt;

/// The Curator side of the benchmark, in the `shared/` folder beside this checkout (where CI
/// lays it), or the developers' `/work/shared`.
pub fn run_sh() -> std::path::PathBuf {
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/curator/run.sh");
    if beside.exists() {
        beside
    } else {
        std::path::PathBuf::from("/work/shared/bench/curator/run.sh")
    }
}

/// One Curator `hold` process; killed when dropped.
pub struct CuratorHold {
    pub child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl CuratorHold {
    /// Starts `run.sh CONNECT hold PATH SECONDS KIND`.
    pub fn start(connect: &str, path: &str, seconds: u64, kind: &str) -> Self {
        let mut child = tokio::process::Command::new(run_sh())
            .args([connect, "hold", path, &seconds.to_string(), kind])
            .env("CURATOR_BENCH_BUILD", concat!(env!("CARGO_TARGET_TMPDIR"), "/curator-bench"))
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("run the Curator {kind}: {e}"));
        let stdout = child.stdout.take().expect("the Curator process's stdout");
        let lines = tokio::io::BufReader::new(stdout).lines();
        Self { child, lines }
    }

    /// A Curator `LeaderLatch` with participant id `id`.
    pub fn latch(connect: &str, path: &str, seconds: u64, id: &str) -> Self {
        Self::start(connect, path, seconds, &format!("latch:{id}"))
    }

    /// A Curator `LeaderSelector` with participant id `id`.
    pub fn selector(connect: &str, path: &str, seconds: u64, id: &str) -> Self {
        Self::start(connect, path, seconds, &format!("selector:{id}"))
    }

    /// The next line starting with `prefix` (others are the tree dump); panics after `within`.
    pub async fn expect(&mut self, prefix: &str, within: Duration) -> String {
        let found = tokio::time::timeout(within, async {
            while let Some(line) = self.lines.next_line().await.expect("read the Curator output") {
                if line.starts_with(prefix) {
                    return line;
                }
            }
            panic!("Curator ended before {prefix}");
        });
        found.await.unwrap_or_else(|_| panic!("no {prefix} from Curator within {within:?}"))
    }
}
