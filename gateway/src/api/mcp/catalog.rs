//! What an MCP client is shown: the tools of CONTRACT §12 (§14/§15's from `team_tools`, §16's
//! `list_signals` and `check_inbox`'s wait here) with input schemas whose
//! descriptions are written for the model that reads them, the server's instructions, and the
//! announcement of a pending signal. `/mcp` and the stdio shim (`signalbus mcp`) list exactly
//! these, so an agent sees the same bus through either.
//!
//! Deliberately data only: no parsing (`call.rs`) and no I/O.

use rmcp::model::Tool;
use serde_json::{json, Value};

use super::team_tools;
use super::tool_schema::{annotations, schema};

/// The tool names, fixed by CONTRACT §12.
pub const TOOL_NAMES: [&str; 14] = [
    "send_signal",
    "recall_signal",
    "check_inbox",
    "ack_signals",
    "get_signal",
    "list_agents",
    "record_fact",
    "plugin_state",
    "create_directive",
    "get_directive",
    "list_directives",
    "update_directive",
    "list_groups",
    "list_signals",
];

/// The `logger` of the notification that announces a pending signal.
pub const LOGGER: &str = "signalbus";

/// What the server tells the model at `initialize`.
pub const INSTRUCTIONS: &str = "signalbus moves short messages (signals) between AI agents. You are \
one registered agent; the bus knows you by the token this connection uses. Send with send_signal, \
take back an undelivered one with recall_signal. Signals sent to you arrive by themselves: every \
tool result may carry a \"signals\" array - read it every time; those signals are now delivered to \
you. When you have nothing else to call, check_inbox with drain: true fetches them (with \
wait_seconds it waits for one to arrive, instead of you calling again and again). Acknowledge \
what you have handled with ack_signals, or it is handed to you again in your next session. An \
answer with delivered: true is on record; an error with code unavailable means nothing was \
accepted, so send again; if an answer was lost, send again with the same dedupe_key and you get \
the first send's answer instead of a duplicate.";

const SIGNAL_ID: &str = "The signal_id a send answered (a uuid).";

fn send_signal() -> Tool {
    let description = "Send a signal (a short message) to another agent of your tenant. Choose \
delivery_class by how urgent it is. sync: only if the recipient is connected right now; if it is \
not, nothing is queued and you get an error with code recipient_unavailable (its recipient_state \
says offline or stale) - decide yourself whether to wait, ask someone else, or send async. async: \
always accepted; it waits up to ttl_seconds for the recipient to connect, then expires. The \
answer says what happened: delivered: true means the recipient's session has it (on record, \
never undone); queued: true means it is pending (publish_path buffered_for_piggyback: the \
recipient gets it with its next tool call; queued_offline: when it next connects). Errors: \
unknown_recipient (no such agent: check list_agents), invalid_request (the message names the \
field), payload_too_large (payload over 64 KiB), rate_limited (wait retry_after_ms), unavailable \
(nothing was accepted: send again). If an answer never arrives, send again with the same \
dedupe_key: you get the original signal's answer, never a duplicate. Blocker and Question default \
to sync; other types to async. To act later rather than now - follow up in an hour, remind a \
reviewer tomorrow, check back on a task - schedule it: give deliver_after_seconds (e.g. 3600) or \
deliver_at (an RFC 3339 time), async only. It is answered queued: true, publish_path: scheduled, \
with its deliver_at; the recipient cannot see it until then, and you can recall_signal it until it \
is delivered. Scheduling a note to yourself is how you set a reminder.";
    let properties = json!({
        "to": {"type": "string", "pattern": "^@?[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
               "description": "The recipient's identity, as list_agents shows it; or a group as @name (list_groups): one signal to each member but you, and the answer has one entry per member."},
        "type": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.]{0,63}$",
                 "description": "What kind of signal: Blocker, Question, ReviewRequested, TaskAssigned, TaskCompleted, StatusUpdate, Acknowledgment, or your own name. It sets the defaults (class, time to live, priority)."},
        "payload": {"description": "Any JSON (default {}), at most 64 KiB encoded: the content the recipient reads. Values under keys like password, token or api_key are replaced by \"[REDACTED]\" before anything is stored."},
        "delivery_class": {"type": "string", "enum": ["sync", "async"],
                           "description": "sync: fail fast with recipient_unavailable if the recipient is not connected now. async: queue it until the recipient connects or it expires. Default: by type."},
        "ttl_seconds": {"type": "integer", "minimum": 1, "maximum": 2_592_000,
                        "description": "How long an undelivered signal waits before it expires. Default: by type (e.g. 1 hour for a Question, 24 hours for a StatusUpdate)."},
        "correlation_id": {"type": "string", "maxLength": 64,
                           "description": "Your own id tying related signals together (e.g. a task id); the recipient sees it."},
        "dedupe_key": {"type": "string", "maxLength": 200,
                       "description": "Makes the send idempotent: a repeat with the same key answers the first send and sends nothing new. Use one whenever you might retry."},
        "deliver_after_seconds": {"type": "integer", "minimum": 1, "maximum": 2_592_000,
                                  "description": "Deliver it later: this many seconds from now (3600 = in an hour, 86400 = tomorrow; at most 30 days). Async only; not with deliver_at. Until then the recipient cannot see it; ttl_seconds counts from then."},
        "deliver_at": {"type": "string", "format": "date-time",
                       "description": "Deliver it later: at this time, RFC 3339 (e.g. 2026-11-21T09:30:00Z), in the future and at most 30 days ahead. Async only; not with deliver_after_seconds."},
    });
    Tool::new("send_signal", description, schema(properties, &["to", "type"]))
        .with_title("Send a signal")
        .with_annotations(annotations(false, false, true))
}

