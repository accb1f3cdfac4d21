//! `signalbus directive create|show|list|start|progress|complete|fail|reject|cancel` (CONTRACT
//! §14): the verbs' flags, the HTTP call each makes as the token's agent, and the readable
//! summary of a directive; `--wait` is `wait.rs`'s.
//!
//! Deliberately decides nothing the bus decides: who may act, which transition is allowed and
//! every limit are the bus's answer (printed with its code and message, exit 1). The CLI only
//! reads its flags (JSON, durations) and maps the final status to an exit code.

use std::time::{Duration, Instant};

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Map, Value};

use super::args::Conn;
use super::directive_view::{path, print_directive};
use super::http::{call, call_with_status, segment, Failure};
use super::render::{print, table_text};
use super::wait;

const LIST_COLUMNS: &[&str] =
    &["directive_id", "type", "status", "issuer", "assignee", "claimed_by", "created_at", "deadline"];

#[derive(Debug, Subcommand)]
pub enum DirectiveCmd {
    /// Ask an agent, or any one member of a @group, to do a piece of work (as the token's agent).
    Create {
        /// The assignee: an identity, or @group (any one member may claim it).
        #[arg(long)]
        to: String,
        /// The directive type, e.g. package.install.
        #[arg(long = "type")]
        directive_type: String,
        /// The work's parameters: a JSON object (at most 64 KiB).
        #[arg(long, default_value = "{}")]
        params: String,
        /// Idempotency key (at most 200 characters): creating again with the same key answers the
        /// existing directive instead of a second one. Default: a new `sbd-<uuid>` each time.
        #[arg(long)]
        key: Option<String>,
        /// How long the assignee has before the directive expires, e.g. 30m, 1h, 7days
        /// (1 second to 30 days; default: the bus's, 24h unless configured).
        #[arg(long, value_parser = humantime::parse_duration)]
        deadline: Option<Duration>,
        /// Free text copied onto the directive, to tie it to your own records.
        #[arg(long)]
        correlation_id: Option<String>,
        /// Then wait this long (e.g. 60s, 10m) for the directive to end; the exit code says how
        /// it ended (0 completed; see docs/cli.md).
        #[arg(long, value_parser = humantime::parse_duration)]
        wait: Option<Duration>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show one directive (issuer, assignee or a member of the assignee group).
    Show {
        directive_id: String,
        /// Wait this long (e.g. 60s, 10m) for the directive to end; the exit code says how it
        /// ended (0 completed; see docs/cli.md).
        #[arg(long, value_parser = humantime::parse_duration)]
        wait: Option<Duration>,
        #[command(flatten)]
        conn: Conn,
    },
    /// List your directives, newest first: those you issued and those assigned to you or your groups.
    List {
        /// issued or assigned (default: both).
        #[arg(long, value_parser = ["issued", "assigned"])]
        role: Option<String>,
        /// open (requested or started), or one status.
        #[arg(long, value_parser = ["open", "requested", "started", "completed", "failed", "rejected", "canceled", "expired"])]
        status: Option<String>,
        /// Only this directive type.
        #[arg(long = "type")]
        directive_type: Option<String>,
        /// At most this many rows, 1 to 1000 (default 100).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: Option<u32>,
        /// The next page: the cursor the previous page printed.
        #[arg(long)]
        before: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Start (claim) a directive assigned to you or to one of your groups.
    Start {
        directive_id: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Report progress on a directive you started (replaces the previous report).
    Progress {
        directive_id: String,
        /// How far along, 0 to 100.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
        percent: Option<u8>,
        /// What is happening (at most 1,000 characters).
        #[arg(long)]
        message: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Complete a directive (one you started, or one assigned to you: claims and completes at once).
    Complete {
        directive_id: String,
        /// The result: a JSON object (at most 64 KiB).
        #[arg(long, default_value = "{}")]
        result: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Fail a directive (as complete: the claimer, or the assignee from requested).
    Fail {
        directive_id: String,
        /// A short machine-readable failure code, e.g. E_DISK.
        #[arg(long)]
        code: String,
        /// What went wrong.
        #[arg(long)]
        message: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Decline a requested directive assigned to you (a group member declines for itself; the
    /// directive is rejected once every member has).
    Reject {
        directive_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Cancel an open directive you issued.
    Cancel {
        directive_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
}

type Outcome = (Conn, Result<(), Failure>);

/// Runs a `directive` verb.
pub async fn run(cmd: DirectiveCmd) -> Outcome {
    match cmd {
        DirectiveCmd::Create { to, directive_type, params, key, deadline, correlation_id, wait, conn } => {
            let r = create(&conn, to, directive_type, &params, key, deadline, correlation_id, wait).await;
            (conn, r)
        }
        DirectiveCmd::Show { directive_id, wait, conn } => {
            let r = match wait {
                Some(wait) => wait::wait_for_end(&conn, &directive_id, None, wait).await,
                None => call(&conn, Method::GET, &path(&directive_id, ""), None)
                    .await
                    .map(|d| print_directive(conn.json, &d, None)),
            };
            (conn, r)
        }
        DirectiveCmd::List { role, status, directive_type, limit, before, conn } => {
            let query = [
                ("role", role),
                ("status", status),
                ("type", directive_type),
                ("limit", limit.map(|l| l.to_string())),
                ("before", before),
            ];
            let q: Vec<String> =
                query.into_iter().filter_map(|(k, v)| v.map(|v| format!("{k}={}", segment(&v)))).collect();
            let url =
                if q.is_empty() { "/v1/directives".to_string() } else { format!("/v1/directives?{}", q.join("&")) };
            let r = call(&conn, Method::GET, &url, None).await.map(|v| list(conn.json, &v));
            (conn, r)
        }
        DirectiveCmd::Start { directive_id, conn } => act(conn, &directive_id, "start", json!({})).await,
        DirectiveCmd::Progress { directive_id, percent, message, conn } => {
            let mut body = Map::new();
            if let Some(p) = percent {
                body.insert("percent".into(), json!(p));
            }
            if let Some(m) = message {
                body.insert("message".into(), json!(m));
            }
            act(conn, &directive_id, "progress", Value::Object(body)).await
        }
        DirectiveCmd::Complete { directive_id, result, conn } => match json_flag("--result", &result) {
            Ok(result) => act(conn, &directive_id, "complete", json!({ "result": result })).await,
            Err(f) => (conn, Err(f)),
        },
        DirectiveCmd::Fail { directive_id, code, message, conn } => {
            let failure = json!({"code": code, "message": message.unwrap_or_default()});
            act(conn, &directive_id, "fail", json!({ "failure": failure })).await
        }
        DirectiveCmd::Reject { directive_id, reason, conn } => {
            act(conn, &directive_id, "reject", reason_body(reason)).await
        }
        DirectiveCmd::Cancel { directive_id, reason, conn } => {
            act(conn, &directive_id, "cancel", reason_body(reason)).await
        }
    }
}

fn reason_body(reason: Option<String>) -> Value {
    match reason {
        Some(r) => json!({ "reason": r }),
        None => json!({}),
    }
}

/// A flag's JSON text as a value; text that is not JSON is a usage error naming the flag.
fn json_flag(flag: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::Usage(format!("{flag} is not JSON: {e}")))
}

/// `--deadline` as the whole seconds the bus takes.
fn deadline_seconds(d: Duration) -> Result<u64, Failure> {
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(Failure::Usage(format!(
            "--deadline {} is not a whole number of seconds of at least 1s",
            humantime::format_duration(d)
        )));
    }
    Ok(d.as_secs())
}

#[allow(clippy::too_many_arguments)]
async fn create(
    conn: &Conn,
    to: String,
    directive_type: String,
    params: &str,
    key: Option<String>,
    deadline: Option<Duration>,
    correlation_id: Option<String>,
    wait: Option<Duration>,
) -> Result<(), Failure> {
    let params = json_flag("--params", params)?;
    let key = key.unwrap_or_else(|| format!("sbd-{}", uuid::Uuid::new_v4()));
    let mut body = json!({"to": to, "type": directive_type, "params": params, "idempotency_key": key});
    if let Some(d) = deadline {
        body["deadline_seconds"] = json!(deadline_seconds(d)?);
    }
    if let Some(c) = correlation_id {
        body["correlation_id"] = json!(c);
    }
    let started = Instant::now();
    let (status, directive) = call_with_status(conn, Method::POST, "/v1/directives", Some(body)).await?;
    let created = status == 201;
    match wait {
        None => {
            print_directive(conn.json, &directive, Some(created));
            Ok(())
        }
        Some(wait) => {
            let id = directive.get("directive_id").and_then(Value::as_str).unwrap_or_default().to_string();
            let left = wait.saturating_sub(started.elapsed());
            wait::wait_for_end(conn, &id, Some((directive, created)), left).await
        }
    }
}

async fn act(conn: Conn, id: &str, action: &str, body: Value) -> Outcome {
    let r = call(&conn, Method::POST, &path(id, &format!("/{action}")), Some(body))
        .await
        .map(|d| print_directive(conn.json, &d, None));
    (conn, r)
}

fn list(json: bool, page: &Value) {
    if json {
        print(true, page, None, &[]);
        return;
    }
    let rows = page.get("directives").and_then(Value::as_array).cloned().unwrap_or_default();
    print!("{}", table_text(&rows, LIST_COLUMNS));
    if let Some(next) = page.get("next_before").and_then(Value::as_str) {
        println!("next page: --before {next}");
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::client::directive_view::summary;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: DirectiveCmd,
    }

    fn parse(args: &[&str]) -> Result<DirectiveCmd, clap::Error> {
        Cli::try_parse_from(std::iter::once("directive").chain(args.iter().copied())).map(|c| c.cmd)
    }

    fn directive(status: &str) -> Value {
        json!({"directive_id":"d1","type":"package.install","issuer":"alice","assignee":"@builders",
               "claimed_by":null,"params":{"name":"jq"},"status":status,"created_at":"t0","deadline":"t9",
               "started_at":null,"finished_at":null,"progress":null,"result":null,"failure":null,
               "reason":null,"declined_by":[],"correlation_id":null,"idempotency_key":"k1","redacted":[]})
    }

    #[test]
    fn the_summary_shows_what_is_set_and_how_it_ended() {
        let mut d = directive("failed");
        d["claimed_by"] = json!("bob");
        d["failure"] = json!({"code":"E_DISK","message":"disk full"});
        d["progress"] = json!({"percent":40,"message":"half","at":"t1"});
        let text = summary(&d, Some(false));
        let value = |label: &str| {
            text.lines().find_map(|l| l.strip_prefix(label).filter(|v| v.starts_with("  ")).map(str::trim_start))
        };
        assert!(text.starts_with("created  "), "{text}");
        assert!(value("created").unwrap().starts_with("false (the key already names"), "{text}");
        assert_eq!(value("status"), Some("failed"));
        assert_eq!(value("failure"), Some("E_DISK: disk full"));
        assert_eq!(value("progress"), Some("40% half (at t1)"));
        assert_eq!(value("params"), Some(r#"{"name":"jq"}"#));
        // The values are aligned on the longest label.
        assert!(text.contains("\nidempotency_key  k1\n") && text.contains("\nstatus           failed\n"), "{text}");
        for absent in ["result", "reason", "declined_by", "redacted", "started_at"] {
            assert!(!text.contains(absent), "{absent} is not set: {text}");
        }
    }

    #[test]
    fn flags_are_read_as_documented() {
        let DirectiveCmd::Create { to, deadline, wait, key, .. } = parse(&[
            "create",
            "--to",
            "@builders",
            "--type",
            "ci.build",
            "--key",
            "k1",
            "--deadline",
            "1h",
            "--wait",
            "90s",
        ])
        .unwrap() else {
            panic!("create")
        };
        assert_eq!((to.as_str(), key.as_deref()), ("@builders", Some("k1")));
        assert_eq!((deadline, wait), (Some(Duration::from_secs(3600)), Some(Duration::from_secs(90))));
        assert!(parse(&["create", "--type", "a.b"]).is_err(), "--to is required");
        assert!(parse(&["progress", "d1", "--percent", "101"]).is_err(), "percent is 0 to 100");
        assert!(parse(&["list", "--status", "done"]).is_err(), "status is one of the states or open");
        assert!(parse(&["fail", "d1"]).is_err(), "fail needs --code");
        assert!(parse(&["show", "d1", "--wait", "soon"]).is_err(), "--wait is a duration");
        assert_eq!(deadline_seconds(Duration::from_secs(90)).unwrap(), 90);
        assert!(deadline_seconds(Duration::from_millis(1500)).is_err());
        assert!(json_flag("--params", "not json").is_err());
    }
}
