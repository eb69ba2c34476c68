//! Supervision of one server JVM from a dedicated OS thread.
//!
//! The JVM must never outlive the test process, even when the test binary is killed (a test
//! runner timeout, Ctrl-C, `kill -9`). Each JVM is therefore spawned with
//! `prctl(PR_SET_PDEATHSIG, SIGKILL)`. That signal fires when the *thread* that forked the child
//! exits, so every JVM gets a long-lived supervisor thread that forks it, owns the
//! [`std::process::Child`], and takes commands (spawn, signal, kill, terminate) over a channel.
//! When the process dies all its threads die and the kernel kills the JVM; when the handle is
//! dropped the thread kills and reaps the JVM before it exits.
//!
//! Everything here is synchronous underneath, so [`Supervisor`]'s `Drop` works without a tokio
//! runtime; the async methods merely await the thread's answer.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{TestingError, TestingResult};

/// How long `Drop` waits for the supervisor thread to kill and reap the JVM.
const DROP_WAIT: Duration = Duration::from_secs(10);
/// Poll interval while waiting for a terminated JVM to exit.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// What to run: a `java` command line plus the file that receives its stdout and stderr.
#[derive(Clone, Debug)]
pub(crate) struct JvmSpec {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: PathBuf,
    pub(crate) output: PathBuf,
}

/// Where a reply goes: a blocking channel (for `Drop` and sync methods) or a tokio oneshot.
enum Reply<T> {
    Sync(mpsc::Sender<T>),
    Async(tokio::sync::oneshot::Sender<T>),
}

impl<T> Reply<T> {
    fn send(self, value: T) {
        // The asker may have given up (timeout, cancelled future); that is fine.
        match self {
            Reply::Sync(tx) => {
                let _ = tx.send(value);
            }
            Reply::Async(tx) => {
                let _ = tx.send(value);
            }
        }
    }
}

enum Order {
    /// Start the JVM (killing a previous one first); replies with its pid.
    Spawn(Reply<io::Result<u32>>),
    /// Send a signal if the JVM is running.
    Signal(i32, Reply<io::Result<()>>),
    /// SIGTERM, wait up to the grace period, then SIGKILL; always reaps.
    Terminate(Duration, Reply<()>),
    /// SIGKILL and reap.
    Kill(Reply<()>),
    /// `None` while running (or never started), else how it exited.
    Status(Reply<Option<ExitStatus>>),
}

/// Handle to a supervisor thread owning at most one JVM at a time.
pub(crate) struct Supervisor {
    name: String,
    tx: Option<mpsc::Sender<Order>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Supervisor {
    /// Starts the supervisor thread (no JVM yet; see [`Supervisor::spawn`]).
    pub(crate) fn new(name: &str, spec: JvmSpec) -> TestingResult<Supervisor> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("zk-{name}"))
            .spawn(move || supervise(spec, rx))
            .map_err(|source| TestingError::Io { context: format!("spawning supervisor thread for {name}"), source })?;
        Ok(Supervisor { name: name.to_owned(), tx: Some(tx), thread: Some(thread) })
    }

    fn gone(&self) -> TestingError {
        TestingError::Io {
            context: format!("supervisor thread of {} is gone", self.name),
            source: io::Error::other("supervisor thread exited"),
        }
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Order) -> TestingResult<T> {
        let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
        let tx = self.tx.as_ref().ok_or_else(|| self.gone())?;
        tx.send(make(Reply::Async(reply_tx))).map_err(|_| self.gone())?;
        reply_rx.await.map_err(|_| self.gone())
    }

    fn ask_blocking<T>(&self, timeout: Duration, make: impl FnOnce(Reply<T>) -> Order) -> TestingResult<T> {
        let (reply_tx, reply_rx) = mpsc::channel();
        let tx = self.tx.as_ref().ok_or_else(|| self.gone())?;
        tx.send(make(Reply::Sync(reply_tx))).map_err(|_| self.gone())?;
        reply_rx.recv_timeout(timeout).map_err(|_| self.gone())
    }

    /// Starts the JVM (killing a still running previous one); returns its pid.
    pub(crate) async fn spawn(&self) -> TestingResult<u32> {
        self.ask(Order::Spawn)
            .await?
            .map_err(|source| TestingError::Io { context: format!("starting the JVM of {}", self.name), source })
    }

    /// SIGKILLs the JVM and waits until it is reaped. No-op when not running.
    pub(crate) async fn kill(&self) -> TestingResult<()> {
        self.ask(Order::Kill).await
    }

    /// SIGTERM, then SIGKILL after `grace`; waits until the JVM is reaped.
    pub(crate) async fn terminate(&self, grace: Duration) -> TestingResult<()> {
        self.ask(|reply| Order::Terminate(grace, reply)).await
    }

    /// Sends `signal` to the running JVM.
    pub(crate) fn signal(&self, signal: i32) -> TestingResult<()> {
        self.ask_blocking(Duration::from_secs(5), |reply| Order::Signal(signal, reply))?
            .map_err(|source| TestingError::Io { context: format!("signalling the JVM of {}", self.name), source })
    }

    /// `Some(status)` once the JVM has exited on its own (or was killed).
    pub(crate) async fn exit_status(&self) -> TestingResult<Option<ExitStatus>> {
        self.ask(Order::Status).await
    }

    /// Asks the thread to kill the JVM without waiting (lets a cluster kill its nodes in
    /// parallel before [`Supervisor::shutdown_blocking`] waits for each).
    pub(crate) fn request_kill(&self) {
        if let Some(tx) = self.tx.as_ref() {
            let (reply, _) = mpsc::channel();
            let _ = tx.send(Order::Kill(Reply::Sync(reply)));
        }
    }

    /// Kills the JVM and stops the thread, blocking; never panics.
    pub(crate) fn shutdown_blocking(&mut self) {
        let _ = self.ask_blocking(DROP_WAIT, Order::Kill);
        // Closing the channel ends the thread (which kills the JVM again should the above have
        // timed out).
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            if thread.is_finished() || wait_finished(&thread, DROP_WAIT) {
                let _ = thread.join();
            }
            // Otherwise leave the thread detached rather than hang a dropping test forever.
        }
    }
}

