//! Backends for the event-log conformance suite: each opens a real store (a private nats-server,
//! or a SQLite file in a temp dir), can close and reopen it, and hands out the log.
//!
//! Deliberately holds no test cases (`log_conformance.rs` does) and mocks nothing.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bus::event::{Entity, Event, EventBody, SignalAcked};
use bus::log::embedded::EmbeddedLog;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::{Appended, Expect, SharedLog, Stored};
use chrono::Utc;
use futures::StreamExt;
use testkit::NatsServer;
use uuid::Uuid;

pub const TENANT: &str = "default";

/// A store the suite can run against. `?Send`: `EmbeddedLog::open`'s future is not `Send` in a
/// generic context (sqlx's higher-ranked executor bound), and a test body need not be.
#[async_trait(?Send)]
pub trait Backend: Send + Sized + 'static {
    /// A fresh, empty store.
    async fn open() -> Self;
    /// The log over the store as it is now (after `reopen`, a new handle).
    fn log(&self) -> SharedLog;
    /// Closes the store entirely and opens it again from what was persisted.
    async fn reopen(&mut self);
}

#[derive(Debug)]
pub struct JetStream {
    pub server: NatsServer,
    pub stream: String,
    pub log: Arc<JetStreamLog>,
}

impl JetStream {
    pub async fn connect(url: &str, stream: &str) -> Arc<JetStreamLog> {
        let config = JetStreamConfig { stream: stream.to_string(), ..Default::default() };
        Arc::new(JetStreamLog::connect(url, config).await.expect("connect jetstream log"))
    }
}

/// A stream name no other test uses (tests may share a server in the future; names keep them apart).
pub fn unique_stream() -> String {
    format!("T{}", &Uuid::new_v4().simple().to_string()[..12]).to_uppercase()
}

#[async_trait(?Send)]
impl Backend for JetStream {
    async fn open() -> Self {
        let server = NatsServer::start().await;
        let stream = unique_stream();
        let log = Self::connect(&server.url(), &stream).await;
        JetStream { server, stream, log }
    }

    fn log(&self) -> SharedLog {
        self.log.clone()
    }

    async fn reopen(&mut self) {
        self.server.stop().await;
        self.server.restart().await;
        self.log = Self::connect(&self.server.url(), &self.stream).await;
    }
}

#[derive(Debug)]
pub struct Embedded {
    pub dir: tempfile::TempDir,
    pub log: Arc<EmbeddedLog>,
}

#[async_trait(?Send)]
impl Backend for Embedded {
    async fn open() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = Arc::new(EmbeddedLog::open(dir.path()).await.expect("open embedded log"));
        Embedded { dir, log }
    }

    fn log(&self) -> SharedLog {
        self.log.clone()
    }

    async fn reopen(&mut self) {
        self.log.close().await;
        self.log = Arc::new(EmbeddedLog::open(self.dir.path()).await.expect("reopen embedded log"));
    }
}

/// An event on the subject of signal `signal` (an ack: the smallest signal event).
pub fn event_on(signal: Uuid) -> Event {
    let body = EventBody::SignalAcked(SignalAcked { signal_id: signal, by: "alice".into(), session_id: None });
    Event::new(TENANT, Some("alice".into()), Utc::now(), body)
}

pub fn subject_of(log: &SharedLog, signal: Uuid) -> String {
    log.subjects().of(TENANT, Entity::Signal(signal))
}

/// Appends, retrying while the log is unavailable (a server coming back); the same event each
/// time, so a retry of an append that did land is answered as a duplicate.
pub async fn append_retrying(log: &SharedLog, event: &Event, expect: Expect) -> Appended {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match log.append(event, expect).await {
            Ok(a) => return a,
            Err(bus::Error::Unavailable(e)) if tokio::time::Instant::now() < deadline => {
                eprintln!("append unavailable, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("append failed: {e}"),
        }
    }
}

/// How long a tail may take to yield its next event before the test fails.
const TAIL_WAIT: Duration = Duration::from_secs(20);

pub async fn next_of(tail: &mut futures::stream::BoxStream<'static, bus::Result<Stored>>) -> Stored {
    match tokio::time::timeout(TAIL_WAIT, tail.next()).await {
        Ok(Some(Ok(s))) => s,
        Ok(Some(Err(e))) => panic!("tail yielded an error: {e}"),
        Ok(None) => panic!("tail ended"),
        Err(_) => panic!("tail yielded nothing for {TAIL_WAIT:?}"),
    }
}

pub fn seqs(stored: &[Stored]) -> Vec<u64> {
    stored.iter().map(|s| s.seq).collect()
}

/// Appends `n` events round-robin over `signals`, unconditionally; returns the event ids in order.
pub async fn append_n(log: &SharedLog, signals: &[Uuid], n: usize) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for i in 0..n {
        let e = event_on(signals[i % signals.len()]);
        log.append(&e, Expect::Any).await.expect("append");
        ids.push(e.event_id);
    }
    ids
}
