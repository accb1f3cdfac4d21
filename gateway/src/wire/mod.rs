//! JSON shapes on the wire, in and out: the requests (`requests.rs`: the one parser of a send
//! and of a list of ack ids, shared by HTTP, WebSocket and MCP; `lists.rs`: a signal list's
//! query), the send response (CONTRACT §4, `send_answer.rs`), the
//! push frame (CONTRACT §5), a signal's row (CONTRACT §10) and timestamps.
//!
//! Deliberately does no I/O and decides nothing: it only converts between JSON and the domain
//! types, with specific messages for every malformed field.

mod lists;
mod requests;
mod send_answer;

pub mod cursor;
pub mod directives;
pub mod expire;

pub mod outbound;

pub use lists::SignalList;
pub use outbound::Outbound;
pub use requests::{
    canonical_uuid, check_depth, parse_ack_ids, parse_recall_many, parse_send, RecallMany, MAX_ACK_IDS, MAX_JSON_DEPTH,
};
pub use send_answer::{SendAnswer, SendResponse};

use std::borrow::Cow;

use bus::event::ts::Rfc3339;
use bus::event::{RecipientState, SignalSent};
use chrono::{DateTime, SecondsFormat, Utc};
use projector::queries::SignalRow;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::error::ApiError;

/// RFC 3339, UTC, microseconds: the precision the read models keep.
pub fn ts(t: DateTime<Utc>) -> String {
    ts_text(&t).as_str().to_string()
}

/// `ts`'s text on the stack, for frames written straight into their buffer.
pub fn ts_text(t: &DateTime<Utc>) -> Rfc3339 {
    Rfc3339::new(t, SecondsFormat::Micros)
}

/// A recorded plugin fact: its per-plugin `seq`, and the paths of `state` the redaction guard
/// replaced (CONTRACT §4, applied to facts as to payloads).
#[derive(Debug, Clone, PartialEq)]
pub struct FactRecorded {
    pub seq: u64,
    pub redacted: Vec<String>,
}

