//! A tool call as data: `parse` turns a tool name and its arguments into a `Call` (or names the
//! field that is wrong), and `answer` turns an outcome into the tool result of CONTRACT §12 —
//! `structuredContent` with the same JSON as one text block, `isError` with the §8 error body.
//! `/mcp` runs a `Call` against the gateway's commands; the stdio shim maps it to HTTP calls.
//!
//! Deliberately pure: no I/O, no authentication. Arguments are checked as the matching HTTP
//! call checks its body (same messages), through the same `wire` parsers.

use bus::send::SendRequest;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::ApiError;
use crate::wire;
use crate::wire::directives::{parse_action, parse_create, Action, CreateRequest};

/// One tool call, its arguments checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `send_signal`: the parsed request, and the arguments as given (the HTTP body).
    Send {
        request: SendRequest,
        body: Map<String, Value>,
    },
    /// `recall_signal`: any text; one that is not a uuid is `not_found`, as over HTTP.
    Recall {
        signal_id: String,
    },
    CheckInbox {
        drain: bool,
        limit: u32,
        wait_seconds: u64,
    },
    Ack {
        signal_ids: Vec<Uuid>,
    },
    GetSignal {
        signal_id: String,
    },
    ListAgents,
    RecordFact {
        plugin: String,
        fact_type: String,
        state: Value,
    },
    PluginState {
        plugin: String,
    },
    /// `recall_signal` by `fanout_id` or `correlation_id`; `body` is the HTTP body.
    RecallMany {
        what: wire::RecallMany,
        body: Map<String, Value>,
    },
    /// `create_directive`: the parsed create, and the arguments as given (the HTTP body).
    CreateDirective {
        request: CreateRequest,
        body: Map<String, Value>,
    },
    /// `get_directive`: any text; one that is not a uuid is `not_found`.
    GetDirective {
        directive_id: String,
        wait_seconds: u64,
    },
    /// `list_signals`: the query, as the HTTP query parameters of `GET /v1/signals`.
    ListSignals {
        query: Vec<(String, String)>,
    },
    /// `list_directives`: the query, as the HTTP query parameters.
    ListDirectives {
        query: Vec<(String, String)>,
    },
    /// `update_directive`: the action's name and parsed body, and the body as given.
    UpdateDirective {
        directive_id: String,
        name: String,
        action: Action,
        body: Map<String, Value>,
    },
    ListGroups,
}

/// Longest `wait_seconds` of `get_directive` (under the clients' usual 60 s request timeout).
pub const MAX_TOOL_WAIT_SECONDS: u64 = 50;

/// Reads the call of tool `name`; `None` when there is no such tool.
pub fn parse(name: &str, args: Option<&Map<String, Value>>) -> Option<Result<Call, ApiError>> {
    let empty = Map::new();
    let args = args.unwrap_or(&empty);
    let call = match name {
        "send_signal" => wire::parse_send(args.clone()).map(|request| Call::Send { request, body: args.clone() }),
        "recall_signal"
            if !args.contains_key("fanout_id")
                && !args.contains_key("correlation_id")
                && !args.contains_key("signal_id") =>
        {
            Err(ApiError::invalid("signal_id is required (or fanout_id or correlation_id, to recall many)"))
        }
        "recall_signal" if !args.contains_key("signal_id") => {
            wire::parse_recall_many(args).map(|what| Call::RecallMany { what, body: args.clone() })
        }
        "recall_signal" => only(args, &["signal_id"])
            .and_then(|()| required_str(args, "signal_id"))
            .map(|signal_id| Call::Recall { signal_id }),
        "create_directive" => parse_create(args).map(|request| Call::CreateDirective { request, body: args.clone() }),
        "get_directive" => only(args, &["directive_id", "wait_seconds"]).and_then(|()| {
            let wait_seconds = wait_seconds(args)?;
            Ok(Call::GetDirective { directive_id: required_str(args, "directive_id")?, wait_seconds })
        }),
        "list_directives" => only(args, &["role", "status", "type", "limit", "before"])
            .and_then(|()| as_query(args))
            .map(|query| Call::ListDirectives { query }),
        "list_signals" => only(args, &["role", "status", "correlation_id", "limit", "cursor"])
            .and_then(|()| as_query(args))
            .and_then(|query| {
                // Checked as `GET /v1/signals` checks its query, so the errors are the same.
                wire::SignalList::from_query(&query.iter().cloned().collect())?;
                Ok(Call::ListSignals { query })
            }),
        "update_directive" => {
            let directive_id = required_str(args, "directive_id");
            let name = required_str(args, "action");
            directive_id.and_then(|directive_id| {
                let name = name?;
                let action = parse_action(&name, args, &["directive_id", "action"])?;
                let body = args.iter().filter(|(k, _)| !matches!(k.as_str(), "directive_id" | "action"));
                let body = body.map(|(k, v)| (k.clone(), v.clone())).collect();
                Ok(Call::UpdateDirective { directive_id, name, action, body })
            })
        }
        "list_groups" => only(args, &[]).map(|()| Call::ListGroups),
        "check_inbox" => only(args, &["drain", "limit", "wait_seconds"]).and_then(|()| inbox(args)),
        "ack_signals" => wire::parse_ack_ids(args).map(|signal_ids| Call::Ack { signal_ids }),
        "get_signal" => only(args, &["signal_id"])
            .and_then(|()| required_str(args, "signal_id"))
            .map(|signal_id| Call::GetSignal { signal_id }),
        "list_agents" => only(args, &[]).map(|()| Call::ListAgents),
        "record_fact" => only(args, &["plugin", "fact_type", "state"]).and_then(|()| {
            let plugin = required_str(args, "plugin")?;
            let fact_type = required_str(args, "fact_type")?;
            let state = args.get("state").cloned().ok_or_else(|| ApiError::invalid("state is required"))?;
            Ok(Call::RecordFact { plugin, fact_type, state })
        }),
        "plugin_state" => only(args, &["plugin"])
            .and_then(|()| required_str(args, "plugin"))
            .map(|plugin| Call::PluginState { plugin }),
        _ => return None,
    };
    Some(call)
}

