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

/// Where the Curator side's classes are, compiled once: `run.sh` compiles on first use into
/// `CURATOR_BENCH_BUILD`, and several test processes doing that at once into one folder read each
/// other's half-written class files. So a process compiles into a folder of its own and moves the
/// classes into place (a rename per file; the main class last), and `run.sh` finds them fresh.
pub fn bench_build_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::path::PathBuf::from(concat!(env!("CARGO_TARGET_TMPDIR"), "/curator-bench"));
        let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let source = run_sh().with_file_name("CuratorBench.java");
        let class = dir.join("CuratorBench.class");
        if matches!((modified(&class), modified(&source)), (Some(c), Some(s)) if c > s) {
            return dir;
        }
        let staging = dir.with_file_name(format!("curator-bench.staging-{}", std::process::id()));
        let built = std::process::Command::new(run_sh().with_file_name("build.sh"))
            .env("CURATOR_BENCH_BUILD", &staging)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run the Curator side's build.sh");
        assert!(built.success(), "build.sh failed: {built}");
        std::fs::create_dir_all(&dir).expect("create the Curator classes folder");
        let mut classes: Vec<_> = std::fs::read_dir(&staging)
            .expect("read the staging folder")
            .map(|e| e.expect("a staged class").path())
            .collect();
        // The main class last: `run.sh` judges the build by it.
        classes.sort_by_key(|p| p.file_name() == Some(std::ffi::OsStr::new("CuratorBench.class")));
        for staged in classes {
            let name = staged.file_name().expect("a class file name").to_owned();
            std::fs::rename(&staged, dir.join(name)).expect("move a class into place");
        }
        let _ = std::fs::remove_dir_all(&staging);
        dir
    })
    .clone()
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
            .env("CURATOR_BENCH_BUILD", bench_build_dir())
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
