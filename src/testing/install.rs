//! Finding a Java runtime and the ZooKeeper server classpath on this machine.
//!
//! Lookup order:
//!
//! * java: `$JAVA_HOME/bin/java`, else the first `java` on `$PATH`;
//! * classpath: `$ZK_CLASSPATH` verbatim, else every `*.jar` in `$ZOOKEEPER_HOME` and
//!   `$ZOOKEEPER_HOME/lib`, else the Debian layout in `/usr/share/java` (`zookeeper.jar`,
//!   `zookeeper-jute.jar`, `slf4j-api.jar` and an SLF4J binding; the manifest of `zookeeper.jar`
//!   pulls in netty, commons-cli, commons-io and the rest).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{TestingError, TestingResult};

/// How to fix a missing installation; part of every [`TestingError::NotInstalled`] message.
pub(crate) const INSTALL_HINT: &str = "install ZooKeeper with `apt-get install zookeeper` (Debian/Ubuntu; \
     it pulls in a Java runtime), or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper distribution, \
     or set ZK_CLASSPATH to a Java classpath holding the ZooKeeper server jars (and JAVA_HOME if `java` \
     is not on PATH); alternatively set ZK_CONNECT=host:port to run against an already running server";

/// Directory of the Debian `zookeeper` package's jars.
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// A located ZooKeeper server installation: the `java` binary and the classpath to run
/// `org.apache.zookeeper.server.ZooKeeperServerMain` / `QuorumPeerMain` with.
#[derive(Clone, Debug)]
pub(crate) struct Installation {
    /// Path of the `java` executable.
    pub(crate) java: PathBuf,
    /// Java classpath (entries joined with `:`).
    pub(crate) classpath: OsString,
    /// Whether the classpath carries `slf4j-simple`, so `-Dorg.slf4j.simpleLogger.*` applies.
    pub(crate) slf4j_simple: bool,
}

impl Installation {
    /// Locates java and the ZooKeeper jars from the process environment.
    ///
    /// # Errors
    /// [`TestingError::NotInstalled`] (with the install hint) when java or the jars are missing.
    pub(crate) fn detect() -> TestingResult<Installation> {
        Self::detect_with(&|name| std::env::var_os(name), Path::new(DEBIAN_JAVA_DIR))
    }

    /// [`Installation::detect`] with an injectable environment, for unit tests.
    fn detect_with(env: &dyn Fn(&str) -> Option<OsString>, debian_dir: &Path) -> TestingResult<Installation> {
        let java = find_java(env)?;
        let (classpath, slf4j_simple) = find_classpath(env, debian_dir)?;
        Ok(Installation { java, classpath, slf4j_simple })
    }
}

fn not_installed(what: impl std::fmt::Display) -> TestingError {
    TestingError::NotInstalled { message: format!("{what}; {INSTALL_HINT}") }
}

fn non_empty(value: Option<OsString>) -> Option<OsString> {
    value.filter(|v| !v.is_empty())
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() && meta.permissions().mode() & 0o111 != 0,
        Err(_) => false,
    }
}

fn find_java(env: &dyn Fn(&str) -> Option<OsString>) -> TestingResult<PathBuf> {
    if let Some(home) = non_empty(env("JAVA_HOME")) {
        let java = PathBuf::from(home).join("bin").join("java");
        if is_executable_file(&java) {
            return Ok(java);
        }
        // A stale JAVA_HOME is common; fall back to PATH before giving up.
    }
    if let Some(path) = non_empty(env("PATH")) {
        for dir in std::env::split_paths(&path) {
            let java = dir.join("java");
            if is_executable_file(&java) {
                return Ok(java);
            }
        }
    }
    Err(not_installed("no Java runtime found ($JAVA_HOME/bin/java or `java` on PATH)"))
}

fn jars_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut jars: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "jar"))
        .collect();
    jars.sort();
    jars
}

fn join_classpath(entries: &[PathBuf]) -> TestingResult<OsString> {
    std::env::join_paths(entries).map_err(|err| not_installed(format!("unusable classpath entry: {err}")))
}

