//! Statement parameters, written once for both dialects: scalars (`Arg`) and whole row sets
//! (`RowSet`, a batch's rows by column), each bound the way its backend stores the type.
//!
//! Deliberately typed: every value is one of a closed set of kinds, and each kind has exactly one
//! encoding per backend (PostgreSQL: native uuid, timestamptz and arrays; SQLite: text ids,
//! fixed-width UTC text timestamps, and a row set as one JSON array read by `json_each`). There
//! is no SQL here beyond the row-set source fragment.

use std::io::Write as _;

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Postgres, Sqlite};
use uuid::Uuid;

use super::dialect::Dialect;
use super::text;
use crate::error::{Error, Result};

/// Timestamps as fixed-width UTC text, so text order is time order (see the SQLite migration).
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    text::ts(&t)
}

pub(crate) fn parse_ts(s: &str) -> Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.fZ")
        .map(|n| n.and_utc())
        .map_err(|e| Error::Invariant(format!("bad timestamp {s:?} in the embedded read models: {e}")))
}

pub(crate) fn parse_uuid(s: &str) -> Result<Uuid> {
    Uuid::parse_str(s).map_err(|e| Error::Invariant(format!("bad uuid {s:?} in the embedded read models: {e}")))
}

/// One scalar parameter.
pub(crate) enum Arg<'a> {
    I64(Option<i64>),
    Text(Option<&'a str>),
    /// Text built for the statement (a row set's JSON).
    Owned(String),
    Uuid(Option<Uuid>),
    Ts(Option<DateTime<Utc>>),
    /// A PostgreSQL array (one column of a `RowSet`); SQLite gets the set as one JSON text.
    Col(Col<'a>),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::I64(Some(v))
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::I64(v)
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::Text(v.as_deref())
    }
}
impl From<Uuid> for Arg<'_> {
    fn from(v: Uuid) -> Self {
        Arg::Uuid(Some(v))
    }
}
impl From<Option<Uuid>> for Arg<'_> {
    fn from(v: Option<Uuid>) -> Self {
        Arg::Uuid(v)
    }
}
impl From<DateTime<Utc>> for Arg<'_> {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Ts(Some(v))
    }
}
impl From<Option<DateTime<Utc>>> for Arg<'_> {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Arg::Ts(v)
    }
}

/// One column of a row set, borrowed from the batch where it can be.
pub(crate) enum Col<'a> {
    Uuid(Vec<Uuid>),
    OptUuid(Vec<Option<Uuid>>),
    Text(Vec<&'a str>),
    OptText(Vec<Option<&'a str>>),
    I16(Vec<i16>),
    I64(Vec<i64>),
    Ts(Vec<DateTime<Utc>>),
    OptTs(Vec<Option<DateTime<Utc>>>),
}

/// A value type a row-set column may hold.
pub(crate) trait Cell<'a>: Sized {
    fn col(values: Vec<Self>) -> Col<'a>;
}

macro_rules! cell {
    ($t:ty => $v:ident) => {
        impl<'a> Cell<'a> for $t {
            fn col(values: Vec<Self>) -> Col<'a> {
                Col::$v(values)
            }
        }
    };
}
cell!(Uuid => Uuid);
cell!(Option<Uuid> => OptUuid);
cell!(&'a str => Text);
cell!(Option<&'a str> => OptText);
cell!(i16 => I16);
cell!(i64 => I64);
cell!(DateTime<Utc> => Ts);
cell!(Option<DateTime<Utc>> => OptTs);

impl Col<'_> {
    fn pg_type(&self) -> &'static str {
        match self {
            Col::Uuid(_) | Col::OptUuid(_) => "uuid[]",
            Col::Text(_) | Col::OptText(_) => "text[]",
            Col::I16(_) => "int2[]",
            Col::I64(_) => "int8[]",
            Col::Ts(_) | Col::OptTs(_) => "timestamptz[]",
        }
    }

    fn len(&self) -> usize {
        match self {
            Col::Uuid(v) => v.len(),
            Col::OptUuid(v) => v.len(),
            Col::Text(v) => v.len(),
            Col::OptText(v) => v.len(),
            Col::I16(v) => v.len(),
            Col::I64(v) => v.len(),
            Col::Ts(v) => v.len(),
            Col::OptTs(v) => v.len(),
        }
    }

    /// Appends row `i` of this column as a JSON value, in SQLite's storage form. (Writing to
    /// a `Vec` cannot fail, so the results are ignored.)
    fn write_json(&self, i: usize, out: &mut Vec<u8>) {
        match self {
            Col::Uuid(v) => quoted(out, |out| text::write_uuid(out, &v[i])),
            Col::OptUuid(v) => match &v[i] {
                Some(u) => quoted(out, |out| text::write_uuid(out, u)),
                None => out.extend_from_slice(b"null"),
            },
            Col::Text(v) => _ = serde_json::to_writer(&mut *out, v[i]),
            Col::OptText(v) => _ = serde_json::to_writer(&mut *out, &v[i]),
            Col::I16(v) => _ = write!(out, "{}", v[i]),
            Col::I64(v) => _ = write!(out, "{}", v[i]),
            Col::Ts(v) => quoted(out, |out| text::write_ts(out, &v[i])),
            Col::OptTs(v) => match &v[i] {
                Some(t) => quoted(out, |out| text::write_ts(out, t)),
                None => out.extend_from_slice(b"null"),
            },
        }
    }
}

/// Appends what `write` writes between double quotes (a JSON string that needs no escaping).
fn quoted(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    out.push(b'"');
    write(out);
    out.push(b'"');
}

