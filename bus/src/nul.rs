//! The NUL guard: a string containing U+0000 is refused before anything is stored, wherever it
//! sits in a send (`to`, `type`, `correlation_id`, `dedupe_key`, every payload value and key) or
//! a plugin fact (`fact_type`, every `state` value and key).
//!
//! Why refuse rather than store: JSON allows `"\u0000"`, but PostgreSQL's `text` and `jsonb`
//! cannot hold it, so a stored NUL would read back differently in the two modes (or not at all).
//! Refusing it at the edge, in both modes, keeps every accepted request storable everywhere.
//!
//! Deliberately pure and shared: `send::decide_send` calls it for every send surface (HTTP,
//! WebSocket, MCP), the gateway's fact command for facts. It never rewrites what it refuses; the
//! projector's own encoding (U+FFFD) only covers events that reached the stream some other way.

use serde_json::Value;

use crate::error::{DomainError, DomainResult};

fn refused(what: String) -> DomainError {
    DomainError::invalid(format!("{what} contains a NUL character (U+0000), which the bus does not store"))
}

/// Refuses `value` if it contains U+0000; the message names `field`.
pub fn refuse_in_str(field: &str, value: &str) -> DomainResult<()> {
    if value.contains('\0') {
        return Err(refused(field.to_string()));
    }
    Ok(())
}

/// Refuses `value` if any string in it, or any object key, at any depth, contains U+0000. The
/// message names the first one found by its dotted path under `field` (keys as written, array
/// elements by index, as the redaction guard reports paths).
pub fn refuse_in_json(field: &str, value: &Value) -> DomainResult<()> {
    let mut path = field.to_string();
    walk(value, &mut path)
}

fn walk(value: &Value, path: &mut String) -> DomainResult<()> {
    let mark = path.len();
    match value {
        Value::String(s) => refuse_in_str(path, s),
        Value::Object(map) => {
            for (key, child) in map {
                if key.contains('\0') {
                    // The key itself is shown escaped ({:?}), so the message carries no NUL.
                    return Err(refused(format!("the key {key:?} under {path}")));
                }
                path.push('.');
                path.push_str(key);
                walk(child, path)?;
                path.truncate(mark);
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push('.');
                path.push_str(&i.to_string());
                walk(child, path)?;
                path.truncate(mark);
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(r: DomainResult<()>) -> String {
        match r {
            Err(DomainError::Invalid(m)) => m,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_nul_anywhere_in_a_value_is_refused_by_its_path() {
        assert_eq!(
            message(refuse_in_json("payload", &json!({"a": {"b": "x\u{0}y"}}))),
            "payload.a.b contains a NUL character (U+0000), which the bus does not store"
        );
        assert!(message(refuse_in_json("payload", &json!({"list": [1, "ok", ["\u{0}"]]})))
            .starts_with("payload.list.2.0 contains"));
        assert!(message(refuse_in_json("payload", &json!("\u{0}"))).starts_with("payload contains"));
        assert!(message(refuse_in_str("correlation_id", "c\u{0}")).starts_with("correlation_id contains"));
    }

    #[test]
    fn a_nul_in_a_key_is_refused_and_shown_escaped() {
        let m = message(refuse_in_json("state", &json!({"outer": {"k\u{0}ey": 1}})));
        assert_eq!(
            m,
            r#"the key "k\0ey" under state.outer contains a NUL character (U+0000), which the bus does not store"#
        );
        assert!(!m.contains('\0'));
    }

    #[test]
    fn everything_else_passes() {
        let ok = json!({"a": ["\\u0000 is six characters here", "\u{FFFD}", null, 1.5, true], "": {}});
        assert!(refuse_in_json("payload", &ok).is_ok());
        assert!(refuse_in_str("type", "Blocker").is_ok());
    }
}
