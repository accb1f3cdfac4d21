//! Shared by the docs tests: an embedded `signalbus serve` on a free port with a temp data dir,
//! ready to answer, killed when dropped.
//!
//! Deliberately knows nothing about any document or API call: the tests that use it decide what
//! to run against the server.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `signalbus` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_signalbus");
/// The admin token every server started here is given.
pub const ADMIN: &str = "docs-admin-token";

/// A running `signalbus serve`; the process is killed and its data dir removed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`
    pub url: String,
    /// Its `--data-dir` (not every test binary reads it).
    #[allow(dead_code)]
    pub dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `signalbus serve --admin-token ADMIN` on a free port; returns once `/readyz` answers 200.
pub fn serve() -> Server {
    serve_with(Some(ADMIN))
}

/// `signalbus serve` on a free port, with `admin` as its admin token or, without one, the
/// token it generates and keeps in its data dir; returns once `/readyz` answers 200.
pub fn serve_with(admin: Option<&str>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(BIN);
    command.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"]).arg(dir.path());
    if let Some(token) = admin {
        command.args(["--admin-token", token]);
    }
    let child = command.env("RUST_LOG", "warn").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let server = Server { child, url, dir };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = Command::new("curl").args(["-sf", &format!("{}/readyz", server.url)]).output();
        if ready.is_ok_and(|o| o.status.success()) {
            return server;
        }
        assert!(Instant::now() < deadline, "signalbus serve did not become ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}
