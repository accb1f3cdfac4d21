//! A real `signalbus serve` (embedded mode) per test, started from the built binary, as
//! clients/SCENARIOS.md describes: a free port, a temporary data dir, a fixed admin token and
//! `--stale-after 3s`. Plus the `eventually` poll the scenarios wait with.
//!
//! Deliberately no fake bus: the binary is `$SIGNALBUS_BIN`, else `target/debug/signalbus`
//! (built by `scripts/test` before the tests); a missing binary fails the test, never skips it.

#![allow(dead_code)] // each test binary uses a part of this module

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use signalbus_client::{AdminClient, Client, Error};

pub const ADMIN_TOKEN: &str = "sbtest-admin-token";
pub const STALE_AFTER: &str = "3s";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

/// The signalbus binary: `$SIGNALBUS_BIN`, else the workspace's debug build. Not built here:
/// a `cargo build` inside `cargo test` inherits the test's environment, which reruns build
/// scripts and flips the fingerprints of the outer build back and forth. `scripts/test` and
/// `clients/test` build it before the tests; a missing one fails every scenario, loudly.
pub fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let path = match std::env::var_os("SIGNALBUS_BIN").filter(|v| !v.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => {
                let root = workspace_root();
                let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
                target.join("debug/signalbus")
            }
        };
        let ok = std::fs::metadata(&path).map(|m| m.is_file() && m.len() > 0).unwrap_or(false);
        assert!(
            ok,
            "the signalbus binary {} is missing or empty: build it first with `cargo build --bin signalbus` \
             (scripts/test does) or point SIGNALBUS_BIN at one",
            path.display()
        );
        path
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One `signalbus serve`; `kill` and `start` keep its port and data dir.
#[derive(Debug)]
pub struct Bus {
    pub port: u16,
    pub url: String,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    /// More `serve` arguments (e.g. `--config FILE`).
    extra: Vec<String>,
}

impl Bus {
    /// A fresh bus, ready (`/readyz` 200).
    pub async fn start_new() -> Bus {
        Bus::start_configured(None).await
    }

    /// A fresh bus whose `--config` file holds `config` (TOML), when given.
    pub async fn start_configured(config: Option<&str>) -> Bus {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let mut extra = Vec::new();
        if let Some(toml) = config {
            let file = dir.path().join("signalbus.toml");
            std::fs::write(&file, toml).unwrap();
            extra = vec!["--config".to_string(), file.display().to_string()];
        }
        let mut bus = Bus { port, url: format!("http://127.0.0.1:{port}"), dir, child: None, extra };
        bus.start().await;
        bus
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("serve.log")
    }

    pub async fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = File::options().create(true).append(true).open(self.log_path()).unwrap();
        let child = Command::new(binary())
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--admin-token", ADMIN_TOKEN, "--stale-after", STALE_AFTER])
            .args(&self.extra)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning signalbus serve");
        self.child = Some(child);
        let http = reqwest::Client::new();
        let ready = format!("{}/readyz", self.url);
        for _ in 0..600 {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("signalbus serve exited with {status}:\n{}", self.log_tail(40));
            }
            if let Ok(r) = http.get(&ready).timeout(Duration::from_secs(1)).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("signalbus serve not ready within 30s:\n{}", self.log_tail(40));
    }

    /// `kill -9`: no goodbye to anyone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn admin(&self) -> AdminClient {
        AdminClient::new(&self.url, ADMIN_TOKEN).unwrap()
    }

    /// Registers `identity` (kind daemon) and answers its token.
    pub async fn token(&self, identity: &str) -> String {
        self.admin().register(identity, None, Some("daemon")).await.unwrap().token
    }

    /// A connected client with default options.
    pub async fn connected(&self, token: &str) -> Client {
        let c = Client::new(&self.url, token).unwrap();
        c.connect().await.unwrap();
        c
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- signalbus serve log ({}) ---\n{}", self.log_path().display(), self.log_tail(80));
        }
        self.kill();
    }
}

/// Polls `check` until it answers `Some` (errors count as not yet), or panics after `secs`.
pub async fn eventually<T, F, Fut>(what: &str, secs: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, Error>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        match check().await {
            Ok(Some(v)) => return v,
            Ok(None) => last = "not yet".into(),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} not reached within {secs}s (last: {last})");
}

/// The row of `signal_id` once it is acked.
pub async fn acked(client: &Client, signal_id: &str) -> signalbus_client::SignalRow {
    let id = signal_id.to_string();
    eventually(&format!("{id} acked"), 10, || {
        let id = id.clone();
        async move {
            let r = client.get(&id).await?;
            Ok(r.acked_at.is_some().then_some(r))
        }
    })
    .await
}