fn only(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(format!("unknown field {k:?}"))),
        None => Ok(()),
    }
}

fn required_str(args: &Map<String, Value>, key: &str) -> Result<String, ApiError> {
    match args.get(key) {
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{key} is required"))),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}

/// Tool arguments as query parameters: strings as they are, `limit` a number; nulls left out.
fn as_query(args: &Map<String, Value>) -> Result<Vec<(String, String)>, ApiError> {
    args.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(n) if k == "limit" => Ok((k.clone(), n.to_string())),
            _ => Err(ApiError::invalid(format!("{k} must be a {}", if k == "limit" { "number" } else { "string" }))),
        })
        .collect()
}

/// `wait_seconds`: a whole number from 0 to `MAX_TOOL_WAIT_SECONDS` (default 0).
fn wait_seconds(args: &Map<String, Value>) -> Result<u64, ApiError> {
    match args.get("wait_seconds") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_u64().filter(|s| *s <= MAX_TOOL_WAIT_SECONDS).ok_or_else(|| {
            ApiError::invalid(format!("wait_seconds must be a whole number from 0 to {MAX_TOOL_WAIT_SECONDS}"))
        }),
    }
}

fn inbox(args: &Map<String, Value>) -> Result<Call, ApiError> {
    let drain = match args.get("drain") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::invalid("drain must be true or false")),
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => 100,
        Some(v) => {
            v.as_u64()
                .filter(|l| (1..=1000).contains(l))
                .ok_or_else(|| ApiError::invalid("limit must be a whole number between 1 and 1000"))? as u32
        }
    };
    Ok(Call::CheckInbox { drain, limit, wait_seconds: wait_seconds(args)? })
}

