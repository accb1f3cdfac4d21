//! The redaction guard (CONTRACT §4): secrets in a payload are replaced before anything is stored.
//!
//! Deliberately does not judge values, only key names: a value is a secret because of its key.

use serde_json::Value;

const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_token",
    "refresh_token",
    "authorization",
    "private_key",
    "client_secret",
];

pub const REDACTED: &str = "[REDACTED]";

fn is_secret(key: &str) -> bool {
    SECRET_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
}

/// Replaces, at any depth, the value of every secret key by `"[REDACTED]"` and returns the
/// dotted paths replaced (keys as written, array elements by index), in document order.
pub fn redact(payload: &mut Value) -> Vec<String> {
    let mut paths = Vec::new();
    walk(payload, &mut String::new(), &mut paths);
    paths
}

fn walk(value: &mut Value, path: &mut String, out: &mut Vec<String>) {
    let mark = path.len();
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                if is_secret(key) {
                    *child = Value::String(REDACTED.to_string());
                    out.push(path.clone());
                } else {
                    walk(child, path, out);
                }
                path.truncate(mark);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&i.to_string());
                walk(child, path, out);
                path.truncate(mark);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn given_nested_secrets_when_redacted_then_values_are_replaced_and_paths_reported() {
        let mut p = json!({
            "Password": "hunter2",
            "db": {"API_KEY": "k", "host": "h"},
            "list": [{"token": "t"}, {"ok": 1}],
            "tokenizer": "kept"
        });
        let paths = redact(&mut p);
        assert_eq!(p["Password"], REDACTED);
        assert_eq!(p["db"]["API_KEY"], REDACTED);
        assert_eq!(p["db"]["host"], "h");
        assert_eq!(p["list"][0]["token"], REDACTED);
        assert_eq!(p["tokenizer"], "kept");
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(sorted, vec!["Password", "db.API_KEY", "list.0.token"]);
    }

    #[test]
    fn given_a_clean_payload_when_redacted_then_nothing_changes() {
        let mut p = json!({"a": [1, 2, {"b": "c"}]});
        let before = p.clone();
        assert!(redact(&mut p).is_empty());
        assert_eq!(p, before);
    }

    #[test]
    fn secret_objects_are_replaced_whole() {
        let mut p = json!({"secret": {"nested": 1}});
        assert_eq!(redact(&mut p), vec!["secret"]);
        assert_eq!(p["secret"], REDACTED);
    }
}
