//! The WebSocket frames of CONTRACT §7 as pure functions: decoding a client frame into an
//! operation (with a specific `invalid_request` message for everything malformed) and encoding
//! every server frame.
//!
//! Deliberately no I/O and no state, so every input can be fuzzed: `step` never panics, and
//! anything that is not a runnable operation becomes a reply frame right here.

use std::time::Duration;

use bus::send::SendRequest;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::error::ApiError;
use crate::wire;
use crate::wire::directives::{parse_action, parse_create, Action, CreateRequest};

pub use crate::wire::MAX_ACK_IDS;
/// Longest `ref` echoed back.
pub const MAX_REF_CHARS: usize = 256;

/// A decoded client operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Send(SendRequest),
    /// `None`: the id is not a uuid, which answers `not_found` like any unknown id.
    Recall(Option<Uuid>),
    /// `recall` by `fanout_id` or `correlation_id` (CONTRACT §15).
    RecallMany(wire::RecallMany),
    /// `directive` (CONTRACT §14).
    Directive(DirectiveOp),
    Ack(Vec<Uuid>),
    Fact {
        plugin: String,
        fact_type: String,
        state: Value,
    },
    Ping,
}

/// A `directive` op: `directive_id` is `None` when it is not a uuid (answered `not_found`).
#[derive(Debug, Clone, PartialEq)]
pub enum DirectiveOp {
    Create(CreateRequest),
    Get { directive_id: Option<Uuid>, wait: Option<Duration> },
    Act { directive_id: Option<Uuid>, action: Action },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClientFrame {
    pub reference: Option<String>,
    pub op: Op,
}

/// What to do with one inbound text frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Answer with this frame and do nothing else.
    Reply(String),
    /// Run the operation (it needs the stream).
    Run(ClientFrame),
}

/// Decodes one inbound text frame into a step. Total: never panics, whatever the input.
pub fn step(text: &str) -> Step {
    match decode(text) {
        Ok(ClientFrame { reference, op: Op::Ping }) => Step::Reply(pong(reference.as_deref())),
        Ok(frame) => Step::Run(frame),
        Err((reference, e)) => Step::Reply(result_err(reference.as_deref(), &e)),
    }
}

/// Decodes one client frame; a failure carries the frame's `ref` when it had a usable one.
pub fn decode(text: &str) -> Result<ClientFrame, (Option<String>, ApiError)> {
    // Only a frame that says "send" somewhere is tried as one: a failed strict read formats its
    // error message (~6,000 instructions), which every ack frame paid before this look.
    match text.contains(r#""send""#).then(|| plain_send(text)).flatten() {
        Some(frame) => Ok(frame),
        None => decode_value(text),
    }
}

/// A `send` frame as almost every session writes it, read straight into its request.
/// Deliberately strict: a frame this does not take whole (another op, an unknown or repeated
/// field, a field of another type, a scheduled send, a long `ref`, a bad delivery class or a
/// payload too deep) is decoded again by `decode_value`, which gives exactly the answer and the
/// message it always gave. So this only skips the map a frame used to be parsed into (a string
/// per key and per value, built and dropped per send); it never decides anything itself.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainSend<'a> {
    op: &'a str,
    #[serde(rename = "ref")]
    reference: Option<String>,
    to: String,
    #[serde(rename = "type")]
    signal_type: String,
    payload: Option<Value>,
    delivery_class: Option<&'a str>,
    ttl_seconds: Option<u64>,
    correlation_id: Option<String>,
    dedupe_key: Option<String>,
    deliver_after_seconds: Option<u64>,
    deliver_at: Option<&'a str>,
}