/// The tool result: `Ok` is the HTTP answer's body, `Err` its §8 error body (`isError: true`).
/// `signals` that rode along are added as `"signals"` when there are any (an answer that lists
/// signals of its own, `check_inbox`, never gets more).
pub fn answer(outcome: Result<Value, Value>, signals: Vec<Value>) -> CallToolResult {
    let (mut body, failed) = match outcome {
        Ok(v) => (v, false),
        Err(e) => (e, true),
    };
    if !signals.is_empty() {
        if let Value::Object(map) = &mut body {
            map.insert("signals".into(), Value::Array(signals));
        }
    }
    if failed {
        CallToolResult::structured_error(body)
    } else {
        CallToolResult::structured(body)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(name: &str, args: Value) -> Result<Call, String> {
        let map = args.as_object().cloned().unwrap();
        parse(name, Some(&map)).expect("a known tool").map_err(|e| e.to_string())
    }

    #[test]
    fn arguments_are_read_like_the_http_bodies_and_errors_name_the_field() {
        assert!(parse("send_signals", None).is_none());
        assert_eq!(call("send_signal", json!({"type": "X"})).unwrap_err(), "to is required");
        assert_eq!(call("send_signal", json!({"to": "b", "type": 7})).unwrap_err(), "type must be a string");
        assert!(call("send_signal", json!({"to": "b", "type": "X", "from": "eve"})).unwrap_err().starts_with("from"));
        assert!(call("recall_signal", json!({})).unwrap_err().starts_with("signal_id is required"));
        assert!(matches!(call("recall_signal", json!({"correlation_id": "c"})).unwrap(), Call::RecallMany { .. }));
        assert!(call("recall_signal", json!({"fanout_id": "x"})).unwrap_err().contains("fanout_id must be a uuid"));
        assert!(call("create_directive", json!({"to": "b", "type": "a.b"})).unwrap_err().contains("idempotency_key"));
        assert!(call("get_directive", json!({"directive_id": "d", "wait_seconds": 51}))
            .unwrap_err()
            .contains("0 to 50"));
        assert!(call("update_directive", json!({"directive_id": "d", "action": "dance"}))
            .unwrap_err()
            .contains("unknown action"));
        assert!(call("update_directive", json!({"directive_id": "d", "action": "progress", "percent": "x"})).is_err());
        assert!(matches!(
            call("update_directive", json!({"directive_id": "d", "action": "complete", "result": {"ok": true}}))
                .unwrap(),
            Call::UpdateDirective { action: Action::Complete { .. }, .. }
        ));
        assert!(call("list_directives", json!({"limit": 5, "role": "issued"})).is_ok());
        assert_eq!(call("list_groups", json!({})).unwrap(), Call::ListGroups);
        assert_eq!(call("get_signal", json!({"signal_id": 1})).unwrap_err(), "signal_id must be a string");
        assert_eq!(call("check_inbox", json!({"drain": "yes"})).unwrap_err(), "drain must be true or false");
        assert!(call("check_inbox", json!({"limit": 0})).unwrap_err().starts_with("limit must be"));
        assert_eq!(
            call("check_inbox", json!({})).unwrap(),
            Call::CheckInbox { drain: false, limit: 100, wait_seconds: 0 }
        );
        assert_eq!(
            call("check_inbox", json!({"drain": true, "wait_seconds": 50})).unwrap(),
            Call::CheckInbox { drain: true, limit: 100, wait_seconds: 50 }
        );
        for bad in [json!(51), json!(-1), json!(1.5), json!("5")] {
            let e = call("check_inbox", json!({"wait_seconds": bad})).unwrap_err();
            assert_eq!(e, "wait_seconds must be a whole number from 0 to 50", "{bad}");
        }
        assert!(matches!(
            call("list_signals", json!({"correlation_id": "t-1", "role": "sent", "limit": 5})).unwrap(),
            Call::ListSignals { .. }
        ));
        assert_eq!(call("list_signals", json!({"role": "both"})).unwrap_err(), "role must be sent or received");
        assert!(call("list_signals", json!({"correlation_id": ""})).unwrap_err().starts_with("correlation_id must be"));
        assert_eq!(call("list_signals", json!({"limit": true})).unwrap_err(), "limit must be a number");
        assert_eq!(call("list_signals", json!({"tenant": "t"})).unwrap_err(), "unknown field \"tenant\"");
        assert_eq!(call("ack_signals", json!({"signal_ids": ["x"]})).unwrap_err(), "signal_ids[0] is not a uuid");
        assert_eq!(call("list_agents", json!({"tenant": "t"})).unwrap_err(), "unknown field \"tenant\"");
        assert_eq!(call("record_fact", json!({"plugin": "a", "fact_type": "t"})).unwrap_err(), "state is required");
        assert_eq!(parse("list_agents", None).unwrap().unwrap(), Call::ListAgents);
    }

    #[test]
    fn answers_carry_the_body_as_structured_content_and_as_text() {
        let ok = answer(Ok(json!({"outcome": "recalled"})), vec![json!({"id": "s"})]);
        assert_eq!(ok.is_error, Some(false));
        let body = json!({"outcome": "recalled", "signals": [{"id": "s"}]});
        assert_eq!(ok.structured_content, Some(body.clone()));
        assert_eq!(ok.content[0].as_text().unwrap().text, body.to_string());
        let err = answer(Err(ApiError::invalid("to is required").body()), vec![]);
        assert_eq!(err.is_error, Some(true));
        assert_eq!(err.structured_content.unwrap()["error"]["code"], "invalid_request");
    }
}
