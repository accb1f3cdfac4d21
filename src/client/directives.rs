//! `signalbus directive create|show|list|start|progress|complete|fail|reject|cancel` (CONTRACT
//! §14): the verbs' flags, the HTTP call each makes as the token's agent, the readable summary
//! of a directive, and `--wait`, which asks `GET /v1/directives/{id}?wait=S` (S ≤ 60) again
//! until the directive has ended or the wait is over and exits by how it ended.
//!
//! Deliberately decides nothing the bus decides: who may act, which transition is allowed and
//! every limit are the bus's answer (printed with its code and message, exit 1). The CLI only
//! reads its flags (JSON, durations) and maps the final status to an exit code.

use std::time::{Duration, Instant};

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Map, Value};

use super::args::Conn;
use super::http::{call, call_with_status, segment, Failure};
use super::render::{cell, pairs_text, print, table_text};

/// Exit code of a waited-for directive that ended `failed`.
pub const EXIT_FAILED: i32 = 4;
/// ... that ended `rejected`.
pub const EXIT_REJECTED: i32 = 5;
/// ... that ended `canceled`.
pub const EXIT_CANCELED: i32 = 6;
/// ... that ended `expired`.
pub const EXIT_EXPIRED: i32 = 7;
/// ... that was still open (`requested`, `started`) when the wait ended.
pub const EXIT_STILL_OPEN: i32 = 8;

/// The longest `?wait=` one request may ask for (the bus refuses more).
const MAX_WAIT_PER_CALL: u64 = 60;

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
        /// Free text copied onto the directive (and findable with `signal list`'s conversations).
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
                Some(wait) => wait_for_end(&conn, &directive_id, None, wait).await,
                None => call(&conn, Method::GET, &path(&directive_id, ""), None).await.map(|d| show(conn.json, &d)),
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

/// `/v1/directives/{id}` followed by `tail`.
fn path(id: &str, tail: &str) -> String {
    format!("/v1/directives/{}{tail}", segment(id))
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
            if conn.json {
                print(true, &directive, None, &[]);
            } else {
                print!("{}", summary(&directive, Some(created)));
            }
            Ok(())
        }
        Some(wait) => {
            let id = directive.get("directive_id").and_then(Value::as_str).unwrap_or_default().to_string();
            let left = wait.saturating_sub(started.elapsed());
            wait_for_end(conn, &id, Some((directive, created)), left).await
        }
    }
}

async fn act(conn: Conn, id: &str, action: &str, body: Value) -> Outcome {
    let r = call(&conn, Method::POST, &path(id, &format!("/{action}")), Some(body)).await.map(|d| show(conn.json, &d));
    (conn, r)
}

