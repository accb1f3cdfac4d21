//! `signalbus token issue|list|revoke` (an agent's scoped tokens) and `signalbus admin token
//! create|list|revoke` (tenant admin tokens), CONTRACT §17: the verbs' flags, the one HTTP call
//! each makes, and the answer printed — a new token's secret once, lists as tables.
//!
//! Deliberately no rules of its own: which scopes exist is clap's list only so `--help` and
//! completions name them; an empty list, an expiry out of range, a label too long, a tenant admin
//! reaching into another tenant or revoking `registration` are the bus's refusals (exit 1),
//! printed with its message. Every verb runs with the admin token (`--token`, or the one serve
//! keeps), as `agent add` does.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Map, Value};

use super::args::{AdminTokenCmd, Conn, TokenCmd};
use super::http::{call, segment, Failure};
use super::render::{cell, pairs_text, print, table_text};

type Outcome = (Conn, Result<(), Failure>);

/// Runs a `token` verb.
pub async fn run(cmd: TokenCmd) -> Outcome {
    match cmd {
        TokenCmd::Issue { identity, tenant, scopes, expires_in, label, conn } => {
            let url = format!("{}?tenant={}", tokens_path(&identity), segment(&tenant));
            let body = issue_body(&scopes, expires_in, label.as_deref());
            let r = call(&conn, Method::POST, &url, Some(body)).await.map(|v| show(&conn, &v, issued_text));
            (conn, r)
        }
        TokenCmd::List { identity, tenant, conn } => {
            let url = format!("{}?tenant={}", tokens_path(&identity), segment(&tenant));
            let r = call(&conn, Method::GET, &url, None).await.map(|v| show(&conn, &v, list_text));
            (conn, r)
        }
        TokenCmd::Revoke { identity, token_id, tenant, conn } => {
            let url = format!("{}/{}?tenant={}", tokens_path(&identity), segment(&token_id), segment(&tenant));
            let r = call(&conn, Method::DELETE, &url, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
    }
}

/// Runs an `admin token` verb.
pub async fn run_admin(cmd: AdminTokenCmd) -> Outcome {
    match cmd {
        AdminTokenCmd::Create { tenant, label, conn } => {
            let mut body = json!({ "tenant": tenant });
            if let Some(l) = label {
                body["label"] = json!(l);
            }
            let r = call(&conn, Method::POST, "/v1/admin/tokens", Some(body))
                .await
                .map(|v| show(&conn, &v, |v| ordered(v, &["token_id", "token", "tenant", "label"])));
            (conn, r)
        }
        AdminTokenCmd::List { tenant, conn } => {
            let url = match tenant {
                Some(t) => format!("/v1/admin/tokens?tenant={}", segment(&t)),
                None => "/v1/admin/tokens".to_string(),
            };
            let r = call(&conn, Method::GET, &url, None)
                .await
                .map(|v| show(&conn, &v, |v| table_text(&rows(v), &["token_id", "tenant", "label", "issued_at"])));
            (conn, r)
        }
        AdminTokenCmd::Revoke { token_id, conn } => {
            let url = format!("/v1/admin/tokens/{}", segment(&token_id));
            let r = call(&conn, Method::DELETE, &url, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
    }
}

/// `/v1/agents/{identity}/tokens`.
fn tokens_path(identity: &str) -> String {
    format!("/v1/agents/{}/tokens", segment(identity))
}

/// The body of an issue: only what was given (the bus's defaults apply to the rest). An expiry
/// is whole seconds, rounded up: `--expires-in 1500ms` never ends before it says.
fn issue_body(scopes: &[String], expires_in: Option<Duration>, label: Option<&str>) -> Value {
    let mut b = Map::new();
    if !scopes.is_empty() {
        b.insert("scopes".into(), json!(scopes));
    }
    if let Some(d) = expires_in {
        b.insert("expires_in_seconds".into(), json!(d.as_secs() + u64::from(d.subsec_nanos() > 0)));
    }
    if let Some(l) = label {
        b.insert("label".into(), json!(l));
    }
    Value::Object(b)
}

/// The answer as the bus's JSON with `--json`, else as `text` makes it.
fn show(conn: &Conn, v: &Value, text: impl Fn(&Value) -> String) {
    if conn.json {
        print(true, v, None, &[]);
    } else {
        print!("{}", text(v));
    }
}

/// `scopes` as one cell: the names joined by commas.
fn scopes_cell(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        Some(list) => list.iter().map(|s| cell(Some(s))).collect::<Vec<_>>().join(","),
        None => cell(v),
    }
}

/// A new token: its id and secret first (the secret is shown this once), then what it may do.
fn issued_text(v: &Value) -> String {
    let mut pairs = vec![("token_id", cell(v.get("token_id"))), ("token", cell(v.get("token")))];
    pairs.push(("scopes", scopes_cell(v.get("scopes"))));
    pairs.push(("expires_at", cell(v.get("expires_at"))));
    pairs.push(("label", cell(v.get("label"))));
    pairs_text(&pairs)
}

/// The fields of `v` named in `keys`, in that order.
fn ordered(v: &Value, keys: &[&str]) -> String {
    let pairs: Vec<(&str, String)> = keys.iter().map(|k| (*k, cell(v.get(*k)))).collect();
    pairs_text(&pairs)
}

/// The answer's `tokens`, each with its scopes as one cell.
fn rows(v: &Value) -> Vec<Value> {
    let mut rows = v.get("tokens").and_then(Value::as_array).cloned().unwrap_or_default();
    for row in &mut rows {
        if row.get("scopes").is_some() {
            row["scopes"] = json!(scopes_cell(row.get("scopes")));
        }
    }
    rows
}

/// An agent's tokens, one row each.
fn list_text(v: &Value) -> String {
    table_text(&rows(v), &["token_id", "label", "scopes", "expires_at", "issued_at", "expired"])
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::client::args::SCOPES;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: TokenCmd,
    }

    fn issue(argv: &[&str]) -> Value {
        let cli = Cli::try_parse_from(["token", "issue"].iter().chain(argv).copied()).unwrap();
        match cli.cmd {
            TokenCmd::Issue { scopes, expires_in, label, .. } => issue_body(&scopes, expires_in, label.as_deref()),
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn an_issue_sends_what_was_given_and_nothing_else() {
        assert_eq!(issue(&["bob"]), json!({}), "every scope, no expiry: the bus's defaults");
        assert_eq!(
            issue(&["bob", "--scope", "send", "--scope", "read,recall", "--expires-in", "1h", "--label", "ci"]),
            json!({"scopes": ["send", "read", "recall"], "expires_in_seconds": 3600, "label": "ci"})
        );
        assert_eq!(issue(&["bob", "--expires-in", "1500ms"]), json!({"expires_in_seconds": 2}), "rounded up");
        assert_eq!(issue(&["bob", "--expires-in", "30days"]), json!({"expires_in_seconds": 2_592_000}));
        let refused = Cli::try_parse_from(["token", "issue", "bob", "--scope", "admin"]).unwrap_err();
        assert_eq!(refused.kind(), clap::error::ErrorKind::InvalidValue, "a scope §17 does not name");
    }

    #[test]
    fn a_new_token_prints_its_secret_once_then_what_it_may_do() {
        let v = json!({"token_id": "7c1e", "token": "sb_00ff", "scopes": ["send", "read"],
            "expires_at": null, "label": "ci"});
        assert_eq!(
            issued_text(&v),
            "token_id    7c1e\ntoken       sb_00ff\nscopes      send,read\nexpires_at  -\nlabel       ci\n"
        );
    }

    #[test]
    fn lists_show_scopes_as_one_cell_and_never_a_secret() {
        let v = json!({"tokens": [
            {"token_id": "registration", "label": "registration", "scopes": SCOPES, "expires_at": null,
             "issued_at": "t0", "expired": false},
            {"token_id": "7c1e", "label": null, "scopes": ["send"], "expires_at": "t2", "issued_at": "t1",
             "expired": true}]});
        let text = list_text(&v);
        assert!(text.starts_with("TOKEN_ID      LABEL         SCOPES"), "{text}");
        assert!(text.contains("registration  registration  send,receive,recall,facts,directives,read  -"), "{text}");
        assert!(text.contains("7c1e          -             send"), "{text}");
        assert!(text.trim_end().ends_with("true"), "{text}");
        let admins = json!({"tokens": [{"token_id": "a1", "tenant": "acme", "label": "acme ops", "issued_at": "t0"}]});
        assert_eq!(
            table_text(&rows(&admins), &["token_id", "tenant", "label", "issued_at"]),
            "TOKEN_ID  TENANT  LABEL     ISSUED_AT\na1        acme    acme ops  t0\n"
        );
    }

    #[test]
    fn paths_encode_the_identity() {
        assert_eq!(tokens_path("ci/bot"), "/v1/agents/ci%2Fbot/tokens");
    }
}
