//! What the server enforces, said in JSON Schema: the name patterns of `bus::names`, the enums
//! of the query parameters, the text rules of stored strings, and one schema per parameter
//! name, applied wherever that name appears (path or query).
//!
//! Deliberately one table, checked against the validators themselves (`tests`), so a fuzzer
//! reading the document sends what the server takes and expects refusals where it refuses.

use serde_json::{json, Value};

/// `bus::names::validate_identity`.
pub const IDENTITY: &str = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$";
/// `bus::names::validate_tenant`.
pub const TENANT: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";
/// `bus::names::validate_signal_type`.
pub const SIGNAL_TYPE: &str = "^[A-Za-z][A-Za-z0-9_.]{0,63}$";
/// `bus::names::validate_plugin`: `/`-separated identity-shaped segments, at most 256 bytes
/// (`PLUGIN_MAX`; every allowed character is one byte).
pub const PLUGIN: &str = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}(/[A-Za-z0-9][A-Za-z0-9._:@-]{0,127})*$";
pub const PLUGIN_MAX: u64 = 256;
/// Text the bus stores may not contain U+0000 (PostgreSQL cannot hold it, so neither mode takes it).
pub const NO_NUL: &str = "^[^\\x00]*$";

/// The schema of a parameter named `name`, wherever it appears; `None` keeps the generated one.
pub fn param(name: &str) -> Option<Value> {
    Some(match name {
        "id" => json!({"type": "string", "format": "uuid"}),
        "identity" => json!({"type": "string", "pattern": IDENTITY}),
        "tenant" => json!({"type": "string", "pattern": TENANT}),
        "plugin" => json!({"type": "string", "pattern": PLUGIN, "maxLength": PLUGIN_MAX}),
        "role" => json!({"type": "string", "enum": ["sent", "received"]}),
        "status" => json!({"type": "string", "enum": ["pending", "delivered", "expired", "recalled"]}),
        "kind" => json!({"type": "string", "enum": ["daemon", "shim", "interactive"]}),
        "drain" => json!({"type": "boolean"}),
        "name" => json!({"type": "string", "pattern": "^@?[a-z0-9][a-z0-9_.-]{0,62}$"}),
        "cursor" => json!({"type": "string", "pattern": crate::wire::cursor::PATTERN}),
        // `GET /v1/inbox?wait=` (CONTRACT §16).
        "wait" => json!({"type": "integer", "minimum": 0, "maximum": 60}),
        "correlation_id" => json!({"type": "string", "minLength": 1, "maxLength": 64, "pattern": NO_NUL}),
        _ => return None,
    })
}

/// A group name with its `@` (CONTRACT §15).
pub const GROUP: &str = "^@[a-z0-9][a-z0-9_.-]{0,62}$";

/// The schema of a parameter of a directive operation, where it differs from `param`'s.
pub fn directive_param(name: &str) -> Option<Value> {
    Some(match name {
        "role" => json!({"type": "string", "enum": ["issued", "assigned"]}),
        "status" => {
            json!({"type": "string", "enum": ["open", "requested", "started", "completed", "failed", "rejected", "canceled", "expired"]})
        }
        "type" => json!({"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.]{0,63}$"}),
        "before" => json!({"type": "string", "pattern": crate::wire::cursor::PATTERN}),
        "action" => json!({"type": "string", "enum": crate::wire::directives::ACTIONS}),
        "wait" => json!({"type": "integer", "minimum": 0, "maximum": 60}),
        _ => return None,
    })
}

