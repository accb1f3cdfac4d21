//! `ReadModels`: the handle on the read-model database, PostgreSQL or embedded SQLite, and its
//! `Queries` implementation. Cheap to clone; clones share the pool and the applied-sequence
//! watch, so an in-process `wait_for` wakes the moment the projector commits.
//!
//! Deliberately no SQL: statements live in `apply.rs`, `read.rs` and `maint.rs`, backend
//! mechanics in `backend.rs`, `pg/` and `sqlite/`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bus::log::Stored;
use bus::sqlite_wal::Checkpointer;
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use uuid::Uuid;

use crate::backend::Backend;
use crate::batch::Batch;
use crate::bisect::{self, Sink};
use crate::error::{Error, Result};
use crate::pg::PgModels;
use crate::queries::ProjectionStatus;
use crate::queries::{
    AgentRow, Conversation, DirectiveRow, DueRelease, FactsAnswer, FactsPage, GroupRow, ListDirectives, ListSignals,
    Overdue, OverdueDirective, PendingSignal, PendingSignals, PluginStateRow, Queries, SignalRow,
};
use crate::snapshot::Snapshot;
use crate::sqlite::SqliteModels;

/// How often `wait_for` looks at the database when no in-process projector wakes it.
const WAIT_POLL: Duration = Duration::from_millis(10);

/// The default stale threshold (CONTRACT §2).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);

/// The read models, in PostgreSQL or in the embedded SQLite file.
#[derive(Debug, Clone)]
pub struct ReadModels {
    pub(crate) backend: Backend,
    /// The heartbeat age (ms) past which a session no longer counts as live. Shared by clones,
    /// so the threshold the projector is configured with also governs a rebuild started
    /// through another clone (the gateway's admin endpoint).
    stale_after_ms: Arc<AtomicU64>,
    applied: Arc<watch::Sender<u64>>,
}

impl ReadModels {
    fn new(backend: Backend) -> Self {
        Self {
            backend,
            stale_after_ms: Arc::new(AtomicU64::new(DEFAULT_STALE_AFTER.as_millis() as u64)),
            applied: Arc::new(watch::channel(0).0),
        }
    }

    /// Connects to PostgreSQL and applies the embedded migrations. Fails with
    /// `Error::SchemaTooNew` when a newer signalbus has migrated the database.
    pub async fn postgres(url: &str) -> Result<ReadModels> {
        Ok(Self::new(Backend::Pg(PgModels::open(url).await?)))
    }

    /// Opens (creating if needed) `<data_dir>/readmodels.sqlite` and applies the migrations; its
    /// WAL is folded back into the file beside the projector's batches (`bus::sqlite_wal`) for as
    /// long as a handle on these read models lives.
    pub async fn sqlite(data_dir: &Path) -> Result<ReadModels> {
        let file = SqliteModels::open(data_dir).await?;
        let options = SqliteModels::options(&file.path)?;
        let models = Self::new(Backend::Sqlite(file));
        Checkpointer::start(options, models.applied.subscribe()).await?;
        Ok(models)
    }

    /// This handle on a pool of its own, sharing everything else (the stale threshold, the
    /// applied-sequence notifications): for a projector on a runtime of its own
    /// (`Projector::run_on_own_thread`), so that no PostgreSQL socket is polled from two runtimes.
    /// SQLite keeps its pool: its connections run on threads of their own, not on a runtime.
    pub fn on_own_pool(&self) -> ReadModels {
        let backend = match &self.backend {
            Backend::Pg(m) => Backend::Pg(m.sibling()),
            Backend::Sqlite(_) => self.backend.clone(),
        };
        ReadModels { backend, stale_after_ms: self.stale_after_ms.clone(), applied: self.applied.clone() }
    }

    /// Sets the stale threshold used for `recipient_state` (default 60 s), for this handle and
    /// every clone of it.
    pub fn with_stale_after(self, stale_after: Duration) -> Self {
        self.stale_after_ms.store(stale_after.as_millis() as u64, Ordering::Relaxed);
        self
    }