fn file_name_contains(path: &Path, needle: &str) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains(needle))
}

fn find_classpath(env: &dyn Fn(&str) -> Option<OsString>, debian_dir: &Path) -> TestingResult<(OsString, bool)> {
    if let Some(classpath) = non_empty(env("ZK_CLASSPATH")) {
        let simple = std::env::split_paths(&classpath).any(|p| file_name_contains(&p, "slf4j-simple"));
        return Ok((classpath, simple));
    }
    if let Some(home) = non_empty(env("ZOOKEEPER_HOME")) {
        let home = PathBuf::from(home);
        let mut jars = jars_in(&home);
        jars.extend(jars_in(&home.join("lib")));
        if !jars.iter().any(|jar| file_name_contains(jar, "zookeeper")) {
            return Err(not_installed(format!(
                "ZOOKEEPER_HOME={} holds no zookeeper*.jar (looked in it and in its lib/)",
                home.display()
            )));
        }
        let simple = jars.iter().any(|jar| file_name_contains(jar, "slf4j-simple"));
        return Ok((join_classpath(&jars)?, simple));
    }
    let required = ["zookeeper.jar", "zookeeper-jute.jar"];
    let missing: Vec<&str> = required.iter().copied().filter(|jar| !debian_dir.join(jar).is_file()).collect();
    if !missing.is_empty() {
        return Err(not_installed(format!(
            "ZooKeeper server jars not found ({} missing in {}, ZOOKEEPER_HOME and ZK_CLASSPATH unset)",
            missing.join(", "),
            debian_dir.display()
        )));
    }
    let mut entries: Vec<PathBuf> = required.iter().map(|jar| debian_dir.join(jar)).collect();
    // Netty's server connection factory (TLS) also needs netty-codec and netty-resolver, which
    // the manifest of Debian's zookeeper.jar does not list.
    for netty in ["netty-codec.jar", "netty-resolver.jar"] {
        let jar = debian_dir.join(netty);
        if jar.is_file() {
            entries.push(jar);
        }
    }
    let api = debian_dir.join("slf4j-api.jar");
    if api.is_file() {
        entries.push(api);
    }
    // Prefer slf4j-simple (logs to a file we choose); slf4j-nop at least silences the warning.
    let mut simple = false;
    for binding in ["slf4j-simple.jar", "slf4j-nop.jar"] {
        let jar = debian_dir.join(binding);
        if jar.is_file() {
            simple = binding == "slf4j-simple.jar";
            entries.push(jar);
            break;
        }
    }
    Ok((join_classpath(&entries)?, simple))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn missing_java_mentions_install_hint() {
        let env = env_of(&[("PATH", "/nonexistent-zk-curator-test")]);
        let err = Installation::detect_with(&env, Path::new("/nonexistent")).expect_err("must fail");
        let text = err.to_string();
        assert!(matches!(err, TestingError::NotInstalled { .. }), "{text}");
        assert!(text.contains("apt-get install zookeeper"), "{text}");
        assert!(text.contains("ZOOKEEPER_HOME") && text.contains("ZK_CLASSPATH"), "{text}");
    }

    #[test]
    fn missing_jars_is_not_installed() {
        let env = env_of(&[("PATH", "/usr/bin:/bin")]);
        if find_java(&env).is_err() {
            return; // no java on this machine: covered by the other test
        }
        let err = Installation::detect_with(&env, Path::new("/nonexistent")).expect_err("must fail");
        assert!(err.to_string().contains("zookeeper.jar"), "{err}");
    }

    #[test]
    fn zk_classpath_is_taken_verbatim() {
        let env = env_of(&[("PATH", "/usr/bin:/bin"), ("ZK_CLASSPATH", "/a/zk.jar:/b/slf4j-simple-1.7.jar")]);
        let (classpath, simple) = find_classpath(&env, Path::new("/nonexistent")).expect("ZK_CLASSPATH is used");
        assert_eq!(classpath, OsString::from("/a/zk.jar:/b/slf4j-simple-1.7.jar"));
        assert!(simple);
    }
}