/// `POST /v1/admin/signals/expire`'s body (`bus::force_expire::ExpireFilter::check` and
/// `wire::expire`): a tenant and at least one other filter, each of its type when present.
pub fn force_expire_body() -> Value {
    use bus::force_expire::{MAX_OLDER_THAN_SECONDS, MAX_SIGNAL_IDS};
    let filters = ["to", "from", "signal_type", "older_than_seconds", "signal_ids"];
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["tenant"],
        "description": "filters combined with AND: tenant and at least one other (a tenant alone would expire everything); age counts from created_at",
        "properties": {
            "tenant": {"type": "string", "pattern": TENANT},
            "to": {"type": "string", "pattern": IDENTITY},
            "from": {"type": "string", "pattern": IDENTITY},
            "signal_type": {"type": "string", "pattern": SIGNAL_TYPE},
            "older_than_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_OLDER_THAN_SECONDS},
            "signal_ids": {"type": "array", "minItems": 1, "maxItems": MAX_SIGNAL_IDS,
                "items": {"type": "string", "format": "uuid"}},
            "dry_run": {"type": "boolean", "description": "expire nothing; list what would expire"}
        },
        "anyOf": filters.iter().map(|f| json!({"required": [f]})).collect::<Vec<_>>()
    })
}

/// A token label (`tokens::check_label`): at most 128 characters, no control characters.
fn label() -> Value {
    json!({"type": ["string", "null"], "maxLength": crate::tokens::MAX_LABEL_CHARS, "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]*$"})
}

/// `POST /v1/agents/{identity}/tokens`'s body (`api/http/tokens`): every field optional.
pub fn issue_token_body() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "scopes": {"type": ["array", "null"], "minItems": 1,
                "items": {"type": "string", "enum": bus::scope::ScopeSet::all().names()},
                "description": "omitted or null: every scope"},
            "expires_in_seconds": {"type": ["integer", "null"], "minimum": 1,
                "maximum": crate::tokens::MAX_EXPIRES_IN_SECONDS, "description": "omitted or null: no expiry"},
            "label": label(),
        }
    })
}

/// `POST /v1/admin/tokens`'s body.
pub fn new_admin_token_body() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["tenant"],
        "properties": {"tenant": {"type": "string", "pattern": TENANT}, "label": label()}
    })
}

/// Any JSON value whose strings and keys hold no U+0000: a send's `payload`, a fact's `state`.
pub fn nul_free_json() -> Value {
    let me = json!({"$ref": "#/components/schemas/NulFreeJson"});
    json!({
        "description": "any JSON value; no string or key may contain U+0000",
        "anyOf": [
            {"type": ["null", "boolean", "number"]},
            {"type": "string", "pattern": NO_NUL},
            {"type": "array", "items": me},
            {"type": "object", "propertyNames": {"pattern": NO_NUL}, "additionalProperties": me}
        ]
    })
}

#[cfg(test)]
mod tests {
    use bus::names::{validate_identity, validate_plugin, validate_signal_type, validate_tenant};

    use super::*;

    fn matches(pattern: &str, s: &str) -> bool {
        jsonschema::is_valid(&json!({"type": "string", "pattern": pattern}), &json!(s))
    }

    #[test]
    fn the_declared_patterns_accept_exactly_what_the_validators_accept() {
        let long = "a".repeat(128);
        let too_long = "a".repeat(129);
        let samples = [
            "alice",
            "Alice.B-c_d:e@f",
            "9",
            "a/b",
            "a//b",
            "/a",
            "a/",
            ".a",
            "-a",
            "_a",
            "a b",
            "é",
            "",
            "\n",
            "alice\n",
            "default",
            "Default",
            "t-1_x",
            "X9.y_z",
            "9x",
            &long,
            &too_long,
        ];
        for s in samples {
            assert_eq!(matches(IDENTITY, s), validate_identity(s).is_ok(), "identity {s:?}");
            assert_eq!(matches(TENANT, s), validate_tenant(s).is_ok(), "tenant {s:?}");
            assert_eq!(matches(SIGNAL_TYPE, s), validate_signal_type(s).is_ok(), "type {s:?}");
            let plugin = jsonschema::is_valid(&param("plugin").unwrap(), &json!(s));
            assert_eq!(plugin, validate_plugin(s).is_ok(), "plugin {s:?}");
        }
        let plugin = jsonschema::is_valid(&param("plugin").unwrap(), &json!(format!("{long}/{long}/x")));
        assert!(!plugin && validate_plugin(&format!("{long}/{long}/x")).is_err(), "over 256 bytes");
        assert!(matches(NO_NUL, "a\nb") && !matches(NO_NUL, "a\u{0}b"));
    }
}
