//! Reading directive requests (CONTRACT §14) from the JSON object of an HTTP body, a WebSocket
//! frame or an MCP call's arguments: a create's fields and each action's body, with a specific
//! message for every malformed field.
//!
//! Deliberately decides nothing: limits on sizes, texts, percent and deadline are the rules'
//! (`bus::directive`), so every surface refuses the same input with the same words.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::wire::check_depth;

/// A create as asked, before the gateway resolves `to` and the deadline default.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    pub to: String,
    pub directive_type: String,
    pub params: Value,
    pub idempotency_key: String,
    pub deadline_seconds: Option<u64>,
    pub correlation_id: Option<String>,
}

/// An action on an existing directive, as asked (the caller is added by the gateway).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Start,
    Progress { message: Option<String>, percent: Option<i64> },
    Complete { result: Value },
    Fail { code: String, message: String },
    Reject { reason: Option<String> },
    Cancel { reason: Option<String> },
}

/// The actions of `POST /v1/directives/{id}/{action}`, the WebSocket op and MCP's `update_directive`.
pub const ACTIONS: &[&str] = &["start", "progress", "complete", "fail", "reject", "cancel"];

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

fn only(map: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), ApiError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => {
            let k: String = k.chars().take(64).collect();
            Err(ApiError::invalid(format!("unknown field {k:?} for {what} (allowed: {})", allowed.join(", "))))
        }
        None => Ok(()),
    }
}

/// A JSON object field (`params`, `result`): absent is `{}` only where `default_empty`.
fn object(map: &Map<String, Value>, key: &str, default_empty: bool) -> Result<Value, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) if default_empty => Ok(Value::Object(Map::new())),
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{key} is required (a JSON object)"))),
        Some(v @ Value::Object(_)) => {
            check_depth(key, v)?;
            Ok(v.clone())
        }
        Some(_) => Err(ApiError::invalid(format!("{key} must be a JSON object"))),
    }
}

/// A whole number in JSON (`60.0` counts), else `None`.
fn whole(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15).map(|f| f as i64))
}

/// Reads a create: `to`, `type`, `params` and `idempotency_key` required; `deadline_seconds` and
/// `correlation_id` optional; nothing else (a `from`/`issuer` is refused: the issuer is the caller).
pub fn parse_create(map: &Map<String, Value>) -> Result<CreateRequest, ApiError> {
    if map.contains_key("from") || map.contains_key("issuer") {
        return Err(ApiError::invalid("the issuer is always the authenticated identity; from/issuer are not allowed"));
    }
    only(map, &["to", "type", "params", "idempotency_key", "deadline_seconds", "correlation_id"], "a create")?;
    let deadline_seconds = match map.get("deadline_seconds") {
        None | Some(Value::Null) => None,
        Some(v) => match whole(v) {
            Some(n) if n >= 1 => Some(n as u64),
            _ => {
                return Err(ApiError::invalid(format!(
                    "deadline_seconds must be a whole number from 1 to {}",
                    bus::directive::MAX_DEADLINE_SECONDS
                )))
            }
        },
    };
    Ok(CreateRequest {
        to: req_string(map, "to")?,
        directive_type: req_string(map, "type")?,
        params: object(map, "params", true)?,
        idempotency_key: req_string(map, "idempotency_key")?,
        deadline_seconds,
        correlation_id: opt_string(map, "correlation_id")?,
    })
}

