//! The dialect layer: what lets `apply.rs`, `read.rs` and `maint.rs` write each statement once
//! for PostgreSQL and SQLite. `Dialect` supplies the few fragments the two spell differently,
//! `Args` the parameters (`args.rs`), `Conn` runs a statement on either, and `Row` reads a
//! column back into the shared Rust types whichever way the backend stores it.
//!
//! Deliberately no statement of its own and no transaction policy: which lock a writer takes,
//! how a rebuild swaps, and how a database is opened stay in `pg/` and `sqlite/`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Decode, PgConnection, Postgres, Row as _, Sqlite, SqliteConnection, Transaction, Type};
use uuid::Uuid;

use crate::error::{Error, Result};

mod args;
mod dialect;
mod text;

pub(crate) use args::{parse_ts, parse_uuid, Args, RowSet};
pub(crate) use dialect::Dialect;

/// A connection (or transaction, or savepoint) of either backend.
pub(crate) enum Conn<'c> {
    Pg(&'c mut PgConnection),
    Sqlite(&'c mut SqliteConnection),
}

impl Conn<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Pg(_) => Dialect::Postgres,
            Conn::Sqlite(_) => Dialect::Sqlite,
        }
    }

    pub fn args<'a>(&self) -> Args<'a> {
        Args::new(self.dialect())
    }

    /// Runs `sql`; returns the rows it affected.
    pub async fn execute(&mut self, sql: &str, args: Args<'_>) -> Result<u64> {
        Ok(match self {
            Conn::Pg(c) => args.bind_pg(sqlx::query(sql))?.execute(&mut **c).await?.rows_affected(),
            Conn::Sqlite(c) => args.bind_sqlite(sqlx::query(sql))?.execute(&mut **c).await?.rows_affected(),
        })
    }

    pub async fn fetch_all(&mut self, sql: &str, args: Args<'_>) -> Result<Vec<Row>> {
        Ok(match self {
            Conn::Pg(c) => {
                args.bind_pg(sqlx::query(sql))?.fetch_all(&mut **c).await?.into_iter().map(Row::Pg).collect()
            }
            Conn::Sqlite(c) => {
                args.bind_sqlite(sqlx::query(sql))?.fetch_all(&mut **c).await?.into_iter().map(Row::Sqlite).collect()
            }
        })
    }

    pub async fn fetch_optional(&mut self, sql: &str, args: Args<'_>) -> Result<Option<Row>> {
        Ok(match self {
            Conn::Pg(c) => args.bind_pg(sqlx::query(sql))?.fetch_optional(&mut **c).await?.map(Row::Pg),
            Conn::Sqlite(c) => args.bind_sqlite(sqlx::query(sql))?.fetch_optional(&mut **c).await?.map(Row::Sqlite),
        })
    }

    pub async fn fetch_one(&mut self, sql: &str, args: Args<'_>) -> Result<Row> {
        Ok(match self {
            Conn::Pg(c) => Row::Pg(args.bind_pg(sqlx::query(sql))?.fetch_one(&mut **c).await?),
            Conn::Sqlite(c) => Row::Sqlite(args.bind_sqlite(sqlx::query(sql))?.fetch_one(&mut **c).await?),
        })
    }
}

/// A connection checked out of either backend's pool.
pub(crate) enum Pooled {
    Pg(PoolConnection<Postgres>),
    Sqlite(PoolConnection<Sqlite>),
}

impl Pooled {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Pooled::Pg(c) => Conn::Pg(c),
            Pooled::Sqlite(c) => Conn::Sqlite(c),
        }
    }
}

/// A transaction of either backend, holding whatever writer lock its backend began it with.
pub(crate) enum Tx {
    Pg(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Tx::Pg(t) => Conn::Pg(t),
            Tx::Sqlite(t) => Conn::Sqlite(t),
        }
    }

    pub async fn commit(self) -> Result<()> {
        match self {
            Tx::Pg(t) => t.commit().await?,
            Tx::Sqlite(t) => t.commit().await?,
        }
        Ok(())
    }

    pub async fn rollback(self) -> Result<()> {
        match self {
            Tx::Pg(t) => t.rollback().await?,
            Tx::Sqlite(t) => t.rollback().await?,
        }
        Ok(())
    }
}

/// A result row of either backend.
pub(crate) enum Row {
    Pg(PgRow),
    Sqlite(SqliteRow),
}

impl Row {
    /// A column whose Rust type both backends decode alike (text, integers).
    pub fn get<T>(&self, col: &str) -> Result<T>
    where
        T: for<'r> Decode<'r, Postgres> + Type<Postgres> + for<'r> Decode<'r, Sqlite> + Type<Sqlite>,
    {
        Ok(match self {
            Row::Pg(r) => r.try_get(col)?,
            Row::Sqlite(r) => r.try_get(col)?,
        })
    }

    pub fn opt_uuid(&self, col: &str) -> Result<Option<Uuid>> {
        match self {
            Row::Pg(r) => Ok(r.try_get(col)?),
            Row::Sqlite(r) => r.try_get::<Option<String>, _>(col)?.as_deref().map(parse_uuid).transpose(),
        }
    }

    pub fn uuid(&self, col: &str) -> Result<Uuid> {
        self.opt_uuid(col)?.ok_or_else(|| null(col))
    }

    pub fn opt_ts(&self, col: &str) -> Result<Option<DateTime<Utc>>> {
        match self {
            Row::Pg(r) => Ok(r.try_get(col)?),
            Row::Sqlite(r) => r.try_get::<Option<String>, _>(col)?.as_deref().map(parse_ts).transpose(),
        }
    }

    pub fn ts(&self, col: &str) -> Result<DateTime<Utc>> {
        self.opt_ts(col)?.ok_or_else(|| null(col))
    }

    /// A stored JSON column (`jsonb`; text in SQLite).
    pub fn json(&self, col: &str) -> Result<Value> {
        match self {
            Row::Pg(r) => Ok(r.try_get(col)?),
            Row::Sqlite(r) => serde_json::from_str(&r.try_get::<String, _>(col)?)
                .map_err(|e| Error::Invariant(format!("bad JSON in the embedded read models: {e}"))),
        }
    }
}

fn null(col: &str) -> Error {
    Error::Invariant(format!("unexpected NULL in column {col}"))
}
