//! `Dialect`: the few SQL fragments PostgreSQL and SQLite spell differently.
//!
//! Deliberately a leaf of `sql/`: it renders text and runs nothing, so `args.rs` and the
//! connection types above it can both name it.

/// The SQL spelling a statement is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    /// The two-argument maximum (`GREATEST` in PostgreSQL, scalar `max` in SQLite).
    pub fn greatest(self) -> &'static str {
        match self {
            Dialect::Postgres => "GREATEST",
            Dialect::Sqlite => "max",
        }
    }

    /// The `RETURNING` of an `UPDATE {table} AS {alias} … FROM` that names `col` of the updated
    /// table: qualified in PostgreSQL (where the bare name could be the source's too), bare in
    /// SQLite (whose `RETURNING` sees only the target table, and not through its alias).
    pub fn returning(self, alias: &str, col: &str) -> String {
        match self {
            Dialect::Postgres => format!(" RETURNING {alias}.{col}"),
            Dialect::Sqlite => format!(" RETURNING {col}"),
        }
    }

    /// A JSON text column of a row set, as the stored JSON type (`jsonb`; text in SQLite).
    pub fn json(self, expr: &str) -> String {
        match self {
            Dialect::Postgres => format!("{expr}::jsonb"),
            Dialect::Sqlite => expr.to_string(),
        }
    }

    /// A stored JSON column as text.
    pub fn json_text(self, expr: &str) -> String {
        match self {
            Dialect::Postgres => format!("{expr}::text"),
            Dialect::Sqlite => expr.to_string(),
        }
    }

    /// The size in bytes of a stored JSON column's text.
    pub fn json_bytes(self, expr: &str) -> String {
        match self {
            Dialect::Postgres => format!("octet_length({expr}::text)::bigint"),
            Dialect::Sqlite => format!("length(CAST({expr} AS BLOB))"),
        }
    }

    /// A JSON array of `cols` rendered as text (the snapshot's canonical row).
    pub fn json_array(self, cols: &str) -> String {
        match self {
            Dialect::Postgres => format!("json_build_array({cols})::text"),
            Dialect::Sqlite => format!("json_array({cols})"),
        }
    }

    /// The condition that selects the rows of `identity` (a placeholder) in `column`, within
    /// `tenant` (a placeholder), in the shape the listing indexes are keyed by. In PostgreSQL
    /// those are keyed by one 64-bit hash of both (schema/postgres/0010_listing_keys.sql), so
    /// the condition asks for the hash and rechecks the identity on the row, which keeps a
    /// collision of two hashes to rows read, never a row answered (the row's `tenant = …` is
    /// the caller's own condition). SQLite keeps the text keys.
    pub fn identity_is(self, column: &str, tenant: &str, identity: &str) -> String {
        match self {
            Dialect::Postgres => format!(
                "(hashtextextended(tenant || chr(31) || {column}, 0) = hashtextextended({tenant} || chr(31) || {identity}, 0) \
                 AND {column} = {identity})"
            ),
            Dialect::Sqlite => format!("{column} = {identity}"),
        }
    }
}
