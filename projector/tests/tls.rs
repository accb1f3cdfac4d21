//! The read models over TLS: a `--database-url` with `sslmode=require` connects, encrypted
//! (sqlx is built with rustls), and works like any other.
//!
//! Deliberately needs a PostgreSQL with `ssl = on` (Debian's clusters are, with their
//! snakeoil certificate): it fails, never skips, when the server offers no TLS.

use projector::queries::Queries;
use projector::ReadModels;
use sqlx::{Connection, PgConnection, Row};

#[tokio::test]
async fn sslmode_require_connects_encrypted() {
    let db = testkit::TestDb::create().await;
    let sep = if db.url().contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}sslmode=require", db.url());
    let models = ReadModels::postgres(&url).await.unwrap_or_else(|e| {
        panic!("sslmode=require failed (the test server needs ssl = on): {e}");
    });
    models.ping().await.expect("the read models answer over TLS");
    let mut conn = PgConnection::connect(&url).await.expect("connect with sslmode=require");
    let row = sqlx::query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .expect("pg_stat_ssl");
    assert!(row.get::<bool, _>("ssl"), "the connection is not encrypted");
}