fn wait_finished(thread: &JoinHandle<()>, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if thread.is_finished() {
            return true;
        }
        std::thread::sleep(EXIT_POLL);
    }
    thread.is_finished()
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.shutdown_blocking();
    }
}

/// Body of the supervisor thread.
fn supervise(spec: JvmSpec, rx: mpsc::Receiver<Order>) {
    let mut child: Option<Child> = None;
    while let Ok(command) = rx.recv() {
        match command {
            Order::Spawn(reply) => {
                kill_and_reap(&mut child);
                let result = spawn_jvm(&spec).map(|c| {
                    let pid = c.id();
                    child = Some(c);
                    pid
                });
                reply.send(result);
            }
            Order::Signal(signal, reply) => reply.send(send_signal(&mut child, signal)),
            Order::Terminate(grace, reply) => {
                terminate_and_reap(&mut child, grace);
                reply.send(());
            }
            Order::Kill(reply) => {
                kill_and_reap(&mut child);
                reply.send(());
            }
            Order::Status(reply) => {
                let status = match child.as_mut() {
                    None => None,
                    Some(c) => c.try_wait().ok().flatten(),
                };
                reply.send(status);
            }
        }
    }
    // The handle is gone (dropped, or the owner panicked): never leave the JVM behind.
    kill_and_reap(&mut child);
}

fn kill_and_reap(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        // kill() fails only when the child was already reaped; wait() then returns the status.
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[allow(unsafe_code)]
fn terminate_and_reap(child: &mut Option<Child>, grace: Duration) {
    let Some(c) = child.as_mut() else {
        return;
    };
    if matches!(c.try_wait(), Ok(None)) {
        if let Ok(pid) = libc::pid_t::try_from(c.id()) {
            // SAFETY: plain syscall on the pid of a child we have not reaped yet, so it cannot
            // have been recycled for another process.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !matches!(c.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(EXIT_POLL);
        }
    }
    kill_and_reap(child);
}

#[allow(unsafe_code)]
fn send_signal(child: &mut Option<Child>, signal: i32) -> io::Result<()> {
    let Some(c) = child.as_mut() else {
        return Err(io::Error::other("the JVM is not running"));
    };
    if !matches!(c.try_wait(), Ok(None)) {
        return Err(io::Error::other("the JVM has exited"));
    }
    let pid = libc::pid_t::try_from(c.id()).map_err(io::Error::other)?;
    // SAFETY: plain syscall on the pid of a live, unreaped child (see above).
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if signal == libc::SIGSTOP {
        wait_stopped(pid);
    }
    Ok(())
}

/// `kill(SIGSTOP)` only starts a group stop: each JVM thread stops once it is scheduled, so on a
/// busy machine the server can go on answering for milliseconds after `kill` returned. Wait (at
/// most 2 s) until every thread is stopped, so that nothing sent after `pause()` is answered.
#[cfg(target_os = "linux")]
fn wait_stopped(pid: libc::pid_t) {
    let all_stopped = || -> Option<bool> {
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).unwrap_or_default();
            // The state letter follows the parenthesised command name; a vanished thread counts as stopped.
            let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
            if !matches!(state, None | Some('T' | 't' | 'Z' | 'X')) {
                return Some(false);
            }
        }
        Some(true)
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while all_stopped() == Some(false) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(not(target_os = "linux"))]
fn wait_stopped(_pid: libc::pid_t) {}

fn spawn_jvm(spec: &JvmSpec) -> io::Result<Child> {
    let output = File::options().create(true).append(true).open(&spec.output)?;
    let stderr = output.try_clone()?;
    let mut command = Command::new(&spec.program);
    command.args(&spec.args).current_dir(&spec.cwd).stdin(Stdio::null()).stdout(output).stderr(stderr);
    set_parent_death_signal(&mut command);
    command.spawn()
}

/// Makes the kernel SIGKILL the child when this (supervisor) thread exits, which includes the
/// whole test process dying.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe syscalls
    // (prctl, getppid); it allocates nothing and takes no locks.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then nobody would kill us.
            if libc::getppid() != parent {
                return Err(io::Error::other("parent exited while starting the JVM"));
            }
            Ok(())
        });
    }
}

/// Other Unixes have no parent-death signal; `Drop` still kills the JVM.
#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}