    pub fn stale_after(&self) -> Duration {
        Duration::from_millis(self.stale_after_ms.load(Ordering::Relaxed))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Pg(_))
    }

    /// The stream sequence the read models have applied (the checkpoint).
    pub async fn checkpoint(&self) -> Result<u64> {
        self.backend.checkpoint().await
    }

    /// Applies one batch on top of checkpoint `expected`; `false` when the checkpoint differed.
    pub(crate) async fn apply(&self, batch: &Batch, expected: u64) -> Result<bool> {
        let ok = self.backend.apply(batch, expected, Utc::now(), self.stale_after()).await?;
        if ok {
            self.notify_applied(batch.to_seq);
        }
        Ok(ok)
    }

    /// Applies `events` (consecutive, oldest first) as one batch on top of checkpoint
    /// `expected`, exactly as the projector would, dead letters included. `Ok(false)` and
    /// nothing written when the checkpoint is not `expected` — e.g. the batch was applied already.
    pub async fn apply_stored(&self, events: &[Stored], expected: u64) -> Result<bool> {
        if events.is_empty() {
            return Ok(true);
        }
        Ok(bisect::apply(&mut &*self, events, expected).await?.is_some())
    }

    /// Recomputes `recipient_state` against the clock; returns the rows that changed.
    pub async fn refresh_recipient_state(&self, now: DateTime<Utc>) -> Result<u64> {
        self.backend.refresh(now, self.stale_after()).await
    }

    /// Moves settled rows (expired, recalled, acked, or delivered and past expiry) older than
    /// `older_than` from `signal_queue` to `signal_history`, `batch` rows per transaction.
    /// Returns how many moved. Later events for a moved row still update it in the history.
    pub async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.backend.archive(older_than, batch).await
    }

    /// Deletes `signal_history` rows archived before `older_than`, `batch` per transaction.
    pub async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.backend.purge_history(older_than, batch).await
    }

    /// A canonical dump of every table, for comparing a live model with a rebuild.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        self.backend.snapshot().await
    }

    /// The checkpoint and the dead letters, as `/readyz` and the doctor read them.
    pub async fn projection_status(&self) -> Result<ProjectionStatus> {
        self.backend.projection_status().await
    }

    /// Rows with more than one terminal stamp: how many, and up to ten ids.
    pub(crate) async fn multi_terminal(&self) -> Result<(u64, Vec<Uuid>)> {
        self.backend.multi_terminal().await
    }

    /// Delivered, unacked hot rows missing from the in-flight list, and entries of the list
    /// without such a row: how many, and up to ten ids (none where a partial index lists them).
    pub(crate) async fn inflight_mismatches(&self) -> Result<(u64, Vec<Uuid>)> {
        self.backend.inflight_mismatches().await
    }

    /// Which of `ids` have a signal row.
    pub(crate) async fn existing(&self, ids: &[Uuid]) -> Result<Vec<Uuid>> {
        self.backend.existing(ids).await
    }

    pub(crate) fn notify_applied(&self, seq: u64) {
        self.applied.send_if_modified(|v| {
            let newer = seq > *v;
            if newer {
                *v = seq;
            }
            newer
        });
    }
}

/// The live read models as the projector writes them.
#[async_trait]
impl Sink for &ReadModels {
    async fn apply(&mut self, batch: &Batch, expected: u64) -> Result<bool> {
        ReadModels::apply(self, batch, expected).await
    }
}

#[async_trait]
impl Queries for ReadModels {
    async fn applied_seq(&self) -> Result<u64> {
        self.checkpoint().await
    }

    fn applied_changes(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    async fn wait_for(&self, seq: u64, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut rx = self.applied.subscribe();
        loop {
            if *rx.borrow_and_update() >= seq {
                return Ok(());
            }
            // Another process may be the projector: the database is the authority.
            let applied = self.checkpoint().await?;
            if applied >= seq {
                self.notify_applied(applied);
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Lagging(seq));
            }
            let _ = tokio::time::timeout((deadline - now).min(WAIT_POLL), rx.changed()).await;
        }
    }

    async fn drainable(&self, tenant: &str, identity: &str, now: DateTime<Utc>, limit: u32) -> Result<Vec<SignalRow>> {
        self.backend.drainable(tenant, identity, now, limit).await
    }

    async fn signal(&self, tenant: &str, id: Uuid) -> Result<Option<SignalRow>> {
        self.backend.signal(tenant, id).await
    }

    async fn list_signals(&self, q: &ListSignals) -> Result<Vec<SignalRow>> {
        self.backend.list_signals(q).await
    }

    async fn overdue(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        self.backend.overdue(now, after, limit).await
    }

    async fn due_releases(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<DueRelease>> {
        self.backend.due_releases(now, after, limit).await
    }

    async fn pending_signals(&self, q: &PendingSignals) -> Result<Vec<PendingSignal>> {
        self.backend.pending_signals(q).await
    }

    async fn agents(&self, tenant: &str) -> Result<Vec<AgentRow>> {
        self.backend.agents(tenant).await
    }

    async fn plugin_state(&self, tenant: &str, plugin: &str) -> Result<PluginStateRow> {
        self.backend.plugin_state(tenant, plugin).await
    }

    async fn plugin_facts(&self, page: &FactsPage) -> Result<FactsAnswer> {
        self.backend.plugin_facts(page).await
    }

    async fn directive(&self, tenant: &str, directive_id: Uuid) -> Result<Option<DirectiveRow>> {
        self.backend.directive(tenant, directive_id).await
    }

    async fn list_directives(&self, q: &ListDirectives) -> Result<Vec<DirectiveRow>> {
        self.backend.list_directives(q).await
    }

    async fn overdue_directives(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<OverdueDirective>> {
        self.backend.overdue_directives(now, after, limit).await
    }

    async fn groups(&self, tenant: &str) -> Result<Vec<GroupRow>> {
        self.backend.groups(tenant, None).await
    }

    async fn group(&self, tenant: &str, name: &str) -> Result<Option<GroupRow>> {
        Ok(self.backend.groups(tenant, Some(name)).await?.into_iter().next())
    }

    async fn groups_of(&self, tenant: &str, identity: &str) -> Result<Vec<String>> {
        self.backend.groups_of(tenant, identity).await
    }

    async fn signals_by_fanout(&self, tenant: &str, sender: &str, fanout_id: Uuid) -> Result<Vec<SignalRow>> {
        self.backend.signals_by(tenant, sender, crate::read_groups::SentAs::Fanout(fanout_id)).await
    }

    async fn signals_by_correlation(&self, tenant: &str, sender: &str, correlation_id: &str) -> Result<Vec<SignalRow>> {
        self.backend.signals_by(tenant, sender, crate::read_groups::SentAs::Correlation(correlation_id)).await
    }

    async fn conversation(&self, q: &Conversation) -> Result<Vec<SignalRow>> {
        self.backend.conversation(q).await
    }

    async fn ping(&self) -> Result<()> {
        self.backend.ping().await
    }

    async fn projection_status(&self) -> Result<ProjectionStatus> {
        ReadModels::projection_status(self).await
    }
}
