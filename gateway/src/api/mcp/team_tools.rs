//! The MCP tools for working as a team (CONTRACT §14, §15): directives — `create_directive`,
//! `get_directive`, `list_directives`, `update_directive` — and `list_groups`, with input
//! schemas whose descriptions are written for the model that reads them.
//!
//! Deliberately data only, like `catalog.rs` (which lists these beside the signal tools).

use rmcp::model::Tool;
use serde_json::json;

use super::catalog::{annotations, schema};

const DIRECTIVE_ID: &str =
    "The directive_id create_directive answered, or the correlation_id of a Directive* signal (a uuid).";

pub fn create_directive() -> Tool {
    let description = "Hand a piece of work to another agent, or to a group (to: \"@name\", any \
one member takes it), and have the bus follow it to its end. Unlike a signal, a directive has a \
lifecycle on record: requested -> started -> completed | failed, or rejected (the assignee, or \
every member of the group, declined), canceled (you called it off) or expired (its deadline \
passed). You learn of each step through signals with correlation_id = the directive_id: \
DirectiveStarted, DirectiveCompleted (its payload's result is the answer), DirectiveFailed, \
DirectiveRejected, DirectiveExpired; or call get_directive with wait_seconds. Always pass an \
idempotency_key you can repeat: creating again with the same key answers the same directive \
instead of handing the work out twice (the same key with other to/type/params is \
idempotency_conflict). Errors: unknown_recipient, unknown_group, forbidden (the deployment's \
policy does not let you create this type), invalid_request, payload_too_large (params over 64 KiB).";
    let properties = json!({
        "to": {"type": "string", "description": "The assignee: an agent's identity (list_agents), or a group as @name (list_groups)."},
        "type": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.]{0,63}$", "description": "What kind of work, dotted like package.install or review.code; workers pick directives by type."},
        "params": {"type": "object", "description": "The work's inputs as a JSON object (default {}), at most 64 KiB. Values under keys like password or token are redacted before storage."},
        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Your own unique name for this piece of work (e.g. \"deploy-web-2026-11-25\"). Reuse it on a retry; never reuse it for different work."},
        "deadline_seconds": {"type": "integer", "minimum": 1, "maximum": 2_592_000, "description": "Seconds until the bus expires the directive if it has not ended (default 24 hours)."},
        "correlation_id": {"type": "string", "maxLength": 64, "description": "Your own id tying this directive to a larger task."},
    });
    Tool::new("create_directive", description, schema(properties, &["to", "type", "idempotency_key"]))
        .with_title("Hand out work (create a directive)")
        .with_annotations(annotations(false, true, false))
}

pub fn get_directive() -> Tool {
    let description = "Look up a directive you issued or were handed: its status, who claimed \
it, progress, result or failure. With wait_seconds the call waits until the directive has ended \
(completed, failed, rejected, canceled or expired) or the time is up, and answers it as it then \
is - use it to wait for work you handed out instead of calling again and again. A directive you \
are no party to answers not_found.";
    let properties = json!({
        "directive_id": {"type": "string", "format": "uuid", "description": DIRECTIVE_ID},
        "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 50, "description": "Wait up to this many seconds for the directive to end (default 0: answer at once)."},
    });
    Tool::new("get_directive", description, schema(properties, &["directive_id"]))
        .with_title("Look up a directive")
        .with_annotations(annotations(true, true, false))
}

pub fn list_directives() -> Tool {
    let description = "List directives, newest first: role issued (work you handed out) or \
assigned (work handed to you or to a group you are in), optionally only open ones (requested or \
started: still to do) or one status or type. Use role assigned, status requested to find work \
waiting for you.";
    let properties = json!({
        "role": {"type": "string", "enum": ["issued", "assigned"], "description": "issued or assigned (default both)."},
        "status": {"type": "string", "enum": ["open", "requested", "started", "completed", "failed", "rejected", "canceled", "expired"], "description": "open (requested or started), or one status."},
        "type": {"type": "string", "description": "Only directives of this type."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100, "description": "At most this many."},
        "before": {"type": "string", "description": "next_before of the previous page, for the next one."},
    });
    Tool::new("list_directives", description, schema(properties, &[]))
        .with_title("List directives")
        .with_annotations(annotations(true, true, false))
}

pub fn update_directive() -> Tool {
    let description = "Act on a directive. As its worker (the assignee, or a member of its \
group): start (claims it - for a group, the first member to start gets it and the others are \
told already_claimed), progress (message and/or percent, after start), complete (result: your \
answer as a JSON object), fail (failure: {code, message} - you tried and could not do it), \
reject (you decline it without trying; a group's directive is rejected once every member \
declined). complete and fail also work straight from requested. As its issuer: cancel (reason \
optional). Answers the directive after the action. Errors: invalid_transition (the directive is \
no longer in a state that allows it - the error carries the directive, e.g. it already ended), \
already_claimed, forbidden (not your part: only the issuer cancels, only workers do the rest).";
    let properties = json!({
        "directive_id": {"type": "string", "format": "uuid", "description": DIRECTIVE_ID},
        "action": {"type": "string", "enum": ["start", "progress", "complete", "fail", "reject", "cancel"], "description": "What to do; the other fields are this action's body."},
        "message": {"type": "string", "maxLength": 1000, "description": "progress: what you are doing now."},
        "percent": {"type": "integer", "minimum": 0, "maximum": 100, "description": "progress: how far along (0-100)."},
        "result": {"type": "object", "description": "complete: the outcome as a JSON object (at most 64 KiB)."},
        "failure": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}, "required": ["code"], "description": "fail: a short code and a message saying why."},
        "reason": {"type": "string", "maxLength": 1000, "description": "reject or cancel: why (optional)."},
    });
    Tool::new("update_directive", description, schema(properties, &["directive_id", "action"]))
        .with_title("Act on a directive")
        .with_annotations(annotations(false, false, true))
}

pub fn list_groups() -> Tool {
    let description = "List the groups of your tenant with their members. Send a signal to every \
member but yourself with send_signal to: \"@name\" (one signal each, with one fanout_id), or hand \
work to whichever member takes it first with create_directive to: \"@name\".";
    Tool::new("list_groups", description, schema(json!({}), &[]))
        .with_title("List groups")
        .with_annotations(annotations(true, true, false))
}