fn show(json: bool, directive: &Value) {
    if json {
        print(true, directive, None, &[]);
    } else {
        print!("{}", summary(directive, None));
    }
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

fn is_open(status: &str) -> bool {
    matches!(status, "requested" | "started")
}

/// How long the next `?wait=` asks for: what is left of the whole wait, in whole seconds rounded
/// up (the bus takes whole seconds), at most 60; `None` when nothing is left.
fn next_wait(left: Duration) -> Option<u64> {
    if left.is_zero() {
        return None;
    }
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    Some(secs.min(MAX_WAIT_PER_CALL))
}

/// Waits up to `wait` for directive `id` to end (`known`: the directive as the create answered
/// it, and whether it created it), prints it as it is then, and fails with the exit code of how
/// it ended (`exit_code`).
async fn wait_for_end(conn: &Conn, id: &str, known: Option<(Value, bool)>, wait: Duration) -> Result<(), Failure> {
    let until = Instant::now() + wait;
    let (mut directive, created) = match known {
        Some((d, created)) => (d, Some(created)),
        None => (call(conn, Method::GET, &path(id, ""), None).await?, None),
    };
    loop {
        let status = directive.get("status").and_then(Value::as_str).unwrap_or_default();
        if !is_open(status) {
            break;
        }
        let Some(secs) = next_wait(until.saturating_duration_since(Instant::now())) else { break };
        directive = call(conn, Method::GET, &path(id, &format!("?wait={secs}")), None).await?;
    }
    if conn.json {
        print(true, &directive, None, &[]);
    } else {
        print!("{}", summary(&directive, created));
    }
    match exit_code(&directive) {
        0 => Ok(()),
        exit => Err(Failure::Ended { exit, message: ended_message(&directive, wait) }),
    }
}

/// The exit code of a waited-for directive: 0 completed, else `EXIT_*`.
pub fn exit_code(directive: &Value) -> i32 {
    match directive.get("status").and_then(Value::as_str).unwrap_or_default() {
        "completed" => 0,
        "failed" => EXIT_FAILED,
        "rejected" => EXIT_REJECTED,
        "canceled" => EXIT_CANCELED,
        "expired" => EXIT_EXPIRED,
        _ => EXIT_STILL_OPEN,
    }
}

/// What the error line says about a waited-for directive that did not complete.
fn ended_message(d: &Value, wait: Duration) -> String {
    let id = d.get("directive_id").and_then(Value::as_str).unwrap_or("?");
    let status = d.get("status").and_then(Value::as_str).unwrap_or("?");
    let text = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
    match status {
        "failed" => {
            let code = d.pointer("/failure/code").and_then(Value::as_str).unwrap_or("?");
            let msg = d.pointer("/failure/message").and_then(Value::as_str).unwrap_or("");
            format!("directive {id} failed: {code}: {msg}").trim_end_matches([':', ' ']).to_string()
        }
        "rejected" | "canceled" => match text("reason") {
            Some(r) => format!("directive {id} was {status}: {r}"),
            None => format!("directive {id} was {status}"),
        },
        "expired" => format!("directive {id} expired at its deadline ({})", cell(d.get("deadline"))),
        _ => format!(
            "directive {id} is still {status} after waiting {} (its deadline is {}); wait again with \
             `signalbus directive show {id} --wait …`",
            humantime::format_duration(wait),
            cell(d.get("deadline"))
        ),
    }
}

/// A directive as label–value lines: the fields that are set, in reading order. `created`:
/// whether a create made it (true) or found it by its key (false); `None` for other verbs.
pub fn summary(d: &Value, created: Option<bool>) -> String {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(c) = created {
        let said = if c { "true" } else { "false (the key already names this directive; nothing was created)" };
        pairs.push(("created", said.to_string()));
    }
    let set = |k: &str| d.get(k).filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()));
    for key in ["directive_id", "type", "status", "issuer", "assignee", "claimed_by"] {
        if let Some(v) = set(key) {
            pairs.push((key, cell(Some(v))));
        }
    }
    if let Some(p) = set("progress") {
        let percent = p.get("percent").and_then(Value::as_i64).map(|n| format!("{n}%"));
        let message = p.get("message").and_then(Value::as_str).map(str::to_string);
        let at = p.get("at").and_then(Value::as_str).map(|a| format!("(at {a})"));
        let shown: Vec<String> = [percent, message, at].into_iter().flatten().collect();
        pairs.push(("progress", shown.join(" ")));
    }
    if let Some(f) = set("failure") {
        let code = f.get("code").and_then(Value::as_str).unwrap_or("?");
        let msg = f.get("message").and_then(Value::as_str).unwrap_or("");
        pairs.push(("failure", format!("{code}: {msg}").trim_end_matches([':', ' ']).to_string()));
    }
    for key in [
        "result",
        "reason",
        "declined_by",
        "params",
        "created_at",
        "deadline",
        "started_at",
        "finished_at",
        "correlation_id",
        "idempotency_key",
        "redacted",
    ] {
        if let Some(v) = set(key) {
            pairs.push((key, cell(Some(v))));
        }
    }
    pairs_text(&pairs)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

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
    fn each_end_has_its_exit_code_and_open_is_still_open() {
        let codes: Vec<i32> = ["completed", "failed", "rejected", "canceled", "expired", "requested", "started"]
            .iter()
            .map(|s| exit_code(&directive(s)))
            .collect();
        assert_eq!(
            codes,
            [0, EXIT_FAILED, EXIT_REJECTED, EXIT_CANCELED, EXIT_EXPIRED, EXIT_STILL_OPEN, EXIT_STILL_OPEN]
        );
        // Distinct from each other and from the CLI's 1 (bus error), 2 (usage), 3 (unreachable).
        let mut all = vec![0, 1, 2, 3, EXIT_FAILED, EXIT_REJECTED, EXIT_CANCELED, EXIT_EXPIRED, EXIT_STILL_OPEN];
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 9);
    }

    #[test]
    fn a_long_wait_is_asked_for_in_slices_of_at_most_a_minute_rounded_up() {
        assert_eq!(next_wait(Duration::ZERO), None);
        assert_eq!(next_wait(Duration::from_millis(300)), Some(1));
        assert_eq!(next_wait(Duration::from_millis(2_500)), Some(3));
        assert_eq!(next_wait(Duration::from_secs(60)), Some(60));
        assert_eq!(next_wait(Duration::from_secs(600)), Some(60));
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
        let msg = ended_message(&d, Duration::from_secs(5));
        assert_eq!(msg, "directive d1 failed: E_DISK: disk full");
        let msg = ended_message(&directive("started"), Duration::from_secs(5));
        assert!(msg.contains("still started after waiting 5s"), "{msg}");
        let mut c = directive("canceled");
        c["reason"] = json!("not needed");
        assert_eq!(ended_message(&c, Duration::ZERO), "directive d1 was canceled: not needed");
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
