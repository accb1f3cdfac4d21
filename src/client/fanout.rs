//! The many-signal answers of CONTRACT §15: a send to `@group` (one line per member: accepted
//! or why not) and `signal recall --fanout ID | --correlation ID` (one outcome per signal).
//!
//! Deliberately no retry or second send of its own: a member the bus did not accept is reported
//! (and makes the exit code 1); sending again, with the same `--dedupe-key`, is the caller's
//! choice, and the bus answers the members already sent to with their original signals.

use reqwest::Method;
use serde_json::{json, Value};

use super::args::Conn;
use super::http::{call, Failure};
use super::render::{print, table_text};

/// Whether a send's answer is a fan-out (it carries a `fanout_id`).
pub fn is_fanout(answer: &Value) -> bool {
    answer.get("fanout_id").is_some_and(Value::is_string)
}

/// One row per member of a fan-out answer: `to`, `signal_id`, `outcome` (delivered, queued,
/// scheduled, accepted, or the error code) and `detail` (the publish path, or the error message).
fn member_rows(answer: &Value) -> Vec<Value> {
    let results = answer.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    results
        .iter()
        .map(|r| {
            let to = r.get("to").cloned().unwrap_or(Value::Null);
            match r.get("error") {
                Some(e) => json!({
                    "to": to,
                    "signal_id": e.get("signal_id").cloned().unwrap_or(Value::Null),
                    "outcome": e.get("code").cloned().unwrap_or(json!("error")),
                    "detail": e.get("message").cloned().unwrap_or(Value::Null),
                }),
                None => {
                    let flag = |k: &str| r.get(k).and_then(Value::as_bool) == Some(true);
                    let path = r.get("publish_path").and_then(Value::as_str);
                    let outcome = if flag("delivered") {
                        "delivered"
                    } else if path == Some("scheduled") {
                        "scheduled"
                    } else if flag("queued") {
                        "queued"
                    } else {
                        "accepted"
                    };
                    json!({"to": to, "signal_id": r.get("signal_id"), "outcome": outcome, "detail": path})
                }
            }
        })
        .collect()
}

/// A fan-out answer as text: the `fanout_id`, then one line per member.
pub fn fanout_text(answer: &Value) -> String {
    let id = answer.get("fanout_id").and_then(Value::as_str).unwrap_or("-");
    let rows = member_rows(answer);
    let mut out = format!("fanout_id  {id}\n");
    if rows.is_empty() {
        out.push_str("(the group has no member but the sender: nothing was sent)\n");
    } else {
        out.push_str(&table_text(&rows, &["to", "signal_id", "outcome", "detail"]));
    }
    out
}

/// Prints a fan-out answer; fails (exit 1) naming the members whose entry is an error.
pub fn show_fanout(json: bool, answer: &Value) -> Result<(), Failure> {
    if json {
        print(true, answer, None, &[]);
    } else {
        print!("{}", fanout_text(answer));
    }
    missed(answer)
}

/// `Err` naming the members the bus did not accept the signal for, if any.
fn missed(answer: &Value) -> Result<(), Failure> {
    let rows = member_rows(answer);
    let failed: Vec<String> = answer
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .zip(&rows)
        .filter(|(r, _)| r.get("error").is_some())
        .map(|(_, row)| format!("{} ({})", cell_str(&row["to"]), cell_str(&row["outcome"])))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let mut message =
        format!("{} of {} members were not sent the signal: {}", failed.len(), rows.len(), failed.join(", "));
    if failed.iter().any(|f| f.contains("recipient_unavailable")) {
        message.push_str(
            "; a sync signal bounces for members who are not connected (send with --delivery-class async to queue it)",
        );
    }
    Err(Failure::Failed(message))
}

fn cell_str(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// `POST /v1/signals/recall` by `fanout_id` or `correlation_id`: one outcome per signal.
pub async fn recall_many(conn: &Conn, key: &str, value: &str) -> Result<(), Failure> {
    let v = call(conn, Method::POST, "/v1/signals/recall", Some(json!({ key: value }))).await?;
    let rows = v.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
    if conn.json {
        print(true, &v, None, &[]);
    } else {
        print!("{}", table_text(&rows, &["signal_id", "to", "outcome"]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Value {
        json!({"fanout_id":"f1","to":"@reviewers","results":[
            {"to":"bob","signal_id":"s1","delivered":true,"queued":false,"publish_path":"direct_session"},
            {"to":"carol","signal_id":"s2","delivered":false,"queued":true,"publish_path":"queued_offline"},
            {"to":"dave","error":{"code":"recipient_unavailable","message":"recipient is not_available_offline","signal_id":"s3"}},
            {"to":"erin","error":{"code":"unavailable"}}]})
    }

    #[test]
    fn a_fanout_prints_one_line_per_member() {
        assert!(is_fanout(&answer()) && !is_fanout(&json!({"signal_id":"s"})));
        let text = fanout_text(&answer());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "fanout_id  f1");
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["TO", "SIGNAL_ID", "OUTCOME", "DETAIL"]);
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["bob", "s1", "delivered", "direct_session"]);
        assert_eq!(lines[3].split_whitespace().collect::<Vec<_>>(), ["carol", "s2", "queued", "queued_offline"]);
        assert!(lines[4].starts_with("dave   s3         recipient_unavailable  recipient is"), "{text}");
        assert_eq!(lines[5].split_whitespace().collect::<Vec<_>>(), ["erin", "-", "unavailable", "-"]);
        assert_eq!(lines.len(), 6);
    }

    #[test]
    fn members_not_sent_to_make_it_fail_and_an_empty_group_does_not() {
        let e = missed(&answer()).unwrap_err();
        let Failure::Failed(m) = e else { panic!("{e:?}") };
        assert!(
            m.starts_with("2 of 4 members were not sent the signal: dave (recipient_unavailable), erin (unavailable)")
        );
        assert!(m.contains("--delivery-class async"), "{m}");
        let empty = json!({"fanout_id":"f2","to":"@solo","results":[]});
        assert!(missed(&empty).is_ok());
        assert!(fanout_text(&empty).contains("no member but the sender"));
    }
}
