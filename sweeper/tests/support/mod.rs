//! Shared setup of the sweeper's integration tests: real backends (embedded log + SQLite read
//! models, or JetStream + PostgreSQL via testkit) with a projector running, and helpers that
//! create signals the way the gateway does (`decide_send` + `record_send`).
//!
//! Deliberately no mocks and no shortcuts into the read models: every signal goes through the
//! stream and reaches the models through the projector.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use bus::catalog::TypeTable;
use bus::event::{Entity, EventBody, RecipientState};
use bus::log::embedded::EmbeddedLog;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::SharedLog;
use bus::send::{decide_send, RecipientView, SendDecision, SendLimits, SendRequest};
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use projector::queries::Queries;
use projector::{Projector, ProjectorConfig, ReadModels};
use sweeper::{Lease, Sweeper, SweeperConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const TENANT: &str = "default";

/// A stream, read models and a projector applying one to the other.
pub struct Bed {
    pub log: SharedLog,
    pub models: ReadModels,
    pub store: SignalStore,
    pub cancel: CancellationToken,
    projector: Option<JoinHandle<()>>,
    // Kept alive for the bed's lifetime (dropping them removes the backends).
    _dir: Option<tempfile::TempDir>,
    pub nats: Option<testkit::nats::NatsServer>,
    pub db: Option<testkit::TestDb>,
}

impl Bed {
    /// Embedded mode: `EmbeddedLog` + `ReadModels::sqlite` in one temp dir.
    pub async fn embedded() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let log: SharedLog = Arc::new(EmbeddedLog::open(dir.path()).await.unwrap());
        let models = ReadModels::sqlite(dir.path()).await.unwrap();
        Bed::start(log, models, Some(dir), None, None)
    }

    /// Distributed mode: a private nats-server and a throwaway PostgreSQL database.
    pub async fn distributed() -> Bed {
        let nats = testkit::nats::NatsServer::start().await;
        let db = testkit::TestDb::create().await;
        let log: SharedLog = Arc::new(JetStreamLog::connect(&nats.url(), JetStreamConfig::default()).await.unwrap());
        let models = ReadModels::postgres(db.url()).await.unwrap();
        Bed::start(log, models, None, Some(nats), Some(db))
    }

    fn start(
        log: SharedLog,
        models: ReadModels,
        dir: Option<tempfile::TempDir>,
        nats: Option<testkit::nats::NatsServer>,
        db: Option<testkit::TestDb>,
    ) -> Bed {
        let cancel = CancellationToken::new();
        let projector = Projector::new(log.clone(), models.clone(), ProjectorConfig::default());
        let c = cancel.clone();
        let projector = tokio::spawn(async move {
            projector.run(c).await.unwrap();
        });
        let store = SignalStore::new(log.clone());
        Bed { log, models, store, cancel, projector: Some(projector), _dir: dir, nats, db }
    }

    /// The lease a sweeper on this bed uses: local when embedded, the advisory lock otherwise.
    pub fn lease(&self) -> Lease {
        match &self.db {
            Some(db) => Lease::Postgres { database_url: db.url().to_string() },
            None => Lease::Local,
        }
    }

    pub fn queries(&self) -> Arc<dyn Queries> {
        Arc::new(self.models.clone())
    }

    /// A sweeper on this bed, running until `cancel` (or the bed's shutdown).
    pub fn sweeper(&self, config: SweeperConfig, cancel: &CancellationToken) -> JoinHandle<sweeper::Result<()>> {
        let sweeper = Sweeper::new(self.log.clone(), self.queries(), self.models.clone(), config);
        tokio::spawn(sweeper.run(cancel.clone()))
    }

    /// Sends `StatusUpdate` (async) from alice to an offline bob as if at `at`, with `ttl` seconds.
    pub async fn send(&self, at: DateTime<Utc>, ttl: u64) -> Uuid {
        send_with(&self.store, at, ttl).await
    }

    /// Sends `n` signals at once (64 in flight), all as if at `at` with `ttl`.
    pub async fn send_many(&self, n: usize, at: DateTime<Utc>, ttl: u64) -> Vec<Uuid> {
        use futures::StreamExt;
        futures::stream::iter(0..n)
            .map(|_| {
                let store = self.store.clone();
                async move { send_with(&store, at, ttl).await }
            })
            .buffer_unordered(64)
            .collect()
            .await
    }

    /// Sends `n` signals at once as if at `at`, each scheduled `deliver_after` seconds later,
    /// expiring `ttl` seconds after that.
    pub async fn send_scheduled(&self, n: usize, at: DateTime<Utc>, deliver_after: u64, ttl: u64) -> Vec<Uuid> {
        use futures::StreamExt;
        futures::stream::iter(0..n)
            .map(|_| {
                let store = self.store.clone();
                async move { send_scheduled_with(&store, at, Some(deliver_after), ttl).await }
            })
            .buffer_unordered(64)
            .collect()
            .await
    }

    /// The `signal.released` events of a signal: when each was appended, and by whom.
    pub async fn releases(&self, id: Uuid) -> Vec<(DateTime<Utc>, String)> {
        let subject = self.log.subjects().of(TENANT, Entity::Signal(id));
        let stored = self.log.read_subject(&subject).await.unwrap();
        stored
            .into_iter()
            .filter(|s| matches!(s.event.body, EventBody::SignalReleased(_)))
            .map(|s| (s.event.occurred_at, s.event.actor.unwrap_or_default()))
            .collect()
    }

    /// Waits until the read models show everything on the stream so far.
    pub async fn settle(&self) {
        let last = self.log.last_seq().await.unwrap();
        self.models.wait_for(last, Duration::from_secs(60)).await.unwrap();
    }

    /// The terminal events of a signal, as `(type, actor)`.
    pub async fn terminal_events(&self, id: Uuid) -> Vec<(&'static str, String)> {
        let subject = self.log.subjects().of(TENANT, Entity::Signal(id));
        let stored = self.log.read_subject(&subject).await.unwrap();
        stored
            .into_iter()
            .filter(|s| {
                matches!(
                    s.event.body,
                    EventBody::SignalDelivered(_) | EventBody::SignalExpired(_) | EventBody::SignalRecalled(_)
                )
            })
            .map(|s| (s.event.type_name(), s.event.actor.unwrap_or_default()))
            .collect()
    }

    /// Whether the signal has a `signal.expired` event, and when it was appended.
    pub async fn expired_at(&self, id: Uuid) -> Option<DateTime<Utc>> {
        let subject = self.log.subjects().of(TENANT, Entity::Signal(id));
        let stored = self.log.read_subject(&subject).await.unwrap();
        stored.into_iter().find(|s| matches!(s.event.body, EventBody::SignalExpired(_))).map(|s| s.event.occurred_at)
    }

    /// The sweeper's status facts on the stream, oldest first, as JSON states.
    pub async fn sweep_facts(&self) -> Vec<serde_json::Value> {
        let subject = self.log.subjects().of(TENANT, Entity::Plugin(sweeper::status::PLUGIN));
        let stored = self.log.read_subject(&subject).await.unwrap();
        stored
            .into_iter()
            .filter_map(|s| match s.event.body {
                EventBody::PluginFactRecorded(f) => Some(serde_json::from_str(&f.state).unwrap()),
                _ => None,
            })
            .collect()
    }

    /// Rows in `signal_queue` and in `signal_history`, read straight from the database.
    pub async fn hot_and_history(&self) -> (i64, i64) {
        let sql = "SELECT (SELECT count(*) FROM signal_queue), (SELECT count(*) FROM signal_history)";
        match (&self._dir, &self.db) {
            (Some(dir), _) => {
                let url = format!("sqlite://{}?mode=ro", dir.path().join("readmodels.sqlite").display());
                let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
                sqlx::query_as(sql).fetch_one(&mut conn).await.unwrap()
            }
            (None, Some(db)) => {
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(db.url()).await.unwrap();
                sqlx::query_as(sql).fetch_one(&mut conn).await.unwrap()
            }
            _ => unreachable!("a bed has a database"),
        }
    }

    /// Waits until the sweeper has recorded at least `n` status facts.
    pub async fn wait_for_facts(&self, n: usize, timeout: Duration) -> Vec<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let facts = self.sweep_facts().await;
            if facts.len() >= n {
                return facts;
            }
            assert!(tokio::time::Instant::now() < deadline, "only {} sweep facts after {timeout:?}", facts.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(p) = self.projector.take() {
            let _ = p.await;
        }
    }
}

