//! `signalbus admin expire` (CONTRACT §16, the operator's force-expire): its flags, the one
//! call (`POST /v1/admin/signals/expire`), and the answer — the counts, or with `--dry-run` what
//! would expire.
//!
//! Deliberately no rules of its own: a tenant alone, a bad name or a duration under a second is
//! the bus's refusal (exit 1), printed with its message.

use std::time::Duration;

use clap::Args;
use reqwest::Method;
use serde_json::{json, Map, Value};

use super::args::Conn;
use super::http::{call, Failure};
use super::render::{cell, pairs_text, print, table_text};

#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// The tenant whose pending signals to expire (required, with at least one filter below).
    #[arg(long)]
    pub tenant: String,
    /// Only signals to this identity.
    #[arg(long)]
    pub to: Option<String>,
    /// Only signals from this identity.
    #[arg(long)]
    pub from: Option<String>,
    /// Only signals of this type.
    #[arg(long = "type", value_name = "TYPE")]
    pub signal_type: Option<String>,
    /// Only signals created at least this long ago (e.g. 90s, 1h, 7days).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub older_than: Option<Duration>,
    /// Only these signals (the flag repeats, or takes several ids).
    #[arg(long = "id", value_name = "ID", num_args = 1..)]
    pub ids: Vec<String>,
    /// Expire nothing; list what would expire.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// The request body: the filters given, nothing else.
fn body(a: &ExpireArgs) -> Value {
    let mut b = Map::new();
    b.insert("tenant".into(), json!(a.tenant));
    for (key, value) in [("to", &a.to), ("from", &a.from), ("signal_type", &a.signal_type)] {
        if let Some(v) = value {
            b.insert(key.into(), json!(v));
        }
    }
    if let Some(d) = a.older_than {
        b.insert("older_than_seconds".into(), json!(d.as_secs()));
    }
    if !a.ids.is_empty() {
        b.insert("signal_ids".into(), json!(a.ids));
    }
    if a.dry_run {
        b.insert("dry_run".into(), json!(true));
    }
    Value::Object(b)
}

/// A dry run's answer as text: the signals listed, then how many would expire.
fn dry_run_text(v: &Value) -> String {
    let rows = v.get("would_expire").and_then(Value::as_array).cloned().unwrap_or_default();
    let count = v.get("count").and_then(Value::as_u64).unwrap_or(0);
    let mut out = table_text(&rows, &["signal_id", "to", "from", "type", "created_at"]);
    let more = count.saturating_sub(rows.len() as u64);
    let tail = if more > 0 { format!(" (the first {} listed)", rows.len()) } else { String::new() };
    out.push_str(&format!("{count} would expire{tail}\n"));
    out
}

/// Runs `admin expire`.
pub async fn run(args: ExpireArgs) -> (Conn, Result<(), Failure>) {
    let r = call(&args.conn, Method::POST, "/v1/admin/signals/expire", Some(body(&args))).await.map(|v| {
        if args.conn.json {
            print(true, &v, None, &[]);
        } else if args.dry_run {
            print!("{}", dry_run_text(&v));
        } else {
            print!("{}", pairs_text(&[("expired", cell(v.get("expired"))), ("skipped", cell(v.get("skipped")))]));
        }
    });
    (args.conn, r)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ExpireArgs,
    }

    fn parse(argv: &[&str]) -> ExpireArgs {
        Cli::try_parse_from(std::iter::once("expire").chain(argv.iter().copied())).unwrap().args
    }

    #[test]
    fn the_flags_given_become_the_filters_and_nothing_else() {
        let a = parse(&["--tenant", "t", "--to", "bob", "--older-than", "1h", "--id", "a", "b", "--id", "c"]);
        assert_eq!(
            body(&a),
            json!({"tenant": "t", "to": "bob", "older_than_seconds": 3600, "signal_ids": ["a", "b", "c"]})
        );
        let a = parse(&["--tenant", "t", "--from", "alice", "--type", "Question", "--dry-run"]);
        assert_eq!(body(&a), json!({"tenant": "t", "from": "alice", "signal_type": "Question", "dry_run": true}));
        assert_eq!(body(&parse(&["--tenant", "t"])), json!({"tenant": "t"}), "the bus refuses a tenant alone");
        assert!(Cli::try_parse_from(["expire", "--to", "bob"]).is_err(), "--tenant is required");
    }

    #[test]
    fn a_dry_run_prints_its_list_and_count() {
        let v = json!({"would_expire": [{"signal_id": "s1", "to": "bob", "from": "alice", "type": "Question",
            "created_at": "2026-01-01T00:00:00.000000Z"}], "count": 3});
        let text = dry_run_text(&v);
        assert!(text.starts_with("SIGNAL_ID  TO   FROM   TYPE      CREATED_AT\ns1"), "{text}");
        assert!(text.ends_with("3 would expire (the first 1 listed)\n"), "{text}");
        assert_eq!(
            dry_run_text(&json!({"would_expire": [], "count": 0})),
            "SIGNAL_ID  TO  FROM  TYPE  CREATED_AT\n(none)\n0 would expire\n"
        );
    }
}
