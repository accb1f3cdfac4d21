//! JSON shapes on the wire, in and out: the send request, the send response (CONTRACT §4), the
//! push frame (CONTRACT §5), a signal's row (CONTRACT §10) and timestamps.
//!
//! Deliberately does no I/O and decides nothing: it only converts between JSON and the domain
//! types, with specific messages for every malformed field.

use bus::catalog::DeliveryClass;
use bus::event::{PublishPath, RecipientState, SignalSent};
use bus::send::SendRequest;
use chrono::{DateTime, SecondsFormat, Utc};
use projector::queries::SignalRow;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::ApiError;

/// RFC 3339, UTC, microseconds: the precision the read models keep.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The fields a send may carry (besides `op` and `ref` on the WebSocket).
const SEND_FIELDS: &[&str] =
    &["to", "type", "payload", "delivery_class", "ttl_seconds", "correlation_id", "dedupe_key"];

fn opt_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}

fn req_string(map: &Map<String, Value>, key: &str) -> Result<String, ApiError> {
    opt_string(map, key)?.ok_or_else(|| ApiError::invalid(format!("{key} is required")))
}

/// Reads a send request from a JSON object. A `from` field is refused: the sender is always
/// the authenticated caller. Unknown fields are refused too, so a typo never goes unnoticed.
pub fn parse_send(map: &Map<String, Value>) -> Result<SendRequest, ApiError> {
    if map.contains_key("from") {
        return Err(ApiError::invalid("from is not allowed: the sender is always the authenticated identity"));
    }
    if let Some(k) = map.keys().find(|k| !SEND_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!("unknown field {k:?}")));
    }
    let delivery_class = match opt_string(map, "delivery_class")? {
        Some(s) => Some(DeliveryClass::parse(&s)?),
        None => None,
    };
    let ttl_seconds = match map.get("ttl_seconds") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64().ok_or_else(|| ApiError::invalid("ttl_seconds must be a whole number between 1 and 2592000"))?,
        ),
    };
    Ok(SendRequest {
        to: req_string(map, "to")?,
        signal_type: req_string(map, "type")?,
        payload: match map.get("payload") {
            None | Some(Value::Null) => json!({}),
            Some(v) => v.clone(),
        },
        delivery_class,
        ttl_seconds,
        correlation_id: opt_string(map, "correlation_id")?,
        dedupe_key: opt_string(map, "dedupe_key")?,
    })
}

/// The accepted-send response (CONTRACT §4), plus `redacted` when something was redacted.
#[derive(Debug)]
pub struct SendResponse<'a> {
    pub sent: &'a SignalSent,
    pub delivered: bool,
    pub queued: bool,
    pub resolved_to_session: Option<Uuid>,
}

impl SendResponse<'_> {
    pub fn to_json(&self) -> Value {
        let s = self.sent;
        let mut v = json!({
            "signal_id": s.signal_id,
            "delivered": self.delivered,
            "queued": self.queued,
            "recipient_state": s.recipient_state.as_str(),
            "delivery_class": s.delivery_class.as_str(),
            "created_at": ts(s.created_at),
            "expires_at": ts(s.expires_at),
            "resolved_to_session": self.resolved_to_session,
            "publish_path": s.publish_path.as_str(),
        });
        if !s.redacted.is_empty() {
            v["redacted"] = json!(s.redacted);
        }
        v
    }
}

/// `delivered`/`queued` of a fresh send: a push is reported delivered, anything else queued.
pub fn fresh_flags(path: PublishPath) -> (bool, bool) {
    let delivered = path == PublishPath::PushedToWs;
    (delivered, !delivered)
}

/// The bounce error of a sync send to an unavailable recipient.
pub fn bounce(signal_id: Uuid, recipient_state: RecipientState) -> ApiError {
    ApiError::RecipientUnavailable { recipient_state, signal_id }
}

/// The push frame (CONTRACT §5). Written by hand rather than through a `Value`: the payload is
/// stored as JSON text already, and parsing it only to print it again was a per-delivery cost.
/// Keys come out in the order a `Value` prints them (sorted), so the frame is byte-for-byte what
/// it was; a stored payload that is not valid JSON still goes out as `null`.
pub fn signal_frame(s: &SignalSent, redelivered: bool) -> String {
    use std::fmt::Write;
    let str_json = |v: &str| Value::from(v).to_string();
    let payload =
        if serde_json::from_str::<serde::de::IgnoredAny>(&s.payload).is_ok() { s.payload.as_str() } else { "null" };
    let correlation = s.correlation_id.as_deref().map_or_else(|| "null".to_string(), str_json);
    let mut out = String::with_capacity(300 + s.payload.len());
    let _ = write!(
        out,
        r#"{{"op":"signal","signal":{{"category":{},"correlation_id":{},"created_at":"{}","delivery_class":{},"expires_at":"{}","from":{},"id":"{}","payload":{},"priority":{},"redelivered":{},"to":{},"type":{}}}}}"#,
        str_json(s.category.as_str()),
        correlation,
        ts(s.created_at),
        str_json(s.delivery_class.as_str()),
        ts(s.expires_at),
        str_json(&s.from),
        s.signal_id,
        payload,
        s.priority,
        redelivered,
        str_json(&s.to),
        str_json(&s.signal_type),
    );
    out
}

