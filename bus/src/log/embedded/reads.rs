//! Reading the embedded log's events back: a page from a sequence on (`read_from`, shared by
//! `read` and the tails), one row decoded, and what a failed read means.
//!
//! Deliberately read-only and below `mod.rs` and `tail.rs`: it runs queries on the readers'
//! pool it is given and knows nothing of the writer task but its closed error.

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use super::writer::closed;
use crate::codec;
use crate::error::{Error, Result};
use crate::log::Stored;

/// Up to `max` events with sequence ≥ `from_seq`, in order. Shared by `read` and the tails.
/// Stops short of an undecodable event; a read that starts at one fails with
/// `Error::Undecodable` (see `log/mod.rs`).
pub(super) async fn read_from(readers: &SqlitePool, from_seq: u64, max: usize) -> Result<Vec<Stored>> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let rows = sqlx::query("SELECT seq, subject, body FROM events WHERE seq >= ? ORDER BY seq LIMIT ?")
        .bind(from_seq.min(i64::MAX as u64) as i64)
        .bind(max.min(i64::MAX as usize) as i64)
        .fetch_all(readers)
        .await
        .map_err(read_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        match decode_row(row) {
            Ok(stored) => out.push(stored),
            Err(e @ Error::Undecodable { .. }) if out.is_empty() => return Err(e),
            Err(Error::Undecodable { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

pub(super) fn decode_row(row: &SqliteRow) -> Result<Stored> {
    let seq: i64 = row.try_get(0)?;
    let subject: String = row.try_get(1)?;
    let body: &[u8] = row.try_get(2)?;
    match codec::decode(body) {
        Ok(event) => Ok(Stored { seq: seq as u64, subject, event }),
        Err(e) => Err(Error::Undecodable { seq: seq as u64, subject, reason: codec::reason(e) }),
    }
}

/// A read that failed because the log is closed or its connections are gone is `Unavailable`
/// (retry later); anything else is a storage fault.
pub(super) fn read_error(e: sqlx::Error) -> Error {
    match e {
        sqlx::Error::PoolClosed => closed(),
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => {
            Error::Unavailable(format!("event log read failed: {e}"))
        }
        e => Error::from(e),
    }
}
