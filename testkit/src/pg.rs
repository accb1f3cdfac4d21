//! `TestDb`: a fresh PostgreSQL database per test, created from `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) and dropped when the value is dropped.
//!
//! Deliberately fails loudly when PostgreSQL is unreachable: a test that cannot reach its
//! database must not pass by skipping.

use sqlx::{Connection, Executor, PgConnection};

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database that exists for the lifetime of this value.
#[derive(Debug)]
pub struct TestDb {
    name: String,
    url: String,
    admin_url: String,
}

fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_string())
}

/// Replaces the database name (the last path segment) of a PostgreSQL URL.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

impl TestDb {
    /// Creates a fresh, empty database. Panics when PostgreSQL cannot be reached.
    pub async fn create() -> TestDb {
        let admin_url = admin_url();
        let name = format!("sbtest_{}", uuid::Uuid::new_v4().simple());
        let mut conn = PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin_url}: {e} (is it running?)"));
        conn.execute(format!("CREATE DATABASE {name}").as_str()).await.expect("create test database");
        let url = with_database(&admin_url, &name);
        TestDb { name, url, admin_url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs outside any runtime guarantee, so use a short-lived thread with its own.
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    if let Ok(mut conn) = PgConnection::connect(&admin_url).await {
                        let _ = conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str()).await;
                    }
                });
            }
        })
        .join();
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_name_is_replaced() {
        assert_eq!(with_database("postgres://u@h:1/postgres", "x"), "postgres://u@h:1/x");
        assert_eq!(
            with_database("postgres://u@h:1/postgres?sslmode=disable", "x"),
            "postgres://u@h:1/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:1", "x"), "postgres://u@h:1/x");
    }
}