/// A pending signal as the inbox lists it: the push frame's `signal` object (CONTRACT §5),
/// built from its row; `redelivered` when it was handed out before and never acked.
pub fn row_signal(r: &SignalRow) -> Value {
    json!({
        "id": r.id,
        "from": r.from_identity,
        "to": r.to_identity,
        "type": r.signal_type,
        "category": r.category,
        "priority": r.priority,
        "payload": r.payload,
        "delivery_class": r.delivery_class,
        "created_at": ts(r.created_at),
        "expires_at": r.expires_at.map(ts),
        "correlation_id": r.correlation_id,
        "redelivered": r.delivered_at.is_some(),
    })
}

/// A signal's row with the CONTRACT §10 columns.
pub fn row_json(r: &SignalRow) -> Value {
    let t = |v: Option<DateTime<Utc>>| v.map(ts);
    json!({
        "id": r.id,
        "tenant": r.tenant,
        "from_identity": r.from_identity,
        "to_identity": r.to_identity,
        "signal_type": r.signal_type,
        "category": r.category,
        "priority": r.priority,
        "payload": r.payload,
        "delivery_class": r.delivery_class,
        "recipient_state": r.recipient_state,
        "publish_path": r.publish_path,
        "correlation_id": r.correlation_id,
        "created_at": ts(r.created_at),
        "expires_at": t(r.expires_at),
        "delivered_at": t(r.delivered_at),
        "expired_at": t(r.expired_at),
        "recalled_at": t(r.recalled_at),
        "delivered_via": r.delivered_via,
        "resolved_to_session": r.resolved_to_session,
        "acked_at": t(r.acked_at),
        "last_event_seq": r.last_event_seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn push_frames_match_the_value_encoding() {
        let now = Utc::now();
        let mut sent = SignalSent {
            signal_id: Uuid::new_v4(),
            from: "al\"ice".into(),
            to: "bob".into(),
            signal_type: "StatusUpdate".into(),
            category: bus::catalog::Category::Blocker,
            priority: 3,
            payload: json!({"z": 1, "a": ["x\n", {"k": null}]}).to_string(),
            delivery_class: DeliveryClass::Async,
            created_at: now,
            expires_at: now,
            recipient_state: RecipientState::Available,
            publish_path: bus::event::PublishPath::PushedToWs,
            correlation_id: Some("c-1".into()),
            dedupe_key: None,
            redacted: vec![],
            resolved_to_session: None,
        };
        let expected = |s: &SignalSent, p: Value, r: bool| {
            json!({"op": "signal", "signal": {
                "id": s.signal_id, "from": s.from, "to": s.to, "type": s.signal_type,
                "category": s.category.as_str(), "priority": s.priority, "payload": p,
                "delivery_class": s.delivery_class.as_str(), "created_at": ts(s.created_at),
                "expires_at": ts(s.expires_at), "correlation_id": s.correlation_id, "redelivered": r,
            }})
            .to_string()
        };
        let p: Value = serde_json::from_str(&sent.payload).unwrap();
        assert_eq!(signal_frame(&sent, true), expected(&sent, p, true));
        sent.correlation_id = None;
        sent.payload = "{not json".into();
        assert_eq!(signal_frame(&sent, false), expected(&sent, Value::Null, false));
    }

    #[test]
    fn send_requests_parse_with_specific_errors() {
        let ok = parse_send(&obj(json!({"to": "bob", "type": "Blocker", "ttl_seconds": 5}))).unwrap();
        assert_eq!(ok.payload, json!({}));
        assert_eq!(ok.ttl_seconds, Some(5));
        let msg = |v| parse_send(&obj(v)).unwrap_err().to_string();
        assert!(msg(json!({"to": "bob", "type": "X", "from": "eve"})).starts_with("from is not allowed"));
        assert_eq!(msg(json!({"type": "X"})), "to is required");
        assert_eq!(msg(json!({"to": 1, "type": "X"})), "to must be a string");
        assert!(msg(json!({"to": "b", "type": "X", "ttl_seconds": -1})).starts_with("ttl_seconds must be"));
        assert!(msg(json!({"to": "b", "type": "X", "delivery_class": "soon"})).contains("sync or async"));
        assert_eq!(msg(json!({"to": "b", "type": "X", "tto": 1})), "unknown field \"tto\"");
    }
}
