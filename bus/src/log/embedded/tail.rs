//! `tail` of the embedded log: a stream that pages through stored events and, once caught up,
//! sleeps until the writer publishes a newer committed sequence.
//!
//! A page comes from the writer's ring of newest committed events when it holds the tail's next
//! sequence (`recent.rs`: contiguous, filled after each commit and before its sequence is
//! published), and is read back from the table otherwise — so a tail can never see an event that
//! did not commit, skip one, or reorder them, and a live tail costs no query per commit.
//! An undecodable event is yielded as `Error::Undecodable` once and then passed, as the
//! JetStream tail does: a reader that resumed at it would only meet it again, forever.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, BoxStream, StreamExt};
use sqlx::SqlitePool;
use tokio::sync::watch;

use super::reads::read_from;
use super::recent::{Lookup, Recent};
use super::writer::closed;
use crate::error::{Error, Result};
use crate::log::Stored;

/// Events fetched per read while catching up.
const PAGE: usize = 512;

/// How long an idle tail trusts the writer's wake-ups alone. Only this process's writer wakes
/// it; a second handle or process writing the same file is seen on the next poll instead.
const POLL: Duration = Duration::from_secs(1);

struct Cursor {
    readers: SqlitePool,
    committed: watch::Receiver<u64>,
    recent: Arc<Recent>,
    next: u64,
    done: bool,
}

/// Every event with sequence ≥ `from_seq`, forever. Ends after yielding an error (a failed read
/// or the log closing; not an undecodable event); the caller resumes with a new tail from its
/// next sequence.
pub(super) fn follow(
    readers: SqlitePool,
    committed: watch::Receiver<u64>,
    recent: Arc<Recent>,
    from_seq: u64,
) -> BoxStream<'static, Result<Arc<Stored>>> {
    let cursor = Cursor { readers, committed, recent, next: from_seq.max(1), done: false };
    stream::unfold(cursor, |mut c| async move {
        if c.done {
            return None;
        }
        let page = next_page(&mut c).await;
        if page.as_ref().is_err_and(|e| !matches!(e, Error::Undecodable { .. })) {
            c.done = true;
        }
        Some((page, c))
    })
    .flat_map(|page| match page {
        Ok(events) => stream::iter(events.into_iter().map(Ok)).boxed(),
        Err(e) => stream::once(async move { Err(e) }).boxed(),
    })
    .boxed()
}

/// The next non-empty page at the cursor, waiting for commits when there is none yet.
async fn next_page(c: &mut Cursor) -> Result<Vec<Arc<Stored>>> {
    // After a quiet `POLL` the table is read even when the ring says caught up: only the table
    // shows another process's commits.
    let mut poll_table = false;
    loop {
        // Mark the current commit as seen *before* reading: a commit that lands after this line
        // either is in the read below or flags `changed()`, so no wake-up is ever lost.
        c.committed.borrow_and_update();
        let page = match c.recent.since(c.next, PAGE) {
            Lookup::Events(page) => page,
            Lookup::CaughtUp if !poll_table => Vec::new(),
            Lookup::CaughtUp | Lookup::Miss => read_page(c).await?,
        };
        if let Some(last) = page.last() {
            c.next = last.seq + 1;
            return Ok(page);
        }
        let woken = match tokio::time::timeout(POLL, c.committed.changed()).await {
            Ok(woken) => woken,
            Err(_) => {
                poll_table = true; // no commit of ours: look for another writer's (see `POLL`)
                continue;
            }
        };
        poll_table = false;
        if woken.is_err() {
            // The writer is gone. It publishes before it answers and stops only after its last
            // commit, so one more read finds anything still unseen.
            let page = read_page(c).await?;
            if let Some(last) = page.last() {
                c.next = last.seq + 1;
                return Ok(page);
            }
            return Err(closed());
        }
    }
}

/// A page read back from the table at the cursor.
async fn read_page(c: &mut Cursor) -> Result<Vec<Arc<Stored>>> {
    let page = passing_undecodable(c, read_from(&c.readers, c.next, PAGE).await)?;
    Ok(page.into_iter().map(Arc::new).collect())
}

/// Moves the cursor past an undecodable event before it is reported, so it is reported once.
fn passing_undecodable(c: &mut Cursor, read: Result<Vec<Stored>>) -> Result<Vec<Stored>> {
    if let Err(Error::Undecodable { seq, .. }) = &read {
        c.next = c.next.max(seq + 1);
    }
    read
}