fn plain_send(text: &str) -> Option<ClientFrame> {
    let f: PlainSend = serde_json::from_str(text).ok()?;
    let long_ref = f.reference.as_ref().is_some_and(|r| r.chars().count() > MAX_REF_CHARS);
    if f.op != "send" || f.deliver_at.is_some() || long_ref {
        return None;
    }
    let delivery_class = match f.delivery_class {
        Some(s) => Some(bus::catalog::DeliveryClass::parse(s).ok()?),
        None => None,
    };
    let payload = f.payload.unwrap_or_else(|| json!({}));
    wire::check_depth("payload", &payload).ok()?;
    let req = SendRequest {
        to: f.to,
        signal_type: f.signal_type,
        payload,
        delivery_class,
        ttl_seconds: f.ttl_seconds,
        correlation_id: f.correlation_id,
        dedupe_key: f.dedupe_key,
        deliver_after_seconds: f.deliver_after_seconds,
        deliver_at: None,
    };
    Some(ClientFrame { reference: f.reference, op: Op::Send(req) })
}

/// Decodes any client frame through a `Value`, with a specific message for every malformed part.
fn decode_value(text: &str) -> Result<ClientFrame, (Option<String>, ApiError)> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| (None, ApiError::invalid(format!("frame is not valid JSON: {}", lower(&e.to_string())))))?;
    let Value::Object(mut map) = value else {
        return Err((None, ApiError::invalid("frame must be a JSON object")));
    };
    let reference = match map.remove("ref") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= MAX_REF_CHARS => Some(s),
        Some(Value::String(_)) => {
            return Err((None, ApiError::invalid(format!("ref must be at most {MAX_REF_CHARS} characters"))))
        }
        Some(_) => return Err((None, ApiError::invalid("ref must be a string"))),
    };
    let op = match map.remove("op") {
        Some(Value::String(op)) => op,
        Some(_) => return Err((reference, ApiError::invalid("op must be a string"))),
        None => return Err((reference, ApiError::invalid("op is required"))),
    };
    match decode_op(&op, map) {
        Ok(op) => Ok(ClientFrame { reference, op }),
        Err(e) => Err((reference, e)),
    }
}

fn decode_op(op: &str, map: Map<String, Value>) -> Result<Op, ApiError> {
    // A send takes its frame's map whole: payload and strings move into the request.
    if op == "send" {
        return Ok(Op::Send(wire::parse_send(map)?));
    }
    let map = &map;
    match op {
        "recall" if map.contains_key("fanout_id") || map.contains_key("correlation_id") => {
            Ok(Op::RecallMany(wire::parse_recall_many(map)?))
        }
        "directive" => decode_directive(map).map(Op::Directive),
        "recall" => {
            only(map, &["signal_id"])?;
            match map.get("signal_id") {
                Some(Value::String(s)) => Ok(Op::Recall(wire::canonical_uuid(s))),
                Some(_) => Err(ApiError::invalid("signal_id must be a string")),
                None => Err(ApiError::invalid("signal_id is required")),
            }
        }
        "ack" => wire::parse_ack_ids(map).map(Op::Ack),
        "fact" => {
            only(map, &["plugin", "fact_type", "state"])?;
            let s = |k: &str| match map.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(ApiError::invalid(format!("{k} must be a string"))),
                None => Err(ApiError::invalid(format!("{k} is required"))),
            };
            let state = map.get("state").cloned().ok_or_else(|| ApiError::invalid("state is required"))?;
            Ok(Op::Fact { plugin: s("plugin")?, fact_type: s("fact_type")?, state })
        }
        "ping" => Ok(Op::Ping),
        other => Err(ApiError::invalid(format!(
            "unknown op {:?}; expected send, recall, ack, fact, directive or ping",
            truncate(other, 64)
        ))),
    }
}