/// The answer to a recorded plugin fact: `{"seq"}`, plus `redacted` when the guard replaced
/// something in its state (as a send's answer does).
pub fn fact_recorded(f: &FactRecorded) -> Value {
    let mut v = json!({ "seq": f.seq });
    if !f.redacted.is_empty() {
        v["redacted"] = json!(f.redacted);
    }
    v
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
    let payload =
        if serde_json::from_str::<serde::de::IgnoredAny>(&s.payload).is_ok() { s.payload.as_str() } else { "null" };
    let mut out: Vec<u8> = Vec::with_capacity(320 + s.payload.len());
    // Strings are escaped straight into the frame (`json_str`), not built one by one first; the
    // literal parts are copied, not formatted (`write!` went through `core::fmt` piece by piece).
    let json_str = |out: &mut Vec<u8>, v: &str| serde_json::to_writer(out, v).expect("a str always serializes");
    let raw = |out: &mut Vec<u8>, parts: &[&[u8]]| parts.iter().for_each(|p| out.extend_from_slice(p));
    raw(&mut out, &[br#"{"op":"signal","signal":{"category":"#]);
    json_str(&mut out, s.category.as_str());
    raw(&mut out, &[br#","correlation_id":"#]);
    match s.correlation_id.as_deref() {
        Some(c) => json_str(&mut out, c),
        None => out.extend_from_slice(b"null"),
    }
    let (created, expires) = (ts_text(&s.created_at), ts_text(&s.expires_at));
    raw(&mut out, &[br#","created_at":""#, created.as_str().as_bytes(), br#"","delivery_class":"#]);
    json_str(&mut out, s.delivery_class.as_str());
    raw(&mut out, &[br#","expires_at":""#, expires.as_str().as_bytes(), br#"","from":"#]);
    json_str(&mut out, &s.from);
    let id = s.signal_id.hyphenated();
    let mut id_text = Uuid::encode_buffer();
    let priority = s.priority.to_string();
    let redelivered: &[u8] = if redelivered { b"true" } else { b"false" };
    raw(
        &mut out,
        &[
            br#","id":""#,
            id.encode_lower(&mut id_text).as_bytes(),
            br#"","payload":"#,
            payload.as_bytes(),
            br#","priority":"#,
            priority.as_bytes(),
            br#","redelivered":"#,
            redelivered,
            br#","to":"#,
        ],
    );
    json_str(&mut out, &s.to);
    out.extend_from_slice(br#","type":"#);
    json_str(&mut out, &s.signal_type);
    out.extend_from_slice(b"}}");
    String::from_utf8(out).expect("every part is UTF-8")
}

/// A signal as an HTTP answer hands it out: the push frame's `signal` object (CONTRACT §5),
/// typed, so a drain serializes what it recorded exactly once and never reads it back. Fields
/// are declared in the order the push frame prints them.
#[derive(Debug, Serialize)]
pub struct PushSignal {
    pub category: String,
    pub correlation_id: Option<String>,
    pub created_at: String,
    pub delivery_class: String,
    pub expires_at: Option<String>,
    pub from: String,
    pub id: Uuid,
    pub payload: Payload,
    pub priority: i16,
    pub redelivered: bool,
    pub to: String,
    #[serde(rename = "type")]
    pub signal_type: String,
}

/// A signal's payload: the stored JSON text as it is (drains), or a value a read model parsed.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Payload {
    Raw(Box<RawValue>),
    Value(Value),
}

impl PushSignal {
    /// The signal a delivery recorded. The payload text goes out verbatim: a `RawValue` only
    /// checks that it is JSON (without building it, so nesting depth is no limit); stored text
    /// that is not JSON goes out as `null`, as in a push frame.
    pub fn delivered(sent: Cow<'_, SignalSent>, redelivered: bool) -> Self {
        let s = sent.into_owned();
        let payload = RawValue::from_string(s.payload).map_or(Payload::Value(Value::Null), Payload::Raw);
        PushSignal {
            category: s.category.as_str().to_string(),
            correlation_id: s.correlation_id,
            created_at: ts(s.created_at),
            delivery_class: s.delivery_class.as_str().to_string(),
            expires_at: Some(ts(s.expires_at)),
            from: s.from,
            id: s.signal_id,
            payload,
            priority: s.priority,
            redelivered,
            to: s.to,
            signal_type: s.signal_type,
        }
    }

    /// A pending signal as the inbox lists it, from its row; `redelivered` when it was handed
    /// out before and never acked.
    pub fn pending(r: SignalRow) -> Self {
        PushSignal {
            category: r.category,
            correlation_id: r.correlation_id,
            created_at: ts(r.created_at),
            delivery_class: r.delivery_class,
            expires_at: r.expires_at.map(ts),
            from: r.from_identity,
            id: r.id,
            payload: Payload::Value(r.payload),
            priority: r.priority,
            redelivered: r.delivered_at.is_some(),
            to: r.to_identity,
            signal_type: r.signal_type,
        }
    }
}

/// A signal's row with the CONTRACT §10 columns (and §16's `deliver_at`, with `released_at`).
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
        "deliver_at": t(r.deliver_at),
        "released_at": t(r.released_at),
        "expired_reason": r.expired_reason,
    })
}

#[cfg(test)]
mod tests {
    use bus::catalog::DeliveryClass;
    use serde_json::Map;

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
            pushed_to: None,
            fanout_id: None,
            deliver_at: None,
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
        // What an HTTP drain hands out is the push frame's `signal`, byte for byte.
        let drained = serde_json::to_string(&PushSignal::delivered(Cow::Borrowed(&sent), true)).unwrap();
        let frame = signal_frame(&sent, true);
        assert_eq!(format!(r#"{{"op":"signal","signal":{drained}}}"#), frame);
        sent.correlation_id = None;
        sent.payload = "{not json".into();
        assert_eq!(signal_frame(&sent, false), expected(&sent, Value::Null, false));
        let drained = serde_json::to_string(&PushSignal::delivered(Cow::Borrowed(&sent), false)).unwrap();
        assert_eq!(format!(r#"{{"op":"signal","signal":{drained}}}"#), signal_frame(&sent, false));
    }

    #[test]
    fn drained_payloads_go_out_verbatim_at_any_depth() {
        let now = Utc::now();
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let sent = SignalSent {
            signal_id: Uuid::new_v4(),
            from: "a".into(),
            to: "b".into(),
            signal_type: "X".into(),
            category: bus::catalog::Category::Info,
            priority: 0,
            payload: deep.clone(),
            delivery_class: DeliveryClass::Async,
            created_at: now,
            expires_at: now,
            recipient_state: RecipientState::Available,
            publish_path: bus::event::PublishPath::QueuedOffline,
            correlation_id: None,
            dedupe_key: None,
            redacted: vec![],
            resolved_to_session: None,
            pushed_to: None,
            fanout_id: None,
            deliver_at: None,
        };
        let out = serde_json::to_string(&PushSignal::delivered(Cow::Owned(sent), false)).unwrap();
        assert!(out.contains(&format!(r#""payload":{deep},"#)), "{out}");
    }

    fn nested(levels: usize) -> Value {
        (1..levels).fold(json!({}), |inner, i| if i % 2 == 0 { json!({ "k": inner }) } else { json!([inner]) })
    }

    #[test]
    fn payloads_nest_up_to_the_limit_and_no_deeper() {
        assert!(check_depth("payload", &json!("scalar")).is_ok());
        assert!(check_depth("payload", &nested(MAX_JSON_DEPTH)).is_ok());
        let deep = json!({"to": "b", "type": "X", "payload": nested(MAX_JSON_DEPTH + 1)});
        let e = parse_send(obj(deep)).unwrap_err().to_string();
        assert_eq!(e, "payload is nested more than 64 levels deep (arrays and objects); the limit is 64");
        assert!(parse_send(obj(json!({"to": "b", "type": "X", "payload": nested(64)}))).is_ok());
    }

    #[test]
    fn send_requests_parse_with_specific_errors() {
        let ok = parse_send(obj(json!({"to": "bob", "type": "Blocker", "ttl_seconds": 5}))).unwrap();
        assert_eq!(ok.payload, json!({}));
        assert_eq!(ok.ttl_seconds, Some(5));
        let msg = |v| parse_send(obj(v)).unwrap_err().to_string();
        assert!(msg(json!({"to": "bob", "type": "X", "from": "eve"})).starts_with("from is not allowed"));
        assert_eq!(msg(json!({"type": "X"})), "to is required");
        assert_eq!(msg(json!({"to": 1, "type": "X"})), "to must be a string");
        assert!(msg(json!({"to": "b", "type": "X", "ttl_seconds": -1})).starts_with("ttl_seconds must be"));
        assert!(msg(json!({"to": "b", "type": "X", "ttl_seconds": 1.5})).starts_with("ttl_seconds must be"));
        let whole = parse_send(obj(json!({"to": "b", "type": "X", "ttl_seconds": 2801.0}))).unwrap();
        assert_eq!(whole.ttl_seconds, Some(2801), "a whole number written with a fraction");
        assert!(msg(json!({"to": "b", "type": "X", "delivery_class": "soon"})).contains("sync or async"));
        assert_eq!(msg(json!({"to": "b", "type": "X", "tto": 1})), "unknown field \"tto\"");
    }
}
