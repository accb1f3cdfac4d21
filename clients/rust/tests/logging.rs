//! Scenario S24 of clients/SCENARIOS.md: logging is quiet — one WARN when the session is lost,
//! DEBUG per retry, one INFO when reconnected, a spooled send at DEBUG, and an error returned to
//! the caller not also logged. Against a real `signalbus serve`, `kill -9`ed and restarted.
//!
//! Deliberately the only test of its binary: it installs the process's global subscriber (the
//! client's tasks run on every worker thread), capturing the client's events.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use signalbus_client::{Client, Error, SendOutcome, SendRequest};
use support::{eventually, Bus};
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Captured {
    /// The client's lines at `level` (`WARN`, `INFO`, ...).
    fn lines(&self, level: &str) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.0.lock().unwrap()).to_string();
        text.lines()
            .filter(|l| l.contains("signalbus_client") && l.split_whitespace().next() == Some(level))
            .map(str::to_string)
            .collect()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s24_logging_is_quiet() {
    let captured = Captured::default();
    tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .without_time()
        .with_max_level(tracing::Level::DEBUG)
        .init();
    let mut bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    bus.token("bob").await;
    let spool = tempfile::tempdir().unwrap();
    let alice = Client::builder(&bus.url, &at)
        .spool_dir(spool.path())
        .reconnect(Duration::from_millis(100), Duration::from_millis(300))
        .build()
        .unwrap();
    alice.connect().await.unwrap();
    // an error returned to the caller is not also logged
    assert!(matches!(alice.send(SendRequest::new("nobody", "StatusUpdate")).await, Err(Error::UnknownRecipient(_))));
    for level in ["WARN", "INFO", "ERROR"] {
        assert_eq!(captured.lines(level), Vec::<String>::new(), "{level}");
    }
    bus.kill();
    alice.wait_disconnected(Duration::from_secs(5)).await.unwrap();
    let spooled = alice.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"n": 1}))).await.unwrap();
    assert!(matches!(spooled, SendOutcome::Spooled(_)));
    tokio::time::sleep(Duration::from_secs(1)).await; // several failed attempts
    bus.start().await;
    alice.wait_connected(Duration::from_secs(20)).await.unwrap();
    let a = alice.clone();
    eventually("spool replayed", 10, || {
        let a = a.clone();
        async move { Ok(a.spool().unwrap().is_empty().then_some(())) }
    })
    .await;
    let (warns, infos) = (captured.lines("WARN"), captured.lines("INFO"));
    assert!(warns.len() == 1 && warns[0].contains("lost the session"), "{warns:#?}");
    assert!(infos.len() == 1 && infos[0].contains("reconnected"), "{infos:#?}");
    assert_eq!(captured.lines("ERROR"), Vec::<String>::new());
    let debug = captured.lines("DEBUG");
    assert!(debug.iter().filter(|l| l.contains("reconnecting")).count() >= 2, "{debug:#?}");
    assert!(debug.iter().any(|l| l.contains("spooled")), "{debug:#?}");
    alice.close().await;
    captured.clear();
    let bad = Client::new(&bus.url, "sb_not_a_token").unwrap();
    assert!(matches!(bad.connect().await, Err(Error::Unauthorized(_))));
    bad.close().await;
    for level in ["WARN", "INFO", "ERROR"] {
        assert_eq!(captured.lines(level), Vec::<String>::new(), "{level}: returned to the caller, not also logged");
    }
}
