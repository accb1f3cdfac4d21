//! Test support for the projector suites: the two real backends behind one handle (a fresh
//! PostgreSQL database or a fresh SQLite file), a real embedded event log, and event builders.
//!
//! Deliberately no mocks: every test writes real events to a real log and reads real tables.

#![allow(dead_code)]

pub mod flow;
pub mod workload;

use std::sync::Arc;

use bus::catalog::{Category, DeliveryClass};
use bus::event::*;
use bus::log::embedded::EmbeddedLog;
use bus::log::{Expect, SharedLog, Stored};
use chrono::{DateTime, Duration, Utc};
use projector::ReadModels;
use uuid::Uuid;

pub const TENANT: &str = "default";

/// One backend under test, with everything it needs kept alive.
pub struct Env {
    pub models: ReadModels,
    pub log: SharedLog,
    pub embedded: EmbeddedLog,
    pub dir: tempfile::TempDir,
    _models_dir: Option<tempfile::TempDir>,
    _pg: Option<testkit::TestDb>,
    pub backend: &'static str,
}

impl Env {
    pub async fn postgres() -> Env {
        let db = testkit::TestDb::create().await;
        let models = ReadModels::postgres(db.url()).await.expect("open pg read models");
        Self::with(models, Some(db), "postgres").await
    }

    pub async fn sqlite() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let models = ReadModels::sqlite(dir.path()).await.expect("open sqlite read models");
        let mut env = Self::with(models, None, "sqlite").await;
        env._models_dir = Some(dir);
        env
    }

    async fn with(models: ReadModels, pg: Option<testkit::TestDb>, backend: &'static str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let embedded = EmbeddedLog::open(&dir.path().join("log")).await.expect("open embedded log");
        let log: SharedLog = Arc::new(embedded.clone());
        Env { models, log, embedded, dir, _models_dir: None, _pg: pg, backend }
    }

    /// The PostgreSQL database name, when the backend is PostgreSQL.
    pub fn pg_name(&self) -> Option<&str> {
        self._pg.as_ref().map(|db| db.name())
    }

    /// Every index definition in the live (public) schema, sorted; empty for SQLite. A rebuild
    /// builds its indexes after the bulk load, so this checks none went missing.
    pub async fn pg_indexes(&self) -> Vec<String> {
        use sqlx::Connection;
        let Some(db) = &self._pg else { return Vec::new() };
        let mut conn = sqlx::PgConnection::connect(db.url()).await.expect("connect");
        sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexdef")
            .fetch_all(&mut conn)
            .await
            .expect("list indexes")
    }

    /// The one integer `sql` answers on the PostgreSQL read-model database (statistics, plans).
    pub async fn pg_i64(&self, sql: &str) -> i64 {
        use sqlx::Connection;
        let db = self._pg.as_ref().expect("a PostgreSQL env");
        let mut conn = sqlx::PgConnection::connect(db.url()).await.expect("connect");
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.expect("query")
    }

    /// Runs one statement (valid in both dialects) on the read-model database, behind the
    /// projector's back: how tests plant what the projector would never write.
    pub async fn execute(&self, sql: &str) {
        use sqlx::Connection;
        match (&self._pg, &self._models_dir) {
            (Some(db), _) => {
                let mut conn = sqlx::PgConnection::connect(db.url()).await.expect("connect");
                sqlx::query(sql).execute(&mut conn).await.expect("execute");
            }
            (None, Some(dir)) => {
                let file = dir.path().join("readmodels.sqlite");
                let mut conn =
                    sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display())).await.expect("open");
                sqlx::query(sql).execute(&mut conn).await.expect("execute");
            }
            (None, None) => unreachable!("every env has a database"),
        }
    }

    /// Stores `body` under `subject` as the next event, bypassing the log and its codec (another
    /// program writing the stream); returns its sequence.
    pub async fn append_raw(&self, subject: &str, body: &[u8]) -> u64 {
        let file = self.dir.path().join("log").join(bus::log::embedded::FILE_NAME);
        testkit::embedded::append_raw(&file, subject, body).await
    }

    /// Appends events in order; returns their sequences.
    pub async fn append_all(&self, events: &[Event]) -> Vec<u64> {
        let mut seqs = Vec::with_capacity(events.len());
        for e in events {
            seqs.push(self.log.append(e, Expect::Any).await.expect("append").seq);
        }
        seqs
    }
}

/// Runs an async test body against both backends.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::support::Env::postgres().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::support::Env::sqlite().await).await
            }
        }
    )*};
}

/// Hand-built stored events with consecutive sequences from `from`.
pub fn stored(from: u64, events: Vec<Event>) -> Vec<Stored> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Stored { seq: from + i as u64, subject: Subjects::new("signalbus").for_event(&event), event })
        .collect()
}

pub fn ev(at: DateTime<Utc>, body: EventBody) -> Event {
    Event::new(TENANT, Some("test".into()), at, body)
}

