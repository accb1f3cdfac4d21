//! Folds an embedded SQLite file's write-ahead log back into the file on a connection of its
//! own, so that the writer's commits seldom do: the embedded event log's (`log::embedded`) and
//! the embedded read models' (the projector's).
//!
//! SQLite checkpoints by default inside the commit that grows the WAL past 1,000 pages: that
//! commit syncs the WAL, copies ~4 MB into the main file and syncs that before it returns —
//! flat out every ~0.25 s, and those commits were the embedded append's p99 (~10 ms against
//! ~1 ms) and a sixth of the embedded projector's batch time (docs/performance.md). Here a
//! `PASSIVE` checkpoint runs every `EVERY` while commits happen, on this task's connection (its
//! own SQLite thread), beside the writer: it waits for no one and copies only committed frames,
//! each time the little committed since the last one.
//!
//! A passive checkpoint cannot rewind the WAL while the writer keeps adding to it (a WAL starts
//! over only at a commit that finds every frame copied), so the writer still checkpoints, rarely:
//! past `WRITER_PAGES`, when all but the last few milliseconds of frames are already copied and
//! synced. Deliberately decides nothing about durability — this connection syncs as the writer's
//! does (its options), so a checkpoint never lets the WAL be rewound over frames the main
//! file does not hold on disk — and never blocks the writer: a checkpoint that finds another
//! running does nothing, and the next tick tries again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;

/// How often the WAL is folded back while commits happen. Short, so that what the writer's own
/// rare checkpoint still has to copy and sync is small: flat out, every 250 ms (about SQLite's
/// own 1,000 pages) left it a 16–25 ms stall (the append's p999), every 20 ms 8–9 ms.
const EVERY: Duration = Duration::from_millis(20);

/// The pages past which the writer's own commit checkpoints (SQLite's `wal_autocheckpoint`, to
/// be set on every connection that writes the file): the bound on the WAL's size (~40 MB of
/// 4 KiB pages), and how often the writer pays for a sync and the rewind (flat out every ~2.5 s
/// instead of every ~0.25 s).
pub const WRITER_PAGES: u32 = 10_000;

/// The running checkpointer. It runs until `stop`, or until the sender of the commits it
/// follows is gone; dropping it leaves it running.
#[derive(Debug)]
pub struct Checkpointer {
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Checkpointer {
    /// Starts checkpointing the file `options` opens whenever `committed` has moved (any
    /// counter its writer raises after each commit).
    pub async fn start(options: SqliteConnectOptions, committed: watch::Receiver<u64>) -> sqlx::Result<Self> {
        let conn = options.connect().await?;
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(conn, committed, stop.clone()));
        Ok(Checkpointer { stop, task })
    }

    /// Stops checkpointing and closes the connection, within a tick (a checkpoint in progress
    /// finishes first): before a checkpoint of the writer's own, which this one would make busy.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.task.await;
    }
}

async fn run(mut conn: SqliteConnection, mut committed: watch::Receiver<u64>, stop: Arc<AtomicBool>) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if stop.load(Ordering::Acquire) {
            break;
        }
        match committed.has_changed() {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => break, // the writer is gone
        }
        committed.borrow_and_update();
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut conn).await {
            debug!(error = %e, "passive wal checkpoint not done; tried again at the next tick");
        }
    }
    let _ = conn.close().await;
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use chrono::Utc;
    use futures::future::join_all;
    use uuid::Uuid;

    use super::*;
    use crate::event::{Event, EventBody, SessionHeartbeat};
    use crate::log::embedded::EmbeddedLog;
    use crate::log::{EventLog, Expect};

    #[tokio::test]
    async fn the_wal_is_folded_into_the_file_long_before_the_writer_would() {
        // Given an embedded log, whose writer checkpoints only past `WRITER_PAGES`
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open(&dir.path().join("data")).await.unwrap();
        let file = log.path().to_path_buf();
        let before = std::fs::metadata(&file).unwrap().len();

        // When a few hundred kilobytes are committed — far fewer pages than that
        let appends = (0..2_000).map(|_| {
            let body =
                EventBody::SessionHeartbeat(SessionHeartbeat { session_id: Uuid::new_v4(), identity: "a".repeat(100) });
            let event = Event::new("default", Some("alice".into()), Utc::now(), body);
            let log = log.clone();
            async move { log.append(&event, Expect::Any).await.unwrap() }
        });
        join_all(appends).await;

        // Then the main file holds them soon, while the writer goes on
        let deadline = Instant::now() + Duration::from_secs(10);
        let grown = loop {
            let now = std::fs::metadata(&file).unwrap().len();
            if now >= before + 256 * 1024 || Instant::now() > deadline {
                break now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(grown >= before + 256 * 1024, "main file {before} → {grown} bytes: the WAL was not folded back");
        assert_eq!(log.read(0, 5_000).await.unwrap().len(), 2_000);
        log.close().await;
    }
}
