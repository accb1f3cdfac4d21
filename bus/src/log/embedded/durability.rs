//! When the embedded log's commits reach the disk: at every group commit (`EveryCommit`, SQLite
//! `synchronous = FULL`), or — the default, as JetStream's file store does with its sync
//! interval — within a bound of being answered (`Within`, `synchronous = NORMAL` and an fsync
//! of the write-ahead log at most that long after a commit, off the writer's path).
//!
//! Either way an answered append survives the process being killed (a commit is in the file,
//! hence the kernel, before anyone is answered) and the file stays consistent through a power
//! loss; `Within` may lose the last interval's answered appends to a power loss or a kernel
//! crash, `EveryCommit` none. Deliberately no policy of its own beyond the one it is given, and
//! no SQL: SQLite's own checkpoints sync as well, this only bounds how long a commit can wait
//! for one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteSynchronous;
use tokio::time::Instant;
use tracing::warn;

/// How soon a sync put off by one still running is tried again.
const RETRY: Duration = Duration::from_millis(5);

/// When an answered append is on the disk, not only in the kernel's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Each group commit is fsynced before its appends are answered.
    EveryCommit,
    /// Commits are fsynced at most this long after they are answered.
    Within(Duration),
}

impl Default for Durability {
    /// Within a second: a power loss can cost at most the last second's answers, and an append
    /// waits for no disk flush (JetStream's file store defaults to two minutes).
    fn default() -> Self {
        Durability::Within(Duration::from_secs(1))
    }
}

impl Durability {
    /// The SQLite setting of the writer's connection.
    pub(super) fn synchronous(self) -> SqliteSynchronous {
        match self {
            Durability::EveryCommit => SqliteSynchronous::Full,
            Durability::Within(_) => SqliteSynchronous::Normal,
        }
    }
}

/// The writer's side of `Durability::Within`: which commits are not yet synced, and the fsync.
#[derive(Debug)]
pub(super) struct WalSync {
    within: Option<Duration>,
    wal: PathBuf,
    file: Option<Arc<File>>,
    /// When the next fsync must start: `within` after the oldest commit no started fsync covers.
    due: Option<Instant>,
    syncing: Arc<AtomicBool>,
}

impl WalSync {
    pub fn new(db: &Path, durability: Durability) -> Self {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let within = match durability {
            Durability::EveryCommit => None,
            Durability::Within(d) => Some(d),
        };
        WalSync { within, wal: wal.into(), file: None, due: None, syncing: Arc::default() }
    }

    /// A group commit finished.
    pub fn committed(&mut self) {
        let Some(within) = self.within else { return };
        let due = *self.due.get_or_insert_with(|| Instant::now() + within);
        if due <= Instant::now() {
            self.sync();
        }
    }

    /// When the writer must sync even if no commit comes.
    pub fn deadline(&self) -> Option<Instant> {
        self.due
    }

    /// Starts an fsync of the write-ahead log, which covers every commit so far (the log is
    /// only appended to, and SQLite itself syncs it before a checkpoint reuses it). A sync
    /// still running covers less, so the next one is merely put off until it ends.
    pub fn sync(&mut self) {
        if self.syncing.swap(true, Ordering::AcqRel) {
            self.due = Some(Instant::now() + RETRY);
            return;
        }
        let file = match &self.file {
            Some(f) => f.clone(),
            None => match File::open(&self.wal) {
                Ok(f) => self.file.insert(Arc::new(f)).clone(),
                Err(e) => {
                    warn!(error = %e, wal = %self.wal.display(), "cannot open the write-ahead log to sync it");
                    self.syncing.store(false, Ordering::Release);
                    self.due = None; // nothing to sync through; SQLite's checkpoints still do
                    return;
                }
            },
        };
        self.due = None;
        let syncing = self.syncing.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = file.sync_data() {
                warn!(error = %e, "syncing the write-ahead log failed");
            }
            syncing.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_commit_is_synced_within_the_bound_and_then_nothing_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("events.sqlite");
        std::fs::write(dir.path().join("events.sqlite-wal"), b"frames").unwrap();
        let mut s = WalSync::new(&db, Durability::Within(Duration::from_millis(50)));
        assert_eq!(s.deadline(), None, "nothing committed, nothing due");
        let before = Instant::now();
        s.committed();
        let due = s.deadline().expect("a commit is due for a sync");
        assert!(due >= before + Duration::from_millis(50) && due <= Instant::now() + Duration::from_millis(50));
        s.committed();
        assert_eq!(s.deadline(), Some(due), "a later commit does not put the sync off");
        s.sync();
        assert_eq!(s.deadline(), None);
        // A sync asked for while one runs is tried again shortly, not dropped.
        s.committed();
        s.syncing.store(true, Ordering::Release);
        s.sync();
        assert!(s.deadline().is_some_and(|at| at <= Instant::now() + RETRY));
    }

    #[test]
    fn every_commit_never_schedules_a_sync_of_its_own() {
        let mut s = WalSync::new(Path::new("/nonexistent/events.sqlite"), Durability::EveryCommit);
        s.committed();
        assert_eq!(s.deadline(), None);
        assert_eq!(Durability::EveryCommit.synchronous() as u8, SqliteSynchronous::Full as u8);
    }
}
