//! `zk-curator lock` and `participants` at the edges: foreign children of a lock path, a root lock
//! path or a zero session timeout (usage errors), a leader that survives SIGKILL.

use crate::support;

use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
const HANG: Duration = Duration::from_secs(60);

fn zk_curator(connect: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--connect").arg(connect).args(args);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    cmd
}

async fn run(connect: &str, args: &[&str]) -> Output {
    tokio::time::timeout(HANG, zk_curator(connect, args).output()).await.expect("zk-curator hung").expect("run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A child that is not a lock node but sorts first (Curator's `fixForSorting` keeps a name
/// without the lock name whole; `-` sorts before the digits of a sequence) blocks every contender
/// of the recipe, as in Curator. `participants` must not call the first lock node the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_agrees_with_the_recipe_about_foreign_children() {
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    for (kind, marker) in [("mutex", "-lock-"), ("write", "__WRIT__")] {
        let path = support::unique_path(&format!("review-foreign-{kind}"));
        let persistent = zk_curator::raw::CreateMode::Persistent.with_acls(zk_curator::raw::Acls::anyone_all());
        obs.mkdir(&path, &persistent).await.expect("the lock path");
        obs.create(&format!("{path}/-blocker"), b"", &persistent).await.expect("a foreign child");

        // The recipe itself: blocked.
        let blocked = run(&connect, &["hold", &path, "--kind", kind, "--timeout", "1"]).await;
        assert_eq!(blocked.status.code(), Some(1), "{kind}: {}{}", text(&blocked.stdout), text(&blocked.stderr));

        let waiter = zk_curator(&connect, &["hold", &path, "--kind", kind, "--timeout", "50"]).spawn().unwrap();
        support::eventually_queued(&obs, &path, 2, "the waiter queued behind the foreign child").await;
        let listed = run(&connect, &["participants", &path]).await;
        assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
        let lines = text(&listed.stdout);
        assert!(lines.lines().any(|l| l.contains(marker)), "{kind}: the waiter is listed: {lines}");
        assert!(
            !lines.lines().any(|l| l.starts_with("HOLDER")),
            "{kind}: participants names a holder while the recipe holds nothing: {lines}"
        );
        drop(waiter);
    }
}

/// Bad input is a usage error (status 2) naming the value, found before connecting — not 69
/// ("ZooKeeper could not be reached"): a lock at the root, a zero session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_lock_path_or_a_zero_session_timeout_is_a_usage_error() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("review-usage");
    for (args, names) in [
        (vec!["lock", "/", "--", "true"], "\"/\""),
        (vec!["--namespace", "review-ns", "lock", "/", "--", "true"], "\"/\""),
        (vec!["--namespace", "review-ns", "participants", "/"], "\"/\""),
        (vec!["hold", "/", "--seconds", "0"], "\"/\""),
        (vec!["--session-timeout", "0", "lock", &path, "--", "true"], "\"0\""),
        (vec!["--session-timeout-ms", "0", "lock", &path, "--", "true"], "\"0\""),
    ] {
        let out = run(&connect, &args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(names), "{args:?} does not name the value: {}", text(&out.stderr));
    }
}

/// docs/cli.md: after a lost lock "SIGKILL is repeated until the group is gone (at most 5 s after
/// it; then it says which group survived)". A group leader that SIGKILL cannot reach (here: a
/// process that made itself root while `lock` runs as `nobody`; on a real system also a leader in
/// uninterruptible sleep) must not keep `lock` waiting for ever. Needs root (to make the
/// set-uid helper and run `lock` as `nobody`); skipped otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_gives_up_on_a_leader_that_survives_sigkill() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/usr/bin/perl").exists() {
        eprintln!("skipped: needs root and /usr/bin/perl");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-unkillable");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let perl = dir.path().join("perl");
    std::fs::copy("/usr/bin/perl", &perl).unwrap();
    std::fs::set_permissions(&perl, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let pid_file = dir.path().join("pid");
    let script = dir.path().join("root-sleep.pl");
    std::fs::write(
        &script,
        format!(
            "$ENV{{PATH}} = '/bin:/usr/bin'; delete @ENV{{qw(IFS CDPATH ENV BASH_ENV)}};\n\
             $< = 0; $> = 0; open(my $f, '>', '{}') or die; print $f $$; close $f;\n\
             exec '/bin/sleep', '300';\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut lock = zk_curator(
        &connect,
        &["lock", &path, "--kill-after", "0.2", "--", perl.to_str().unwrap(), script.to_str().unwrap()],
    );
    let messages = dir.path().join("stderr");
    lock.uid(65534).gid(65534).stdout(Stdio::null()).stderr(std::fs::File::create(&messages).unwrap());
    let lock = lock.spawn().expect("spawn lock as nobody");
    // The file exists a moment before perl has written the pid into it: wait for the number.
    let read_pid = || std::fs::read_to_string(&pid_file).ok().and_then(|text| text.trim().parse::<i32>().ok());
    support::eventually(Duration::from_secs(30), "the command made itself root", || async { read_pid().is_some() })
        .await;
    let leader: i32 = read_pid().expect("the pid, once written");
    let node = support::sorted_children(&obs, &path).await.pop().expect("the lock node");
    obs.delete(&format!("{path}/{node}"), None).await.expect("delete the lock node");
    // Documented: SIGKILL after --kill-after, then at most 5 s: 30 s is generous.
    let finished = tokio::time::timeout(Duration::from_secs(30), lock.wait_with_output()).await;
    // SAFETY: kill(2) on the helper this test started (we are root).
    unsafe { libc::kill(leader, libc::SIGKILL) };
    let said = std::fs::read_to_string(&messages).unwrap_or_default();
    let out = finished.unwrap_or_else(|_| panic!("`lock` waited for ever for a leader SIGKILL cannot reach: {said}"));
    assert_eq!(out.unwrap().status.code(), Some(75), "{said}");
    assert!(said.contains("survived"), "it says which group survived: {said}");
}
