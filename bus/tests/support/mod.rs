//! Backends for the event-log conformance suite: each opens a real store (a private nats-server
//! of either supported release, a 3-node JetStream cluster with a replicated stream, or a SQLite
//! file in a temp dir), can close and reopen it, and hands out the log.
//!
//! Deliberately holds no test cases (`log_conformance.rs` does) and mocks nothing.

#![allow(dead_code)]

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bus::event::{Entity, Event, EventBody, SignalAcked};
use bus::log::embedded::EmbeddedLog;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::{Appended, Expect, SharedLog, Stored};
use chrono::Utc;
use futures::StreamExt;
use testkit::{NatsCluster, NatsServer, NatsVersion};
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
    /// Stores `body` under `subject` as the next event, bypassing the log and its codec (another
    /// program writing the stream); returns its sequence.
    async fn append_raw(&self, subject: &str, body: &[u8]) -> u64;
}

/// A nats-server release the JetStream backend runs on.
pub trait Release: Send + Sync + 'static {
    const VERSION: NatsVersion;
}

/// Debian's nats-server 2.9.10.
#[derive(Debug)]
pub struct Debian;
impl Release for Debian {
    const VERSION: NatsVersion = NatsVersion::Debian;
}

/// The current release `scripts/test` installs (2.15.x).
#[derive(Debug)]
pub struct Current;
impl Release for Current {
    const VERSION: NatsVersion = NatsVersion::Current;
}

/// One private nats-server of release `R`.
#[derive(Debug)]
pub struct JetStream<R: Release> {
    pub server: NatsServer,
    pub stream: String,
    pub log: Arc<JetStreamLog>,
    release: PhantomData<R>,
}

/// Connects the log to stream `stream` with `replicas` replicas on the server(s) at `url`.
pub async fn connect(url: &str, stream: &str, replicas: usize) -> Arc<JetStreamLog> {
    let config = JetStreamConfig { stream: stream.to_string(), replicas, ..Default::default() };
    Arc::new(JetStreamLog::connect(url, config).await.expect("connect jetstream log"))
}

/// A stream name no other test uses (tests may share a server in the future; names keep them apart).
pub fn unique_stream() -> String {
    format!("T{}", &Uuid::new_v4().simple().to_string()[..12]).to_uppercase()
}

#[async_trait(?Send)]
impl<R: Release> Backend for JetStream<R> {
    async fn open() -> Self {
        let server = NatsServer::start_version(R::VERSION).await;
        let stream = unique_stream();
        let log = connect(&server.url(), &stream, 1).await;
        JetStream { server, stream, log, release: PhantomData }
    }

    fn log(&self) -> SharedLog {
        self.log.clone()
    }

    async fn reopen(&mut self) {
        self.server.stop().await;
        self.server.restart().await;
        self.log = connect(&self.server.url(), &self.stream, 1).await;
    }

    async fn append_raw(&self, subject: &str, body: &[u8]) -> u64 {
        let client = async_nats::connect(self.server.url()).await.expect("connect nats");
        let js = async_nats::jetstream::new(client);
        let ack = js.publish(subject.to_string(), body.to_vec().into()).await.expect("publish").await.expect("ack");
        ack.sequence
    }
}

/// Three nodes of the current release and a stream with 3 replicas: the deployment that needs
/// a server whose per-subject compare-and-set holds on a replicated stream.
#[derive(Debug)]
pub struct Replicated {
    pub cluster: NatsCluster,
    pub stream: String,
    pub log: Arc<JetStreamLog>,
}

#[async_trait(?Send)]
impl Backend for Replicated {
    async fn open() -> Self {
        let cluster = NatsCluster::start(NatsVersion::Current, 3).await;
        let stream = unique_stream();
        let log = connect(&cluster.urls(), &stream, 3).await;
        Replicated { cluster, stream, log }
    }

    fn log(&self) -> SharedLog {
        self.log.clone()
    }

    /// Every node stops and starts again; the stream comes back from their stores.
    async fn reopen(&mut self) {
        for i in 0..self.cluster.len() {
            self.cluster.node(i).stop().await;
        }
        for i in 0..self.cluster.len() {
            self.cluster.node(i).restart().await;
        }
        self.cluster.wait_stream_current(&self.stream, Duration::from_secs(30)).await;
        self.log = connect(&self.cluster.urls(), &self.stream, 3).await;
    }

    async fn append_raw(&self, subject: &str, body: &[u8]) -> u64 {
        let addrs: Vec<async_nats::ServerAddr> =
            self.cluster.urls().split(',').map(|u| u.parse().expect("a server url")).collect();
        let client = async_nats::connect(addrs).await.expect("connect nats");
        let js = async_nats::jetstream::new(client);
        let ack = js.publish(subject.to_string(), body.to_vec().into()).await.expect("publish").await.expect("ack");
        ack.sequence
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

    async fn append_raw(&self, subject: &str, body: &[u8]) -> u64 {
        testkit::embedded::append_raw(&self.dir.path().join(bus::log::embedded::FILE_NAME), subject, body).await
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

/// A tail as `EventLog::tail` hands it out.
pub type TailOf = futures::stream::BoxStream<'static, bus::Result<Arc<Stored>>>;

/// The next event of a tail (a copy of the shared one: tests compare them with what `read` returns).
pub async fn next_of(tail: &mut TailOf) -> Stored {
    match tokio::time::timeout(TAIL_WAIT, tail.next()).await {
        Ok(Some(Ok(s))) => Arc::unwrap_or_clone(s),
        Ok(Some(Err(e))) => panic!("tail yielded an error: {e}"),
        Ok(None) => panic!("tail ended"),
        Err(_) => panic!("tail yielded nothing for {TAIL_WAIT:?}"),
    }
}

/// The next item of a tail, event or error.
pub async fn next_item(tail: &mut TailOf) -> bus::Result<Stored> {
    match tokio::time::timeout(TAIL_WAIT, tail.next()).await {
        Ok(Some(item)) => item.map(Arc::unwrap_or_clone),
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
