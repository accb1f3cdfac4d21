//! The admin hook: what `POST /v1/admin/rebuild` and `GET /v1/admin/doctor` ask for, as a
//! trait the gateway holds optionally, and `ProjectorAdmin`, its implementation over the
//! projector's `rebuild` and `doctor`.
//!
//! Deliberately a hook rather than a field of `Gateway`: the gateway reads the read models only
//! through `Queries`, and only a process that owns a `ReadModels` handle can offer a rebuild.

use std::sync::Arc;

use bus::log::SharedLog;
use futures::future::BoxFuture;
use projector::ReadModels;
use serde::Serialize;
use tokio::sync::oneshot;
use utoipa::ToSchema;

/// The outcome of a rebuild.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RebuildSummary {
    /// Events applied into the new read models.
    pub events: u64,
    /// The stream sequence the new read models are at.
    pub last_seq: u64,
    pub elapsed_seconds: f64,
}

/// One doctor check. `fix` says what to do when it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct DoctorCheck {
    pub check: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// The doctor's report: `ok` when every check passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct DoctorSummary {
    pub ok: bool,
    pub stream_last_seq: u64,
    pub checkpoint: u64,
    pub lag_events: u64,
    pub checks: Vec<DoctorCheck>,
}

/// Administrative operations on the read models. Errors carry a detail for the log only.
pub trait AdminOps: Send + Sync + std::fmt::Debug + 'static {
    fn rebuild(&self) -> BoxFuture<'_, Result<RebuildSummary, String>>;
    fn doctor(&self) -> BoxFuture<'_, Result<DoctorSummary, String>>;
}

type RebuildReply = oneshot::Sender<Result<projector::RebuildReport, String>>;

/// `AdminOps` over the stream and the read models this process opened.
#[derive(Debug, Clone)]
pub struct ProjectorAdmin {
    log: SharedLog,
    models: ReadModels,
    rebuilds: std::sync::mpsc::Sender<RebuildReply>,
}

impl ProjectorAdmin {
    /// Must be called inside a tokio runtime (the rebuild worker borrows its I/O drivers).
    pub fn shared(log: SharedLog, models: ReadModels) -> Arc<dyn AdminOps> {
        let (rebuilds, jobs) = std::sync::mpsc::channel::<RebuildReply>();
        let (wlog, wmodels) = (log.clone(), models.clone());
        // `projector::rebuild`'s future trips the compiler's higher-ranked `Send` check (sqlx
        // executors), so it cannot run as a task of the multi-threaded runtime. It runs on its
        // own thread instead, one at a time, which also keeps two rebuilds from overlapping.
        std::thread::Builder::new()
            .name("signalbus-rebuild".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
                while let Ok(reply) = jobs.recv() {
                    let r = rt.block_on(projector::rebuild(&wlog, &wmodels)).map_err(|e| e.to_string());
                    let _ = reply.send(r);
                }
            })
            .expect("spawn the rebuild thread");
        Arc::new(Self { log, models, rebuilds })
    }
}

impl AdminOps for ProjectorAdmin {
    fn rebuild(&self) -> BoxFuture<'_, Result<RebuildSummary, String>> {
        let (tx, rx) = oneshot::channel();
        let queued = self.rebuilds.send(tx).map_err(|_| "the rebuild thread is gone".to_string());
        Box::pin(async move {
            queued?;
            let r = rx.await.map_err(|_| "the rebuild thread is gone".to_string())??;
            Ok(RebuildSummary { events: r.events, last_seq: r.last_seq, elapsed_seconds: r.elapsed.as_secs_f64() })
        })
    }

    fn doctor(&self) -> BoxFuture<'_, Result<DoctorSummary, String>> {
        Box::pin(async move {
            let r = projector::doctor(&self.log, &self.models).await.map_err(|e| e.to_string())?;
            Ok(DoctorSummary {
                ok: r.ok(),
                stream_last_seq: r.stream_last_seq,
                checkpoint: r.checkpoint,
                lag_events: r.lag_events,
                checks: r
                    .checks
                    .into_iter()
                    .map(|c| DoctorCheck { check: c.name.to_string(), ok: c.ok, detail: c.detail, fix: c.fix })
                    .collect(),
            })
        })
    }
}
