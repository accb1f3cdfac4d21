//! `NatsServer`: a private `nats-server` process with JetStream for one test, on a port chosen up
//! front and a store directory of its own, so it can be stopped and restarted in place (clients
//! reconnect to the same URL, and the stream's data survives). Either release the bus supports
//! (`NatsVersion`), alone or as one node of a `NatsCluster`.
//!
//! Deliberately fails loudly: a missing binary, a server that exits at start, or one that never
//! accepts connections is a panic with the server's log, never a skipped test. It does not
//! configure auth or TLS; clustering is `cluster.rs`'s, which hands a node its flags.

use std::fs::{File, OpenOptions};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::version::NatsVersion;

/// How long a start may take before the test is failed: JetStream recovers its streams before
/// the client port opens, so a big store can take a moment.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a graceful stop may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running (or deliberately stopped) private nats-server.
#[derive(Debug)]
pub struct NatsServer {
    version: NatsVersion,
    bin: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    /// Flags beyond address, port and store (a cluster node's name and routes); the same on
    /// every restart.
    extra: Vec<String>,
    child: Option<Child>,
}

/// A port nobody listens on right now. The listener is dropped before the server binds it, so
/// another process could race us for it; `start` retries with a fresh port when that happens.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr of ephemeral listener").port()
}

impl NatsServer {
    /// Starts a fresh Debian 2.9.10 server with an empty JetStream store. Panics if it cannot.
    pub async fn start() -> NatsServer {
        Self::start_version(NatsVersion::Debian).await
    }

    /// Starts a fresh server of `version` with an empty JetStream store. Panics if it cannot.
    pub async fn start_version(version: NatsVersion) -> NatsServer {
        let mut server = Self::unstarted(version, 0, Vec::new());
        // A port taken between choosing and binding it shows up as an early exit; try another.
        let mut last_error = String::new();
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn_and_wait().await {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("nats-server did not start: {last_error}");
    }

    /// A handle on a server not started yet, on `port` with `extra` flags (a cluster node).
    pub(crate) fn unstarted(version: NatsVersion, port: u16, extra: Vec<String>) -> NatsServer {
        let bin = version.binary();
        let dir = tempfile::Builder::new().prefix("signalbus-nats-").tempdir().expect("create nats store dir");
        NatsServer { version, bin, port, dir, extra, child: None }
    }

    /// Which release this server is.
    pub fn version(&self) -> NatsVersion {
        self.version
    }

    /// `nats://127.0.0.1:<port>`; stays the same across `restart`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id while it runs (a benchmark reads its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The JetStream store directory (`-sd`); it survives `stop` and `restart`.
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("jetstream")
    }

    /// Whether the server process is running (as far as this handle knows).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the server gracefully (SIGTERM, so JetStream flushes its store) and waits until the
    /// process is gone; kills it if it takes longer than a few seconds. Idempotent.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        wait_port_closed(self.port).await;
    }

    /// Pauses the server (SIGSTOP): connections stay open, nothing is answered — what a stuck
    /// host, a long GC or a saturated disk look like to a client.
    pub fn pause(&mut self) {
        if let Some(child) = self.child.as_ref() {
            crate::process_signal::signal(child.id(), "STOP");
        }
    }

    /// Resumes a paused server (SIGCONT); it answers everything it received meanwhile.
    pub fn resume(&mut self) {
        if let Some(child) = self.child.as_ref() {
            crate::process_signal::signal(child.id(), "CONT");
        }
    }

    /// Kills the server with SIGKILL (a crash: no flush, no goodbye) and waits until it is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        wait_port_closed(self.port).await;
    }

    /// Starts the server again on the same port with the same store. Stops it first if running.
    pub async fn restart(&mut self) {
        self.stop().await;
        if let Err(e) = self.spawn_and_wait().await {
            panic!("nats-server did not restart on port {}: {e}", self.port);
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats-server.log")
    }

    /// The server's log so far (stdout and stderr of every run), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    async fn spawn_and_wait(&mut self) -> Result<(), String> {
        self.spawn()?;
        self.wait_accepting().await
    }

    /// Starts the process without waiting for it: the nodes of a cluster start together.
    pub(crate) fn spawn(&mut self) -> Result<(), String> {
        let log = open_log(&self.log_path());
        let child = Command::new(&self.bin)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(self.store_dir())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the client port accepts connections; an early exit is an error with the log.
    pub(crate) async fn wait_accepting(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("exited with {status}; log:\n{}", self.log()));
                }
            }
            // The client port opens only after JetStream has recovered its streams.
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                if let Some(mut child) = self.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(format!("not accepting connections after {START_TIMEOUT:?}; log:\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn open_log(path: &Path) -> File {
    OpenOptions::new().create(true).append(true).open(path).expect("open nats-server log file")
}

/// Waits until nothing accepts connections on `port`, so a restart can bind it again.
async fn wait_port_closed(port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + STOP_TIMEOUT;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        // Kill, not terminate: the store is a temp dir about to be deleted anyway.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NatsServer;
    use crate::version::NatsVersion;
    use std::net::TcpStream;

    #[tokio::test]
    async fn either_release_starts_and_says_which_it_is() {
        for version in [NatsVersion::Debian, NatsVersion::Current] {
            let server = NatsServer::start_version(version).await;
            let client = async_nats::connect(server.url()).await.unwrap();
            assert_eq!(client.server_info().version, version.version(), "{version:?}");
            assert_eq!(server.version(), version);
        }
    }

    #[tokio::test]
    async fn starts_stops_and_restarts_on_the_same_port() {
        let mut server = NatsServer::start().await;
        let port = server.port();
        assert!(server.url().ends_with(&format!(":{port}")));
        assert!(server.is_running());
        server.stop().await;
        assert!(!server.is_running());
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "port still open after stop");
        server.restart().await;
        assert_eq!(server.port(), port);
        assert!(server.is_running());
        assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
        server.kill().await;
        assert!(!server.is_running());
    }
}