fn recall_signal() -> Tool {
    let description = "Take back a signal you sent, if it has not reached its recipient yet (like \
recalling an email). Outcomes: recalled (the recipient will never see it), already_delivered (too \
late: send a follow-up instead), already_expired (its time to live ran out first), not_found (no \
signal of yours has that id). Recalling twice answers recalled again. Give signal_id for one \
signal; or fanout_id (what a send to a group answered) or correlation_id to recall every signal \
of yours in that fan-out or conversation at once, with one outcome per signal.";
    let properties = json!({
        "signal_id": {"type": "string", "format": "uuid", "description": SIGNAL_ID},
        "fanout_id": {"type": "string", "format": "uuid", "description": "Instead of signal_id: the fanout_id of a send to a group."},
        "correlation_id": {"type": "string", "description": "Instead of signal_id: recall every pending signal you sent with this correlation_id."},
    });
    Tool::new("recall_signal", description, schema(properties, &[]))
        .with_title("Recall a signal")
        .with_annotations(annotations(false, true, true))
}

fn check_inbox() -> Tool {
    let description = "List the signals waiting for you, most urgent first (priority, then \
oldest). With drain: false (the default) they stay pending and this only looks. With drain: true \
they are delivered to you by this answer - act on them, then ack_signals them. Signals also \
arrive on their own in the \"signals\" array of any other tool result. When you have nothing to \
do until someone answers or hands you work, call this with wait_seconds (up to 50) instead of \
calling again and again: it answers as soon as a signal is waiting for you, or after that many \
seconds with an empty list - then call it again if you still want to wait. While it waits you \
count as connected (available).";
    let properties = json!({
        "drain": {"type": "boolean", "default": false, "description": "true: deliver the listed signals to you now."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100, "description": "At most this many signals."},
        "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 50, "default": 0,
                         "description": "If nothing is waiting, wait up to this many seconds for a signal to arrive (default 0: answer at once)."},
    });
    Tool::new("check_inbox", description, schema(properties, &[]))
        .with_title("Check your inbox")
        .with_annotations(annotations(false, false, true))
}

fn ack_signals() -> Tool {
    let description = "Confirm you have handled signals that were delivered to you (by a drain or \
in a \"signals\" array). A delivered signal you never ack is handed to you again, marked \
redelivered: true, in your next session - so ack once you have acted on it. Ids that are not \
yours, not delivered or already acked are ignored.";
    let properties = json!({
        "signal_ids": {"type": "array", "minItems": 1, "maxItems": 1000,
                       "items": {"type": "string", "format": "uuid"},
                       "description": "The id of each signal to ack (the \"id\" field of a delivered signal)."},
    });
    Tool::new("ack_signals", description, schema(properties, &["signal_ids"]))
        .with_title("Acknowledge signals")
        .with_annotations(annotations(false, true, true))
}

fn get_signal() -> Tool {
    let description = "Look up one signal you sent or received: its full record, including \
whether and how it was delivered (delivered_at, delivered_via), acked, expired or recalled. Use it \
to follow up on an async send. A signal that is not yours answers not_found.";
    let properties = json!({ "signal_id": {"type": "string", "format": "uuid", "description": SIGNAL_ID} });
    Tool::new("get_signal", description, schema(properties, &["signal_id"]))
        .with_title("Look up a signal")
        .with_annotations(annotations(true, true, false))
}

fn list_agents() -> Tool {
    let description = "List the agents of your tenant, each with its recipient state right now: \
available (connected: a sync send reaches it), not_available_stale (connected but silent for a \
while), not_available_offline (not connected: only async sends wait for it).";
    Tool::new("list_agents", description, schema(json!({}), &[]))
        .with_title("List agents")
        .with_annotations(annotations(true, true, false))
}

