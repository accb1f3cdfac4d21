//! The answer to a send (CONTRACT §4, and §15's fan-out) as a typed value every surface
//! serializes as it is: the WebSocket `result` frame, the HTTP body, the MCP tool result.
//!
//! Deliberately decides nothing: `send.rs` and `fanout.rs` say what was delivered or queued;
//! this only holds the answer and prints it byte for byte as the map it replaced.

use bus::event::SignalSent;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::ts_text;

/// The accepted-send response (CONTRACT §4), plus `deliver_at` when it was scheduled (§16) and
/// `redacted` when something was redacted. Serialized straight into its frame or body: fields
/// are declared in the order a `Value` prints its keys (sorted), so the bytes are what
/// `json!(…).to_string()` gave, without a map and a string per key built and dropped per send.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SendResponse {
    #[serde(serialize_with = "ser_ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "ser_opt_ts", skip_serializing_if = "Option::is_none")]
    pub deliver_at: Option<DateTime<Utc>>,
    pub delivered: bool,
    pub delivery_class: &'static str,
    #[serde(serialize_with = "ser_ts")]
    pub expires_at: DateTime<Utc>,
    pub publish_path: &'static str,
    pub queued: bool,
    pub recipient_state: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    pub resolved_to_session: Option<Uuid>,
    pub signal_id: Uuid,
}