pub async fn send_with(store: &SignalStore, at: DateTime<Utc>, ttl: u64) -> Uuid {
    send_scheduled_with(store, at, None, ttl).await
}

/// As `send_with`, scheduled `deliver_after` seconds after `at` when given (CONTRACT §16).
pub async fn send_scheduled_with(store: &SignalStore, at: DateTime<Utc>, deliver_after: Option<u64>, ttl: u64) -> Uuid {
    let req = SendRequest {
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        payload: serde_json::json!({"n": 1}),
        delivery_class: None,
        ttl_seconds: Some(ttl),
        correlation_id: None,
        dedupe_key: None,
        deliver_after_seconds: deliver_after,
        deliver_at: None,
    };
    let bob = RecipientView {
        registered: true,
        state: RecipientState::NotAvailableOffline,
        has_live_ws: false,
        freshest_session: None,
    };
    let decision = decide_send(&TypeTable::default(), TENANT, "alice", req, bob, at, SendLimits::default()).unwrap();
    let SendDecision::Accepted(sent) = &decision else { panic!("an async send to an offline recipient is queued") };
    let id = sent.signal_id;
    let recorded = store.record_send(TENANT, "alice", decision, at).await.unwrap();
    assert!(recorded.created);
    id
}

/// A sweeper config for tests: `sweep_interval` as given, quick lease retries.
pub fn config(sweep_interval: Duration, node: &str, lease: Lease) -> SweeperConfig {
    SweeperConfig {
        sweep_interval,
        lease,
        lease_retry: Duration::from_millis(200),
        node: node.to_string(),
        ..Default::default()
    }
}

/// Polls `f` every 20 ms until it is true; panics after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `f` every 20 ms until it yields a value; panics after `timeout`.
pub async fn eventually_some<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