fn record_fact() -> Tool {
    let description = "Record a fact of a plugin you own (plugin named like you, or \
\"<you>/<anything>\"): an append-only log entry whose state also becomes the plugin's current \
state (see plugin_state). Answers the fact's seq. Errors: forbidden (not your plugin), \
payload_too_large (state over 1 MiB).";
    let properties = json!({
        "plugin": {"type": "string", "description": "The plugin name: your identity, or your identity, a slash and a name."},
        "fact_type": {"type": "string", "minLength": 1, "maxLength": 128, "description": "What kind of fact this is."},
        "state": {"type": "object", "description": "The plugin's state as of this fact (a JSON object, at most 1 MiB)."},
    });
    Tool::new("record_fact", description, schema(properties, &["plugin", "fact_type", "state"]))
        .with_title("Record a plugin fact")
        .with_annotations(annotations(false, false, true))
}

fn plugin_state() -> Tool {
    let description = "Read a plugin's current state: the state of its newest fact, with its seq \
and time ({} and seq 0 when it has no facts). Any agent of the tenant may read any plugin.";
    let properties = json!({ "plugin": {"type": "string", "description": "The plugin name."} });
    Tool::new("plugin_state", description, schema(properties, &["plugin"]))
        .with_title("Read plugin state")
        .with_annotations(annotations(true, true, false))
}

fn list_signals() -> Tool {
    let description = "List signals you sent or received, with their status (delivered_at, \
acked_at, expired_at, recalled_at). Without correlation_id: newest first. With correlation_id: \
one conversation - every signal you sent or received with that correlation_id, oldest first, so \
you can read a thread back before answering in it (reply with the same correlation_id to stay in \
it). Only your own signals are listed. If next_cursor is not null there are more: pass it as \
cursor, with the same other arguments.";
    let properties = json!({
        "role": {"type": "string", "enum": ["sent", "received"], "description": "sent or received (default both)."},
        "status": {"type": "string", "enum": ["pending", "delivered", "expired", "recalled"], "description": "Only signals in this state."},
        "correlation_id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "Only this conversation's signals, oldest first."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100, "description": "At most this many."},
        "cursor": {"type": "string", "description": "next_cursor of the previous page, for the next one."},
    });
    Tool::new("list_signals", description, schema(properties, &[]))
        .with_title("List your signals or a conversation")
        .with_annotations(annotations(true, true, false))
}

/// Every tool, in `TOOL_NAMES` order.
pub fn tools() -> Vec<Tool> {
    let tools = vec![
        send_signal(),
        recall_signal(),
        check_inbox(),
        ack_signals(),
        get_signal(),
        list_agents(),
        record_fact(),
        plugin_state(),
        team_tools::create_directive(),
        team_tools::get_directive(),
        team_tools::list_directives(),
        team_tools::update_directive(),
        team_tools::list_groups(),
        list_signals(),
    ];
    tools.into_iter().map(with_scope).collect()
}

/// Every tool is listed to every token; its description says which scope it needs, and a
/// token without it is answered `forbidden` (CONTRACT §17).
fn with_scope(mut tool: Tool) -> Tool {
    let need = crate::scopes::need_tool(&tool.name);
    if let (crate::scopes::Need::Scope(scope), Some(d)) = (need, tool.description.as_mut()) {
        *d = format!("{d} Needs the token scope `{scope}`; a token without it is answered with the error forbidden.")
            .into();
    }
    tool
}

/// The data of the notification announcing that `signal` (a push-frame signal object, or any
/// object with its fields) waits for the agent. It only announces: the signal is delivered by
/// the agent's next tool call, which is what makes it delivered on the stream.
pub fn announcement(signal: &Value) -> Value {
    let pick = |k: &str| signal.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "event": "signal_pending",
        "signal_id": pick("id"),
        "from": pick("from"),
        "type": pick("type"),
        "category": pick("category"),
        "priority": pick("priority"),
        "delivery_class": pick("delivery_class"),
        "expires_at": pick("expires_at"),
        "correlation_id": pick("correlation_id"),
        "next": "call check_inbox with drain: true (or any other tool) to receive it",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_listed_once_with_a_closed_object_schema() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, TOOL_NAMES);
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(t.input_schema["additionalProperties"], false, "{}", t.name);
            assert!(t.description.as_deref().is_some_and(|d| d.len() > 80), "{}", t.name);
            for (field, spec) in t.input_schema["properties"].as_object().unwrap() {
                assert!(spec["description"].is_string(), "{}.{field} has no description", t.name);
            }
        }
    }
}