pub fn registered(identity: &str, at: DateTime<Utc>) -> Event {
    ev(
        at,
        EventBody::AgentRegistered(AgentRegistered {
            identity: identity.into(),
            kind: SessionKind::Interactive,
            token_hash: "deadbeef".into(),
        }),
    )
}

pub fn removed(identity: &str, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::AgentRemoved(AgentRemoved { identity: identity.into() }))
}

pub fn opened(session: Uuid, identity: &str, at: DateTime<Utc>) -> Event {
    ev(
        at,
        EventBody::SessionOpened(SessionOpened {
            session_id: session,
            identity: identity.into(),
            kind: SessionKind::Daemon,
            surface: Surface::Ws,
            node: "node-1".into(),
        }),
    )
}

pub fn heartbeat(session: Uuid, identity: &str, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::SessionHeartbeat(SessionHeartbeat { session_id: session, identity: identity.into() }))
}

pub fn closed(session: Uuid, identity: &str, at: DateTime<Utc>) -> Event {
    ev(
        at,
        EventBody::SessionClosed(SessionClosed {
            session_id: session,
            identity: identity.into(),
            reason: "client_closed".into(),
        }),
    )
}

pub fn sent(id: Uuid, from: &str, to: &str, category: Category, at: DateTime<Utc>, ttl: Duration) -> Event {
    ev(
        at,
        EventBody::SignalSent(Box::new(SignalSent {
            signal_id: id,
            from: from.into(),
            to: to.into(),
            signal_type: "StatusUpdate".into(),
            category,
            priority: category.priority(),
            payload: r#"{"n": 1, "token": "[REDACTED]"}"#.into(),
            delivery_class: DeliveryClass::Async,
            created_at: at,
            expires_at: at + ttl,
            recipient_state: RecipientState::NotAvailableOffline,
            publish_path: PublishPath::QueuedOffline,
            correlation_id: Some(format!("corr-{}", id.simple())),
            dedupe_key: None,
            redacted: vec!["token".into()],
            resolved_to_session: None,
            pushed_to: None,
            fanout_id: None,
            deliver_at: None,
        })),
    )
}

/// A `signal.sent` that recorded its push to `session` in the same event.
pub fn sent_pushed(id: Uuid, from: &str, to: &str, session: Uuid, at: DateTime<Utc>) -> Event {
    let mut event = sent(id, from, to, Category::Info, at, Duration::hours(1));
    if let EventBody::SignalSent(s) = &mut event.body {
        s.recipient_state = RecipientState::Available;
        s.publish_path = PublishPath::PushedToWs;
        s.resolved_to_session = Some(session);
        s.pushed_to = Some(session);
    }
    event
}

/// One `signals.acked` batch.
pub fn acks(ids: &[Uuid], by: &str, session: Option<Uuid>, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::SignalsAcked(SignalsAcked { by: by.into(), session_id: session, signal_ids: ids.to_vec() }))
}

pub fn bounced(id: Uuid, from: &str, to: &str, at: DateTime<Utc>) -> Event {
    ev(
        at,
        EventBody::SignalBounced(SignalBounced {
            signal_id: id,
            from: from.into(),
            to: to.into(),
            signal_type: "Blocker".into(),
            delivery_class: DeliveryClass::Sync,
            recipient_state: RecipientState::NotAvailableOffline,
            dedupe_key: None,
        }),
    )
}

pub fn delivered(
    id: Uuid,
    to: &str,
    via: DeliveredVia,
    session: Option<Uuid>,
    redelivered: bool,
    at: DateTime<Utc>,
) -> Event {
    ev(
        at,
        EventBody::SignalDelivered(SignalDelivered {
            signal_id: id,
            to: to.into(),
            via,
            session_id: session,
            redelivered,
            expires_at: None,
        }),
    )
}

pub fn acked(id: Uuid, by: &str, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::SignalAcked(SignalAcked { signal_id: id, by: by.into(), session_id: None }))
}

/// An expiry as an older release wrote it, without a reason (read as `ttl`).
pub fn expired(id: Uuid, expires_at: DateTime<Utc>, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::SignalExpired(SignalExpired { signal_id: id, expires_at, undeliverable: false, reason: None }))
}

/// An expiry for `reason`, as this release writes it.
pub fn expired_for(id: Uuid, expires_at: DateTime<Utc>, at: DateTime<Utc>, reason: ExpiryReason) -> Event {
    let body = SignalExpired { signal_id: id, expires_at, undeliverable: reason.gives_up(), reason: Some(reason) };
    ev(at, EventBody::SignalExpired(body))
}

pub fn recalled(id: Uuid, by: &str, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::SignalRecalled(SignalRecalled { signal_id: id, by: by.into() }))
}

pub fn fact(plugin: &str, seq: u64, state: &str, at: DateTime<Utc>) -> Event {
    ev(
        at,
        EventBody::PluginFactRecorded(PluginFactRecorded {
            plugin: plugin.into(),
            seq,
            fact_type: if seq.is_multiple_of(2) { "even".into() } else { "odd".into() },
            state: state.into(),
            recorded_by: "alice".into(),
        }),
    )
}
