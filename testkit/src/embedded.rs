//! The embedded log's SQLite file written behind the log's back: how tests plant an event
//! the log and its codec would never store (a foreign body, a poison event, a bad field).

use std::path::Path;

use sqlx::Connection;
use uuid::Uuid;

/// Stores `body` under `subject` as the next event of the embedded log in `file` (the log's
/// database file, `<data dir>/bus::log::embedded::FILE_NAME`), bypassing the log and its codec,
/// as another program writing the stream would; returns its sequence.
///
/// A second writer on the same file is safe: the log's writer reads the newest sequence under
/// the write lock for every batch.
pub async fn append_raw(file: &Path, subject: &str, body: &[u8]) -> u64 {
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap_or_else(|e| panic!("open the embedded log {}: {e}", file.display()));
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO events (seq, subject, event_id, body, stored_at) \
         SELECT COALESCE(MAX(seq), 0) + 1, ?1, ?2, ?3, 0 FROM events RETURNING seq",
    )
    .bind(subject)
    .bind(Uuid::new_v4())
    .bind(body)
    .fetch_one(&mut conn)
    .await
    .expect("insert a raw event");
    conn.close().await.ok();
    seq as u64
}