/// A `directive` op: `action` selects create, get or one of the actions; the rest is its body.
fn decode_directive(map: &Map<String, Value>) -> Result<DirectiveOp, ApiError> {
    let action = match map.get("action") {
        Some(Value::String(a)) => a.as_str(),
        Some(_) => return Err(ApiError::invalid("action must be a string")),
        None => {
            return Err(ApiError::invalid(
                "action is required: create, get, start, progress, complete, fail, reject or cancel",
            ))
        }
    };
    let body: Map<String, Value> =
        map.iter().filter(|(k, _)| k.as_str() != "action").map(|(k, v)| (k.clone(), v.clone())).collect();
    if action == "create" {
        return Ok(DirectiveOp::Create(parse_create(&body)?));
    }
    let directive_id = match body.get("directive_id") {
        Some(Value::String(s)) => wire::canonical_uuid(s),
        Some(_) => return Err(ApiError::invalid("directive_id must be a string")),
        None => return Err(ApiError::invalid("directive_id is required")),
    };
    if action == "get" {
        only(&body, &["directive_id", "wait_seconds"])?;
        let wait = match body.get("wait_seconds") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(s) if s <= MAX_WAIT_SECONDS => Some(Duration::from_secs(s)),
                _ => {
                    return Err(ApiError::invalid(format!(
                        "wait_seconds must be a whole number from 0 to {MAX_WAIT_SECONDS}"
                    )))
                }
            },
        };
        return Ok(DirectiveOp::Get { directive_id, wait });
    }
    Ok(DirectiveOp::Act { directive_id, action: parse_action(action, &body, &["directive_id"])? })
}

/// Longest `wait_seconds` of a `directive` `get`.
pub const MAX_WAIT_SECONDS: u64 = 60;

fn only(map: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(format!("unknown field {:?}", truncate(k, 64)))),
        None => Ok(()),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

fn lower(s: &str) -> String {
    s.to_lowercase()
}

pub fn welcome(session_id: Uuid, tenant: &str, identity: &str, heartbeat_interval_ms: u64) -> String {
    json!({
        "op": "welcome",
        "session_id": session_id,
        "tenant": tenant,
        "identity": identity,
        "heartbeat_interval_ms": heartbeat_interval_ms,
    })
    .to_string()
}

/// A successful `result` frame. Its keys are declared in the order a `Value` prints them
/// (sorted), so the frame is byte-for-byte what `json!(…).to_string()` gave; serialized straight
/// into one buffer instead of built as a map and printed through `Display`, which wrote it piece
/// by piece through the formatter (3 % of the bus's CPU flat out, one frame per send).
/// `result` is anything that prints as a JSON object (a `Value`, or a typed answer whose fields
/// are declared in sorted order, as `wire::SendResponse`).
#[derive(serde::Serialize)]
struct ResultOk<'a, T> {
    ok: bool,
    op: &'static str,
    #[serde(rename = "ref")]
    reference: Option<&'a str>,
    result: &'a T,
}

pub fn result_ok<T: serde::Serialize>(reference: Option<&str>, result: &T) -> String {
    let frame = ResultOk { ok: true, op: "result", reference, result };
    serde_json::to_string(&frame).expect("a value with string keys always serializes")
}

/// A send's `result` frame: what `result_ok` writes for `answer` (a unit test holds them equal),
/// the answer written by hand (`SendAnswer::write_json`) — one such frame per send.
pub fn send_result(reference: Option<&str>, answer: &wire::SendAnswer) -> String {
    let mut out = Vec::with_capacity(384);
    out.extend_from_slice(br#"{"ok":true,"op":"result","ref":"#);
    match reference {
        Some(r) => serde_json::to_writer(&mut out, r).expect("a str always serializes"),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(br#","result":"#);
    answer.write_json(&mut out);
    out.push(b'}');
    String::from_utf8(out).expect("every part is UTF-8")
}

pub fn result_err(reference: Option<&str>, e: &ApiError) -> String {
    json!({ "op": "result", "ref": reference, "ok": false, "error": e.to_json() }).to_string()
}

pub fn pong(reference: Option<&str>) -> String {
    match reference {
        Some(r) => json!({ "op": "pong", "ref": r }).to_string(),
        None => json!({ "op": "pong" }).to_string(),
    }
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