impl SendResponse {
    /// The answer for `sent`: delivered or queued, resolved to `resolved_to_session`.
    pub fn new(sent: &SignalSent, delivered: bool, queued: bool, resolved_to_session: Option<Uuid>) -> Self {
        SendResponse {
            created_at: sent.created_at,
            deliver_at: sent.deliver_at,
            delivered,
            delivery_class: sent.delivery_class.as_str(),
            expires_at: sent.expires_at,
            publish_path: sent.publish_path.as_str(),
            queued,
            recipient_state: sent.recipient_state.as_str(),
            redacted: sent.redacted.clone(),
            resolved_to_session,
            signal_id: sent.signal_id,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a send response always serializes")
    }

    /// Appends the bytes `serde_json::to_writer(out, self)` writes (a unit test holds them
    /// equal), with the keys as literals and the values that never need escaping — enum names,
    /// UUIDs, timestamps, booleans — copied as they are: serde escapes every key and string
    /// byte by byte, ~5,000 instructions a frame under callgrind, one frame per send.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let uuid = |out: &mut Vec<u8>, id: &Uuid| {
            out.push(b'"');
            out.extend_from_slice(id.hyphenated().encode_lower(&mut Uuid::encode_buffer()).as_bytes());
            out.push(b'"');
        };
        let text = |out: &mut Vec<u8>, s: &str| {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        };
        let flag = |b: bool| if b { &b"true"[..] } else { &b"false"[..] };
        out.extend_from_slice(br#"{"created_at":"#);
        text(out, ts_text(&self.created_at).as_str());
        if let Some(at) = &self.deliver_at {
            out.extend_from_slice(br#","deliver_at":"#);
            text(out, ts_text(at).as_str());
        }
        out.extend_from_slice(br#","delivered":"#);
        out.extend_from_slice(flag(self.delivered));
        out.extend_from_slice(br#","delivery_class":"#);
        text(out, self.delivery_class);
        out.extend_from_slice(br#","expires_at":"#);
        text(out, ts_text(&self.expires_at).as_str());
        out.extend_from_slice(br#","publish_path":"#);
        text(out, self.publish_path);
        out.extend_from_slice(br#","queued":"#);
        out.extend_from_slice(flag(self.queued));
        out.extend_from_slice(br#","recipient_state":"#);
        text(out, self.recipient_state);
        if !self.redacted.is_empty() {
            // Paths are keys as written: escaped like any string.
            out.extend_from_slice(br#","redacted":"#);
            serde_json::to_writer(&mut *out, &self.redacted).expect("strings always serialize");
        }
        out.extend_from_slice(br#","resolved_to_session":"#);
        match &self.resolved_to_session {
            Some(id) => uuid(out, id),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(br#","signal_id":"#);
        uuid(out, &self.signal_id);
        out.push(b'}');
    }
}

/// What a send answers (`POST /v1/signals`, the `send` op, `send_signal`): one signal's
/// response, or a fan-out's `{"fanout_id","to","results"}` (CONTRACT §15).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SendAnswer {
    One(SendResponse),
    Fanout(Value),
}

impl SendAnswer {
    /// Appends what `serde_json::to_writer(out, self)` writes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            SendAnswer::One(r) => r.write_json(out),
            SendAnswer::Fanout(v) => serde_json::to_writer(out, v).expect("a Value always serializes"),
        }
    }

    pub fn into_json(self) -> Value {
        match self {
            SendAnswer::One(r) => r.to_json(),
            SendAnswer::Fanout(v) => v,
        }
    }
}

fn ser_ts<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(ts_text(t).as_str())
}

fn ser_opt_ts<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_ts(t, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wire::ts;

    /// The map the send answer was built as before it was typed: the typed one prints the same.
    fn answer_as_map(s: &SignalSent, delivered: bool, queued: bool, resolved: Option<Uuid>) -> String {
        let mut v = json!({
            "signal_id": s.signal_id, "delivered": delivered, "queued": queued,
            "recipient_state": s.recipient_state.as_str(), "delivery_class": s.delivery_class.as_str(),
            "created_at": ts(s.created_at), "expires_at": ts(s.expires_at),
            "resolved_to_session": resolved, "publish_path": s.publish_path.as_str(),
        });
        if let Some(at) = s.deliver_at {
            v["deliver_at"] = json!(ts(at));
        }
        if !s.redacted.is_empty() {
            v["redacted"] = json!(s.redacted);
        }
        v.to_string()
    }

    #[test]
    fn a_send_answer_prints_as_its_map_did() {
        let now = Utc::now();
        // Built from its stored form, the fields a send may leave out at their defaults.
        let mut sent: SignalSent = serde_json::from_value(json!({
            "signal_id": Uuid::new_v4(), "from": "a", "to": "b", "signal_type": "X", "category": "BLOCKER",
            "priority": 1, "payload": "{}", "delivery_class": "sync", "created_at": now, "expires_at": now,
            "recipient_state": "not_available_stale", "publish_path": "pushed_to_ws",
        }))
        .unwrap();
        let session = Some(Uuid::new_v4());
        for (delivered, queued, resolved) in [(true, false, session), (false, true, None)] {
            let typed = SendResponse::new(&sent, delivered, queued, resolved);
            assert_eq!(serde_json::to_string(&typed).unwrap(), answer_as_map(&sent, delivered, queued, resolved));
            assert_eq!(typed.to_json().to_string(), answer_as_map(&sent, delivered, queued, resolved));
            assert_eq!(written(&SendAnswer::One(typed)), answer_as_map(&sent, delivered, queued, resolved));
        }
        sent.deliver_at = Some(now);
        sent.redacted = vec!["a.token".into(), "pw".into(), "q\"\\é\n".into()];
        let typed = SendAnswer::One(SendResponse::new(&sent, false, true, None));
        assert_eq!(serde_json::to_string(&typed).unwrap(), answer_as_map(&sent, false, true, None));
        assert_eq!(written(&typed), answer_as_map(&sent, false, true, None));
        let fanout = SendAnswer::Fanout(json!({"fanout_id": Uuid::new_v4(), "results": []}));
        assert_eq!(serde_json::to_string(&fanout).unwrap(), fanout.clone().into_json().to_string());
        assert_eq!(written(&fanout), fanout.into_json().to_string());
    }

    #[test]
    fn every_enum_name_a_send_answer_prints_needs_no_escaping() {
        use bus::catalog::DeliveryClass;
        use bus::event::{PublishPath, RecipientState};
        let names = [DeliveryClass::Sync.as_str(), DeliveryClass::Async.as_str()]
            .into_iter()
            .chain(PublishPath::ALL.iter().map(|p| p.as_str()))
            .chain(RecipientState::ALL.iter().map(|s| s.as_str()));
        for name in names {
            assert_eq!(serde_json::to_string(name).unwrap(), format!("\"{name}\""));
        }
    }

    fn written(answer: &SendAnswer) -> String {
        let mut out = Vec::new();
        answer.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }
}