/// Rows by column, read in SQL as the table `u` with the given column names.
#[derive(Default)]
pub(crate) struct RowSet<'a> {
    cols: Vec<(&'static str, Col<'a>)>,
}

impl<'a> RowSet<'a> {
    pub fn new() -> Self {
        RowSet { cols: Vec::new() }
    }

    pub fn col<T: Cell<'a>>(mut self, name: &'static str, values: impl IntoIterator<Item = T>) -> Self {
        self.cols.push((name, T::col(values.into_iter().collect())));
        self
    }
}

/// The parameters of one statement, numbered `$1..` in the order they are added. (sqlx binds
/// SQLite's `$N` by number too, so one placeholder style serves both dialects.)
pub(crate) struct Args<'a> {
    dialect: Dialect,
    values: Vec<Arg<'a>>,
}

impl<'a> Args<'a> {
    pub fn new(dialect: Dialect) -> Self {
        Args { dialect, values: Vec::new() }
    }

    /// Adds a parameter for SQL that names it by number itself.
    pub fn bind(mut self, v: impl Into<Arg<'a>>) -> Self {
        self.values.push(v.into());
        self
    }

    /// Adds a parameter and returns its placeholder, for SQL assembled around it.
    pub fn arg(&mut self, v: impl Into<Arg<'a>>) -> String {
        self.values.push(v.into());
        format!("${}", self.values.len())
    }

    /// Adds `rows` and returns the table expression that reads them as `u(<names>)`:
    /// `UNNEST` of one typed array per column in PostgreSQL, `json_each` over one JSON array of
    /// rows in SQLite.
    pub fn rows(&mut self, rows: RowSet<'a>) -> String {
        let names: Vec<&str> = rows.cols.iter().map(|c| c.0).collect();
        match self.dialect {
            Dialect::Postgres => {
                let mut params = Vec::with_capacity(rows.cols.len());
                for (_, col) in rows.cols {
                    let ty = col.pg_type();
                    params.push(format!("{}::{ty}", self.arg(Arg::Col(col))));
                }
                format!("UNNEST({}) AS u({})", params.join(", "), names.join(", "))
            }
            Dialect::Sqlite => {
                let n = rows.cols.first().map_or(0, |c| c.1.len());
                let mut json = Vec::with_capacity(n * 16 * rows.cols.len().max(1) + 2);
                json.push(b'[');
                for i in 0..n {
                    json.extend_from_slice(if i == 0 { b"[" } else { b",[" });
                    for (j, (_, col)) in rows.cols.iter().enumerate() {
                        if j > 0 {
                            json.push(b',');
                        }
                        col.write_json(i, &mut json);
                    }
                    json.push(b']');
                }
                json.push(b']');
                // Only JSON (UTF-8) was written.
                let json = String::from_utf8(json).unwrap_or_default();
                let p = self.arg(Arg::Owned(json));
                let cols: Vec<String> =
                    names.iter().enumerate().map(|(i, n)| format!("json_extract(r, '$[{i}]') AS {n}")).collect();
                // Each row's text is materialized once: read straight from `json_each`, `value`
                // was rendered back to text once per column that reads it (a third of a batch's
                // apply time at 25 columns).
                format!(
                    "(WITH rowset(r) AS MATERIALIZED (SELECT value FROM json_each({p})) SELECT {} FROM rowset) AS u",
                    cols.join(", ")
                )
            }
        }
    }

    pub(super) fn bind_pg<'q>(self, mut q: Query<'q, Postgres, PgArguments>) -> Result<Query<'q, Postgres, PgArguments>>
    where
        'a: 'q,
    {
        for v in self.values {
            q = match v {
                Arg::I64(v) => q.bind(v),
                Arg::Text(v) => q.bind(v),
                Arg::Owned(v) => q.bind(v),
                Arg::Uuid(v) => q.bind(v),
                Arg::Ts(v) => q.bind(v),
                Arg::Col(c) => match c {
                    Col::Uuid(v) => q.bind(v),
                    Col::OptUuid(v) => q.bind(v),
                    Col::Text(v) => q.bind(v),
                    Col::OptText(v) => q.bind(v),
                    Col::I16(v) => q.bind(v),
                    Col::I64(v) => q.bind(v),
                    Col::Ts(v) => q.bind(v),
                    Col::OptTs(v) => q.bind(v),
                },
            };
        }
        Ok(q)
    }

    pub(super) fn bind_sqlite<'q>(
        self,
        mut q: Query<'q, Sqlite, SqliteArguments<'q>>,
    ) -> Result<Query<'q, Sqlite, SqliteArguments<'q>>>
    where
        'a: 'q,
    {
        for v in self.values {
            q = match v {
                Arg::I64(v) => q.bind(v),
                Arg::Text(v) => q.bind(v),
                Arg::Owned(v) => q.bind(v),
                Arg::Uuid(v) => q.bind(v.map(|u| u.to_string())),
                Arg::Ts(v) => q.bind(v.map(ts)),
                Arg::Col(_) => return Err(Error::Invariant("an array parameter reached SQLite".into())),
            };
        }
        Ok(q)
    }
}

/// The one dialect fragment that adds a parameter, kept beside the parameters so `dialect.rs`
/// needs nothing of them.
impl Dialect {
    /// The write time of a bookkeeping column (`updated_at`, `recorded_at`, `archived_at`):
    /// PostgreSQL's transaction time; in SQLite, which has no clock in the stored timestamp
    /// form, `now` from the caller, added to `args`.
    pub fn now<'a>(self, args: &mut Args<'a>, now: DateTime<Utc>) -> String {
        match self {
            Dialect::Postgres => "now()".into(),
            Dialect::Sqlite => args.arg(now),
        }
    }
}
