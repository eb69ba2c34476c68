//! `zk-testing-server`: one local ZooKeeper (the `testing` harness's [`TestingServer`]) for a
//! whole test run, shared by tests through `ZK_CONNECT`; each test's handle then gets a chroot of
//! its own (see `zk_curator::testing`).
//!
//! It prints `ZK_CONNECT=127.0.0.1:PORT` once the server answers, and runs until its standard
//! input closes (or it is killed: the JVM dies with it). For example, in bash:
//!
//! ```text
//! coproc ZK { zk-testing-server; }
//! read -r line <&"${ZK[0]}" && export "$line"
//! cargo nextest run ...
//! exec {ZK[1]}>&-   # closing its input stops the server
//! ```

use std::io::Write;
use std::process::ExitCode;

use zk_curator::testing::TestingServer;

fn main() -> ExitCode {
    if std::env::args().len() > 1 {
        eprintln!("usage: zk-testing-server   (no arguments; prints ZK_CONNECT=..., stops when stdin closes)");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("zk-testing-server: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Owned: ZK_CONNECT may already be set in this environment; this program is the server.
    let server = match runtime.block_on(TestingServer::builder().owned().start()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("zk-testing-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout();
    if writeln!(out, "ZK_CONNECT={}", server.connect_string()).and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    eprintln!("zk-testing-server: serving {} (data in {})", server.connect_string(), server.data_dir().display());
    // Until standard input closes; what is read is ignored.
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    drop(server);
    ExitCode::SUCCESS
}
