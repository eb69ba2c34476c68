//! The real Apache Curator peer (`tests/java/CuratorPeer.java`): compiled once per test binary and
//! run as one JVM per test, driven line by line over stdin/stdout. Its commands are wrapped by the
//! test files that use them (`curator_interop.rs`, `sibling_faults.rs`).
//!
//! Needs `javac`/`java` (`apt-get install default-jdk-headless`) and the Curator jars
//! (`apt-get install libcurator-recipes-java libcurator-discovery-java zookeeper`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Jars of the peer's classpath (the manifest of zookeeper.jar pulls netty, metrics, ...).
const CLASSPATH_JARS: &[&str] = &[
    "curator-recipes",
    "curator-framework",
    "curator-client",
    "curator-x-discovery",
    "jackson-databind",
    "jackson-core",
    "jackson-annotations",
    "zookeeper",
    "zookeeper-jute",
    "guava",
    "slf4j-api",
    "slf4j-nop",
];
const JAR_DIR: &str = "/usr/share/java";
const PEER_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/java/CuratorPeer.java");
const PEER_CLASSES: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/curator-peer");
/// Upper bound for the JVM's start and its client's first connection (the peer itself waits up
/// to 100 s for it): a hang guard, generous for a loaded machine where a JVM starts slowly.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(150);
/// Upper bound for one peer command (the `critical` loop included).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

pub fn classpath() -> String {
    let missing: Vec<String> =
        CLASSPATH_JARS.iter().map(|j| format!("{JAR_DIR}/{j}.jar")).filter(|p| !Path::new(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "Curator jars missing: {missing:?}; install them with `apt-get install -y libcurator-recipes-java libcurator-discovery-java zookeeper slf4j-nop`"
    );
    CLASSPATH_JARS.iter().map(|j| format!("{JAR_DIR}/{j}.jar")).collect::<Vec<_>>().join(":")
}

/// `JAVA_HOME/bin/<tool>`, else `<tool>` on PATH.
fn java_tool(tool: &str) -> PathBuf {
    let candidates = std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin").join(tool)).into_iter().chain(
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).map(|d| d.join(tool)).collect::<Vec<_>>()),
    );
    for candidate in candidates {
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("`{tool}` not found (JAVA_HOME or PATH); install a JDK: `apt-get install -y default-jdk-headless`")
}

/// A digest of the peer's source, kept beside its classes: a class directory compiled from
/// another version of the source (a target directory shared by checkouts of other branches,
/// whose files can be older than the classes) is compiled again.
fn source_digest() -> String {
    use std::hash::{Hash, Hasher};
    let source = std::fs::read(PEER_SOURCE).expect("read the peer's source");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut hasher);
    format!("{:016x} {}", hasher.finish(), source.len())
}

/// Compiles the peer once per test binary (skipped when the classes were compiled from this
/// source); returns the class directory.
pub fn compiled_peer() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let dir = PathBuf::from(PEER_CLASSES);
        let class = dir.join("CuratorPeer.class");
        let stamp = dir.join("CuratorPeer.source-digest");
        let digest = source_digest();
        let fresh = class.exists() && std::fs::read_to_string(&stamp).is_ok_and(|d| d == digest);
        if !fresh {
            // Compile into a private directory, then move the class files in (each rename is
            // atomic), so a JVM started by a concurrent test run never loads a half-written class.
            let staging = dir.join(format!(".javac-{}", std::process::id()));
            std::fs::create_dir_all(&staging).expect("create the peer's class dir");
            let out = std::process::Command::new(java_tool("javac"))
                .arg("-cp")
                .arg(classpath())
                .arg("-d")
                .arg(&staging)
                .arg(PEER_SOURCE)
                .output()
                .expect("run javac");
            assert!(
                out.status.success(),
                "javac {PEER_SOURCE} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            // The main class last, then the digest: together they mark the directory as fresh.
            let mut classes: Vec<_> = std::fs::read_dir(&staging).unwrap().map(|e| e.unwrap().file_name()).collect();
            classes.sort_by_key(|name| name == "CuratorPeer.class");
            for name in classes {
                std::fs::rename(staging.join(&name), dir.join(&name)).expect("install the peer's classes");
            }
            let _ = std::fs::remove_dir(&staging);
            // Written aside and renamed, like the classes: a concurrent run reads all or nothing.
            let stamp_staging = dir.join(format!(".digest-{}", std::process::id()));
            std::fs::write(&stamp_staging, &digest).expect("write the peer's source digest");
            std::fs::rename(&stamp_staging, &stamp).expect("install the peer's source digest");
        }
        dir
    })
}

/// One JVM running `CuratorPeer` with one Curator client; killed on drop.
pub struct CuratorPeer {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl CuratorPeer {
    pub async fn start(connect: &str) -> Self {
        let classes = tokio::task::spawn_blocking(compiled_peer).await.expect("compile the peer");
        let mut child = Command::new(java_tool("java"))
            .arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg("-cp")
            .arg(format!("{}:{}", classpath(), classes.display()))
            .arg("CuratorPeer")
            .arg(connect)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the Curator peer JVM");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut peer = CuratorPeer { _child: child, stdin, stdout };
        let ready = peer.read_line("startup", STARTUP_TIMEOUT).await;
        assert_eq!(ready, "READY", "the Curator peer did not start");
        peer
    }

    pub async fn read_line(&mut self, what: &str, timeout: Duration) -> String {
        match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("the Curator peer exited during `{what}`"),
            Ok(Err(e)) => panic!("reading the Curator peer's answer to `{what}`: {e}"),
            Err(_) => panic!("the Curator peer did not answer `{what}` within {timeout:?}"),
        }
    }

    /// Sends one command, returns its one-line answer; an `ERROR` answer fails the test.
    pub async fn cmd(&mut self, line: &str) -> String {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to the Curator peer");
        self.stdin.flush().await.expect("flush to the Curator peer");
        let answer = self.read_line(line, COMMAND_TIMEOUT).await;
        assert!(!answer.starts_with("ERROR"), "Curator peer: `{line}` -> {answer}");
        answer
    }
}

/// `ACQUIRED <node>` → the node; `NOT_ACQUIRED` → None; anything else fails the test.
pub fn parse_acquired(answer: &str) -> Option<String> {
    match answer {
        "NOT_ACQUIRED" => None,
        a => Some(a.strip_prefix("ACQUIRED ").unwrap_or_else(|| panic!("bad answer {a}")).to_string()),
    }
}
