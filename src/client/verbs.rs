//! What each client verb asks the bus, and how its answer is shown; `directive`, `group` and
//! `token` are handed to `directives.rs`, `groups.rs` and `tokens.rs`, a fan-out's answer to
//! `fanout.rs`.
//!
//! Deliberately one small function per verb; the shapes are CONTRACT §8's.

use reqwest::Method;
use serde_json::{json, Value};

use super::args::{AckArgs, AdminCmd, AgentCmd, Conn, DoctorArgs, InboxArgs, PluginCmd, SignalCmd};
use super::fanout;
use super::http::{call, segment, Failure};
use super::render::{failure, print};
use crate::cli::Command;

const SIGNAL_COLUMNS: &[&str] =
    &["id", "status", "from_identity", "to_identity", "signal_type", "priority", "created_at", "expires_at"];

/// Runs a client verb and returns the process exit code.
pub async fn run(command: Command) -> i32 {
    let (conn, result) = match command {
        Command::Agent(cmd) => agent(cmd).await,
        Command::Signal(cmd) => signal(cmd).await,
        Command::Inbox(args) => inbox(args).await,
        Command::Listen(args) => super::listen::run(args).await,
        Command::Ack(args) => ack(args).await,
        Command::Plugin(cmd) => plugin(cmd).await,
        Command::Admin(AdminCmd::Rebuild { conn }) => {
            let r = call(&conn, Method::POST, "/v1/admin/rebuild", None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        Command::Admin(AdminCmd::Expire(args)) => super::expire::run(args).await,
        Command::Admin(AdminCmd::Token(cmd)) => super::tokens::run_admin(cmd).await,
        Command::Token(cmd) => super::tokens::run(cmd).await,
        Command::Doctor(args) => doctor(args).await,
        Command::Directive(cmd) => super::directives::run(cmd).await,
        Command::Group(cmd) => super::groups::run(cmd).await,
        _ => unreachable!("server roles are not client verbs"),
    };
    match result {
        Ok(()) => 0,
        Err(f) => {
            failure(conn.json, &f);
            f.exit_code()
        }
    }
}

type Outcome = (Conn, Result<(), Failure>);

async fn agent(cmd: AgentCmd) -> Outcome {
    match cmd {
        AgentCmd::Add { identity, tenant, kind, conn } => {
            let body = json!({"tenant": tenant, "identity": identity, "kind": kind});
            let r = call(&conn, Method::POST, "/v1/agents", Some(body)).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        AgentCmd::List { tenant, conn } => {
            let path = match tenant {
                Some(t) => format!("/v1/agents?tenant={}", segment(&t)),
                None => "/v1/agents".to_string(),
            };
            let r = call(&conn, Method::GET, &path, None).await.map(|v| {
                let rows = v.get("agents").and_then(Value::as_array).cloned().unwrap_or_default();
                print(
                    conn.json,
                    &v,
                    Some(&rows),
                    &["tenant", "identity", "kind", "state", "live_sessions", "last_heartbeat"],
                )
            });
            (conn, r)
        }
        AgentCmd::Rotate { identity, tenant, conn } => {
            let path = format!("/v1/agents/{}/token?tenant={}", segment(&identity), segment(&tenant));
            let r = call(&conn, Method::POST, &path, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        AgentCmd::Remove { identity, tenant, conn } => {
            let path = format!("/v1/agents/{}?tenant={}", segment(&identity), segment(&tenant));
            let r = call(&conn, Method::DELETE, &path, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
    }
}

/// The status a signal row is in, for the STATUS column (the row itself has only timestamps).
fn status_of(row: &Value) -> &'static str {
    let set = |k: &str| row.get(k).is_some_and(|v| !v.is_null());
    if set("recalled_at") {
        "recalled"
    } else if set("expired_at") {
        "expired"
    } else if set("acked_at") {
        "acked"
    } else if set("delivered_at") {
        "delivered"
    } else {
        "pending"
    }
}

/// What to say when a send bounced: which class did it, and how to queue instead.
fn bounce_hint(to: &str, signal_type: &str, class: Option<&str>) -> String {
    let why = match class {
        Some(c) => format!("it was sent with --delivery-class {c}"),
        None => {
            let defaults = bus::catalog::TypeTable::default().get(signal_type);
            format!("{signal_type} is a {} type (see `signalbus signal types`)", defaults.delivery_class.as_str())
        }
    };
    format!(
        "{why}: a sync signal is pushed to a connected recipient or bounced, never queued; \
         resend with --delivery-class async to queue it until {to} connects"
    )
}

async fn signal(cmd: SignalCmd) -> Outcome {
    match cmd {
        SignalCmd::Send {
            to,
            signal_type,
            payload,
            delivery_class,
            ttl_seconds,
            correlation_id,
            dedupe_key,
            after,
            at,
            conn,
        } => {
            let class = delivery_class.clone();
            let payload: Value = match serde_json::from_str(&payload) {
                Ok(p) => p,
                Err(e) => return (conn, Err(Failure::Usage(format!("--payload is not JSON: {e}")))),
            };
            let mut body = json!({"to": to, "type": signal_type, "payload": payload});
            let fields = [
                ("delivery_class", delivery_class.map(Value::from)),
                ("ttl_seconds", ttl_seconds.map(Value::from)),
                ("correlation_id", correlation_id.map(Value::from)),
                ("dedupe_key", dedupe_key.map(Value::from)),
                // Whole seconds, rounded up: `--after 1500ms` is not due before it says.
                ("deliver_after_seconds", after.map(|d| Value::from(d.as_secs() + u64::from(d.subsec_nanos() > 0)))),
                ("deliver_at", at.map(Value::from)),
            ];
            for (k, v) in fields {
                if let Some(v) = v {
                    body[k] = v;
                }
            }
            let r = call(&conn, Method::POST, "/v1/signals", Some(body)).await.and_then(|v| {
                if fanout::is_fanout(&v) {
                    return fanout::show_fanout(conn.json, &v);
                }
                print(conn.json, &v, None, &[]);
                Ok(())
            });
            let r = r.map_err(|f| match f.code() {
                Some("recipient_unavailable") => f.with_hint(bounce_hint(&to, &signal_type, class.as_deref())),
                _ => f,
            });
            (conn, r)
        }
        SignalCmd::Types { conn } => {
            let v = types_table();
            let rows = v.get("types").and_then(Value::as_array).cloned().unwrap_or_default();
            print(
                conn.json,
                &v,
                Some(&rows),
                &["type", "delivery_class", "ttl", "ttl_seconds", "category", "priority"],
            );
            (conn, Ok(()))
        }
        SignalCmd::Recall { signal_id, fanout, correlation, conn } => {
            let r = match (signal_id, fanout, correlation) {
                (Some(id), _, _) => {
                    let path = format!("/v1/signals/{}/recall", segment(&id));
                    call(&conn, Method::POST, &path, None).await.map(|v| print(conn.json, &v, None, &[]))
                }
                (None, Some(f), _) => fanout::recall_many(&conn, "fanout_id", &f).await,
                (None, None, Some(c)) => fanout::recall_many(&conn, "correlation_id", &c).await,
                (None, None, None) => Err(Failure::Usage("name a signal id, --fanout ID or --correlation ID".into())),
            };
            (conn, r)
        }
        SignalCmd::Thread { signal_id, conn } => {
            let path = format!("/v1/signals/{}", segment(&signal_id));
            let r = match call(&conn, Method::GET, &path, None).await {
                Ok(row) => match row.get("correlation_id").and_then(Value::as_str) {
                    Some(c) => {
                        let path = format!("/v1/signals?correlation_id={}&limit=1000", segment(c));
                        call(&conn, Method::GET, &path, None).await.map(|v| {
                            let mut rows = v.get("signals").and_then(Value::as_array).cloned().unwrap_or_default();
                            for row in &mut rows {
                                row["status"] = json!(status_of(row));
                            }
                            print(conn.json, &v, Some(&rows), SIGNAL_COLUMNS)
                        })
                    }
                    None => {
                        let v = json!({ "signals": [row] });
                        let mut rows = vec![row];
                        rows[0]["status"] = json!(status_of(&rows[0]));
                        print(conn.json, &v, Some(&rows), SIGNAL_COLUMNS);
                        Ok(())
                    }
                },
                Err(e) => Err(e),
            };
            (conn, r)
        }
        SignalCmd::Show { signal_id, conn } => {
            let path = format!("/v1/signals/{}", segment(&signal_id));
            let r = call(&conn, Method::GET, &path, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        SignalCmd::List { role, status, limit, conn } => {
            let mut q = vec![];
            if let Some(r) = role {
                q.push(format!("role={}", segment(&r)));
            }
            if let Some(s) = status {
                q.push(format!("status={}", segment(&s)));
            }
            if let Some(l) = limit {
                q.push(format!("limit={l}"));
            }
            let path = if q.is_empty() { "/v1/signals".to_string() } else { format!("/v1/signals?{}", q.join("&")) };
            let r = call(&conn, Method::GET, &path, None).await.map(|v| {
                let mut rows = v.get("signals").and_then(Value::as_array).cloned().unwrap_or_default();
                for row in &mut rows {
                    row["status"] = json!(status_of(row));
                }
                print(conn.json, &v, Some(&rows), SIGNAL_COLUMNS)
            });
            (conn, r)
        }
    }
}

async fn inbox(args: InboxArgs) -> Outcome {
    let mut q = vec![];
    if args.drain {
        q.push("drain=true".to_string());
    }
    let conn = args.conn;
    if let Some(w) = args.wait {
        if w > std::time::Duration::from_secs(60) {
            return (conn, Err(Failure::Usage("--wait is at most 60s".into())));
        }
        // Whole seconds, rounded up: a wait never ends before the one asked for.
        q.push(format!("wait={}", w.as_secs() + u64::from(w.subsec_nanos() > 0)));
    }
    let path = if q.is_empty() { "/v1/inbox".to_string() } else { format!("/v1/inbox?{}", q.join("&")) };
    let r = call(&conn, Method::GET, &path, None).await.map(|v| {
        let rows = v.get("signals").and_then(Value::as_array).cloned().unwrap_or_default();
        print(conn.json, &v, Some(&rows), &["id", "from", "type", "priority", "created_at", "expires_at", "payload"])
    });
    (conn, r)
}

/// The built-in per-type defaults, one row per type and `*` for any other type.
fn types_table() -> Value {
    let table = bus::catalog::TypeTable::default();
    let row = |name: &str, d: bus::catalog::TypeDefaults| {
        json!({
            "type": name,
            "delivery_class": d.delivery_class.as_str(),
            "ttl": humantime::format_duration(std::time::Duration::from_secs(d.ttl_seconds)).to_string(),
            "ttl_seconds": d.ttl_seconds,
            "category": d.category.as_str(),
            "priority": d.priority(),
        })
    };
    // Sorted by priority, then name: the order a drain hands them out in.
    let mut rows: Vec<(i16, String, Value)> =
        table.types.iter().map(|(name, d)| (d.priority(), name.clone(), row(name, *d))).collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut types: Vec<Value> = rows.into_iter().map(|r| r.2).collect();
    types.push(row("*", table.fallback));
    json!({ "types": types })
}

async fn ack(args: AckArgs) -> Outcome {
    let conn = args.conn;
    let body = json!({ "signal_ids": args.signal_ids });
    let r = call(&conn, Method::POST, "/v1/inbox/ack", Some(body)).await.map(|v| print(conn.json, &v, None, &[]));
    (conn, r)
}

async fn plugin(cmd: PluginCmd) -> Outcome {
    match cmd {
        PluginCmd::Fact { plugin, fact_type, state, conn } => {
            let state: Value = match serde_json::from_str(&state) {
                Ok(s) => s,
                Err(e) => return (conn, Err(Failure::Usage(format!("--state is not JSON: {e}")))),
            };
            let path = format!("/v1/plugins/{}/facts", segment(&plugin));
            let body = json!({ "fact_type": fact_type, "state": state });
            let r = call(&conn, Method::POST, &path, Some(body)).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        PluginCmd::State { plugin, conn } => {
            let path = format!("/v1/plugins/{}/state", segment(&plugin));
            let r = call(&conn, Method::GET, &path, None).await.map(|v| print(conn.json, &v, None, &[]));
            (conn, r)
        }
        PluginCmd::Facts { plugin, fact_type, limit, conn } => {
            let mut path = format!("/v1/plugins/{}/facts?limit={}", segment(&plugin), limit.unwrap_or(50));
            if let Some(t) = fact_type {
                path.push_str(&format!("&fact_type={}", segment(&t)));
            }
            let r = call(&conn, Method::GET, &path, None).await.map(|v| {
                let rows = v.get("facts").and_then(Value::as_array).cloned().unwrap_or_default();
                print(conn.json, &v, Some(&rows), &["seq", "fact_type", "recorded_by", "created_at", "state"])
            });
            (conn, r)
        }
    }
}

/// Asks the bus for its own diagnosis (`/v1/admin/doctor`, admin), falling back to `/readyz`.
async fn doctor(args: DoctorArgs) -> Outcome {
    let conn = args.conn;
    let r = match call(&conn, Method::GET, "/v1/admin/doctor", None).await {
        Ok(v) => {
            let ok = v.get("ok").and_then(Value::as_bool).unwrap_or(false);
            let rows = v.get("checks").and_then(Value::as_array).cloned().unwrap_or_default();
            print(conn.json, &v, Some(&rows), &["check", "ok", "detail", "fix"]);
            let failed: Vec<&str> = rows
                .iter()
                .filter(|c| c.get("ok").and_then(Value::as_bool) == Some(false))
                .filter_map(|c| c.get("check").and_then(Value::as_str))
                .collect();
            if ok {
                Ok(())
            } else {
                Err(Failure::Failed(format!(
                    "{} of {} checks failed: {} (each row's FIX says what to do)",
                    failed.len(),
                    rows.len(),
                    failed.join(", ")
                )))
            }
        }
        Err(e) => Err(e),
    };
    (conn, r)
}
