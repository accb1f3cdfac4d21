//! How a directive is shown and addressed by the CLI: its path under `/v1/directives`, and its
//! summary (label–value lines of the fields that are set) or JSON — shared by the directive
//! verbs and `--wait`.
//!
//! Deliberately no request: the verbs call the bus; this only formats.

use serde_json::Value;

use super::http::segment;
use super::render::{cell, pairs_text, print};

/// `/v1/directives/{id}` followed by `tail`.
pub fn path(id: &str, tail: &str) -> String {
    format!("/v1/directives/{}{tail}", segment(id))
}

/// Prints a directive: the bus's JSON with `--json`, else `summary`.
pub fn print_directive(json: bool, directive: &Value, created: Option<bool>) {
    if json {
        print(true, directive, None, &[]);
    } else {
        print!("{}", summary(directive, created));
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
