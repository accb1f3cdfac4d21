//! Reading requests: a send's fields and an ack's ids, from the JSON object of an HTTP body, a
//! WebSocket frame or an MCP call's arguments, with a specific message for every malformed field.
//!
//! Deliberately decides nothing: what a well-formed send means is `bus::send`'s call (a
//! scheduled one's too: both `deliver_after_seconds` and `deliver_at` are handed over as given,
//! and `bus::schedule` resolves and judges them against the clock).

use bus::catalog::DeliveryClass;
use bus::send::SendRequest;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::ApiError;

/// Deepest nesting of arrays and objects accepted in a signal payload or a plugin fact state
/// (`{}` is one level). Far beyond any real message, and far inside serde_json's recursion
/// limit (128) once a payload sits inside a push frame or an answer — so every client that
/// parses with default settings can read every signal the bus accepts.
pub const MAX_JSON_DEPTH: usize = 64;

/// Refuses a value nested deeper than `MAX_JSON_DEPTH`, naming `field`.
pub fn check_depth(field: &str, v: &Value) -> Result<(), ApiError> {
    // Iterative: the check must not itself be a recursion an input can deepen.
    let mut stack = vec![(v, 1usize)];
    while let Some((v, level)) = stack.pop() {
        if !(v.is_array() || v.is_object()) {
            continue;
        }
        if level > MAX_JSON_DEPTH {
            return Err(ApiError::invalid(format!(
                "{field} is nested more than {MAX_JSON_DEPTH} levels deep (arrays and objects); the limit is {MAX_JSON_DEPTH}"
            )));
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, level + 1))),
            Value::Object(m) => stack.extend(m.values().map(|c| (c, level + 1))),
            _ => {}
        }
    }
    Ok(())
}

/// The fields a send may carry (besides `op` and `ref` on the WebSocket).
const SEND_FIELDS: &[&str] = &[
    "to",
    "type",
    "payload",
    "delivery_class",
    "ttl_seconds",
    "correlation_id",
    "dedupe_key",
    "deliver_after_seconds",
    "deliver_at",
];

/// A whole number of seconds (`60.0` counts: JSON Schema calls it an integer, and so do
/// clients); `range` names the bounds in the message. The bounds themselves are `bus`'s rule.
fn opt_seconds(map: &Map<String, Value>, key: &str, range: &str) -> Result<Option<u64>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(f)).map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("{key} must be a whole number between {range}"))),
    }
}

/// An RFC 3339 instant (`2026-11-21T09:30:00Z`, any offset).
fn opt_instant(map: &Map<String, Value>, key: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    match opt_string(map, key)? {
        None => Ok(None),
        Some(s) => DateTime::parse_from_rfc3339(&s).map(|t| Some(t.with_timezone(&Utc))).map_err(|_| {
            ApiError::invalid(format!("{key} must be an RFC 3339 timestamp such as 2026-11-21T09:30:00Z"))
        }),
    }
}

fn opt_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}

/// Reads a send request from a JSON object. A `from` field is refused: the sender is always
/// the authenticated caller. Unknown fields are refused too, so a typo never goes unnoticed.
pub fn parse_send(mut map: Map<String, Value>) -> Result<SendRequest, ApiError> {
    if map.contains_key("from") {
        return Err(ApiError::invalid("from is not allowed: the sender is always the authenticated identity"));
    }
    if let Some(k) = map.keys().find(|k| !SEND_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!("unknown field {k:?}")));
    }
    let delivery_class = match opt_string(&map, "delivery_class")? {
        Some(s) => Some(DeliveryClass::parse(&s)?),
        None => None,
    };
    let ttl_seconds = opt_seconds(&map, "ttl_seconds", "1 and 2592000")?;
    let deliver_after_seconds = opt_seconds(&map, "deliver_after_seconds", "1 and 2592000 (30 days)")?;
    let deliver_at = opt_instant(&map, "deliver_at")?;
    if let Some(payload) = map.get("payload") {
        check_depth("payload", payload)?;
    }
    // The map is the request's own: its strings and payload move into the request, uncopied.
    Ok(SendRequest {
        to: take_required(&mut map, "to")?,
        signal_type: take_required(&mut map, "type")?,
        payload: match map.remove("payload") {
            None | Some(Value::Null) => json!({}),
            Some(v) => v,
        },
        delivery_class,
        ttl_seconds,
        correlation_id: take_string(&mut map, "correlation_id")?,
        dedupe_key: take_string(&mut map, "dedupe_key")?,
        deliver_after_seconds,
        deliver_at,
    })
}

