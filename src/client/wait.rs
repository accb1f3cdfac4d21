//! `--wait` of `directive create` and `directive show`: asks `GET /v1/directives/{id}?wait=S`
//! (S ≤ 60, the bus's limit) again and again until the directive has ended or the whole wait is
//! over, prints it as it is then, and exits by how it ended (the `EXIT_*` codes, docs/cli.md).
//!
//! Deliberately no polling of its own (the bus holds each call open until the directive ends)
//! and no retry: a call that fails ends the wait with that failure's exit code.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::args::Conn;
use super::directive_view::{path, print_directive};
use super::http::{call, Failure};
use super::render::cell;

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
pub async fn wait_for_end(conn: &Conn, id: &str, known: Option<(Value, bool)>, wait: Duration) -> Result<(), Failure> {
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
    print_directive(conn.json, &directive, created);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn directive(status: &str) -> Value {
        json!({"directive_id":"d1","type":"package.install","issuer":"alice","assignee":"bob",
               "status":status,"deadline":"t9","failure":null,"reason":null})
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
    fn the_error_line_says_how_it_ended_or_how_to_wait_again() {
        let mut d = directive("failed");
        d["failure"] = json!({"code":"E_DISK","message":"disk full"});
        let msg = ended_message(&d, Duration::from_secs(5));
        assert_eq!(msg, "directive d1 failed: E_DISK: disk full");
        let msg = ended_message(&directive("started"), Duration::from_secs(5));
        assert!(msg.contains("still started after waiting 5s"), "{msg}");
        let mut c = directive("canceled");
        c["reason"] = json!("not needed");
        assert_eq!(ended_message(&c, Duration::ZERO), "directive d1 was canceled: not needed");
    }
}