/// Reads the body of `action` (one of `ACTIONS`), ignoring `skip` keys the surface itself
/// used (the WebSocket's `op`, `action`, `directive_id`).
pub fn parse_action(action: &str, map: &Map<String, Value>, skip: &[&str]) -> Result<Action, ApiError> {
    // A null field is no field (as in every other body).
    let body: Map<String, Value> = map
        .iter()
        .filter(|(k, v)| !skip.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let what = action.to_string();
    match action {
        "start" => {
            only(&body, &[], &what)?;
            Ok(Action::Start)
        }
        "progress" => {
            only(&body, &["message", "percent"], &what)?;
            let percent = match body.get("percent") {
                None | Some(Value::Null) => None,
                Some(v) => {
                    Some(whole(v).ok_or_else(|| ApiError::invalid("percent must be a whole number from 0 to 100"))?)
                }
            };
            Ok(Action::Progress { message: opt_string(&body, "message")?, percent })
        }
        "complete" => {
            only(&body, &["result"], &what)?;
            Ok(Action::Complete { result: object(&body, "result", true)? })
        }
        "fail" => {
            only(&body, &["failure"], &what)?;
            let Some(Value::Object(failure)) = body.get("failure") else {
                return Err(ApiError::invalid("failure is required: {\"code\": \"…\", \"message\": \"…\"}"));
            };
            only(failure, &["code", "message"], "failure")?;
            let code =
                req_string(failure, "code").map_err(|_| ApiError::invalid("failure.code is required (a string)"))?;
            let message = opt_string(failure, "message")
                .map_err(|_| ApiError::invalid("failure.message must be a string"))?
                .unwrap_or_default();
            Ok(Action::Fail { code, message })
        }
        "reject" | "cancel" => {
            only(&body, &["reason"], &what)?;
            let reason = opt_string(&body, "reason")?;
            Ok(if action == "reject" { Action::Reject { reason } } else { Action::Cancel { reason } })
        }
        other => {
            let other: String = other.chars().take(64).collect();
            Err(ApiError::invalid(format!(
                "unknown action {other:?} (one of {}, or create and get)",
                ACTIONS.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_create_reads_its_fields_and_refuses_strangers() {
        let c = parse_create(&map(
            json!({"to":"bob","type":"a.b","params":{"x":1},"idempotency_key":"k","deadline_seconds":60.0}),
        ))
        .unwrap();
        assert_eq!((c.to.as_str(), c.deadline_seconds), ("bob", Some(60)));
        for (body, words) in [
            (json!({"to":"bob","type":"a","idempotency_key":"k","from":"eve"}), "issuer"),
            (json!({"to":"bob","type":"a","idempotency_key":"k","colour":1}), "unknown field \"colour\""),
            (json!({"to":"bob","type":"a","idempotency_key":"k","params":[1]}), "params must be a JSON object"),
            (json!({"to":"bob","type":"a"}), "idempotency_key is required"),
            (json!({"to":"bob","type":"a","idempotency_key":"k","deadline_seconds":0}), "deadline_seconds"),
            (json!({"to":"bob","type":"a","idempotency_key":"k","deadline_seconds":1.5}), "deadline_seconds"),
        ] {
            let e = parse_create(&map(body.clone())).unwrap_err();
            assert!(e.to_string().contains(words), "{body}: {e}");
        }
    }

    #[test]
    fn each_action_reads_its_body_with_specific_messages() {
        assert_eq!(parse_action("start", &map(json!({})), &[]).unwrap(), Action::Start);
        assert_eq!(
            parse_action("progress", &map(json!({"percent":40,"message":"half"})), &[]).unwrap(),
            Action::Progress { message: Some("half".into()), percent: Some(40) }
        );
        assert_eq!(
            parse_action("fail", &map(json!({"failure":{"code":"E1","message":"no"}})), &[]).unwrap(),
            Action::Fail { code: "E1".into(), message: "no".into() }
        );
        let ws = map(json!({"op":"directive","action":"cancel","directive_id":"x","reason":"moot"}));
        assert_eq!(
            parse_action("cancel", &ws, &["op", "action", "directive_id"]).unwrap(),
            Action::Cancel { reason: Some("moot".into()) }
        );
        for (action, body, words) in [
            ("start", json!({"x":1}), "unknown field"),
            ("progress", json!({"percent":"40"}), "percent must be a whole number"),
            ("complete", json!({"result":"done"}), "result must be a JSON object"),
            ("fail", json!({}), "failure is required"),
            ("fail", json!({"failure":{"message":"m"}}), "failure.code is required"),
            ("dance", json!({}), "unknown action"),
        ] {
            let e = parse_action(action, &map(body.clone()), &[]).unwrap_err();
            assert!(e.to_string().contains(words), "{action} {body}: {e}");
        }
    }
}