/// `opt_string`, moving the string out of the map instead of copying it.
fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}

fn take_required(map: &mut Map<String, Value>, key: &str) -> Result<String, ApiError> {
    take_string(map, key)?.ok_or_else(|| ApiError::invalid(format!("{key} is required")))
}

/// What a bulk recall names (CONTRACT §15): the caller's signals of one fan-out, or of one
/// conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum RecallMany {
    Fanout(Uuid),
    Correlation(String),
}

/// Reads a bulk recall's arguments: exactly one of `fanout_id` (a uuid) and `correlation_id`.
pub fn parse_recall_many(map: &Map<String, Value>) -> Result<RecallMany, ApiError> {
    if let Some(k) = map.keys().find(|k| !matches!(k.as_str(), "fanout_id" | "correlation_id")) {
        return Err(ApiError::invalid(format!(
            "unknown field {:?} (a bulk recall takes fanout_id or correlation_id)",
            truncate(k, 64)
        )));
    }
    // A null is no value, as in every other body.
    let given = |k: &str| map.get(k).filter(|v| !v.is_null());
    match (given("fanout_id"), given("correlation_id")) {
        (Some(Value::String(id)), None) => {
            canonical_uuid(id).map(RecallMany::Fanout).ok_or_else(|| ApiError::invalid("fanout_id must be a uuid"))
        }
        (None, Some(Value::String(c))) if !c.is_empty() => Ok(RecallMany::Correlation(c.clone())),
        (Some(_), Some(_)) => Err(ApiError::invalid("give fanout_id or correlation_id, not both")),
        (None, None) => Err(ApiError::invalid("fanout_id or correlation_id is required")),
        _ => Err(ApiError::invalid("fanout_id must be a uuid and correlation_id a non-empty string")),
    }
}

/// Most signal ids one ack (frame, HTTP body or MCP call) may carry.
pub const MAX_ACK_IDS: usize = 1000;

/// Reads an ack's arguments — `{"signal_ids": [...]}`, 1 to `MAX_ACK_IDS` uuids, nothing else —
/// naming the first id that is not one. The one ack parser: HTTP, WebSocket and MCP share it.
pub fn parse_ack_ids(map: &Map<String, Value>) -> Result<Vec<Uuid>, ApiError> {
    if let Some(k) = map.keys().find(|k| k.as_str() != "signal_ids") {
        return Err(ApiError::invalid(format!("unknown field {:?}", truncate(k, 64))));
    }
    let Some(ids) = map.get("signal_ids") else {
        return Err(ApiError::invalid("signal_ids is required"));
    };
    let Value::Array(ids) = ids else { return Err(ApiError::invalid("signal_ids must be an array")) };
    if ids.is_empty() || ids.len() > MAX_ACK_IDS {
        return Err(ApiError::invalid(format!("signal_ids must hold 1 to {MAX_ACK_IDS} ids")));
    }
    ids.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .and_then(canonical_uuid)
                .ok_or_else(|| ApiError::invalid(format!("signal_ids[{i}] is not a uuid")))
        })
        .collect()
}

/// An id as the bus writes it: 32 hex digits in groups of 8-4-4-4-12 separated by hyphens, in
/// any case. `Uuid::parse_str` also takes the braced, `urn:uuid:` and hyphen-less spellings;
/// accepting those would give one signal several names, so nothing the bus reads takes them.
pub fn canonical_uuid(text: &str) -> Option<Uuid> {
    let b = text.as_bytes();
    let shaped = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    if shaped {
        Uuid::parse_str(text).ok()
    } else {
        None
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hyphenated_spelling_of_an_id_is_an_id() {
        let id = "0f0e0d0c-0b0a-0908-0706-050403020100";
        let want = Uuid::parse_str(id).ok();
        assert!(want.is_some());
        assert_eq!(canonical_uuid(id), want);
        assert_eq!(canonical_uuid(&id.to_uppercase()), want, "any case");
        for other in [
            format!("{{{id}}}"),
            format!("urn:uuid:{id}"),
            id.replace('-', ""),
            format!(" {id}"),
            "0f0e0d0c-0b0a-0908-0706-05040302010g".to_string(),
            "0f0e0d0c+0b0a-0908-0706-050403020100".to_string(),
            String::new(),
        ] {
            assert_eq!(canonical_uuid(&other), None, "{other}");
        }
    }
}
