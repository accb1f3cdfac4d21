//! Runs one piece of a session's work off its read loop — a decoded client operation, a batch
//! of acks, a heartbeat — and builds the frame to answer with, if any.
//!
//! Deliberately holds no protocol state: the session loop decides what runs when (and how
//! much at once), batches acks itself, and queues what this returns; decoding happened before
//! (`frames.rs`).

use bus::signal::RecallOutcome;
use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use crate::api::ws::frames::{self, ClientFrame, DirectiveOp, Op};
use crate::error::ApiError;
use crate::sessions::hub::SessionHandle;
use crate::state::Gateway;
use crate::{commands, directives, fanout, metrics, scopes, wire};

/// What a session runs concurrently with reading further frames.
#[derive(Debug)]
pub enum Work {
    /// A client operation other than `ack` (acks are batched by the loop); answered with a
    /// `result` frame.
    Op(ClientFrame),
    /// Acks the loop batched; no frame.
    Acks(Vec<Uuid>),
    /// The session's heartbeat event; no frame.
    Heartbeat,
}

/// Runs `work` and returns the frame to answer with, if any.
pub async fn run(gw: &Gateway, session: &SessionHandle, work: Work) -> Option<String> {
    match work {
        Work::Op(frame) => Some(op(gw, session, frame).await),
        Work::Acks(ids) => {
            commands::ack(gw, &session.tenant, &session.identity, Some(session), &ids).await;
            None
        }
        Work::Heartbeat => {
            record_heartbeat(gw, session).await;
            None
        }
    }
}

/// The `result` frame of an `ack` op: acks are recorded with the session's next batch, so the
/// answer only counts them.
pub fn acked(reference: Option<&str>, n: usize) -> String {
    frames::result_ok(reference, &json!({ "acked": n }))
}

/// The name `scopes::WS_OPS` knows an op by.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Send(_) => "send",
        Op::Recall(_) | Op::RecallMany(_) => "recall",
        Op::Directive(DirectiveOp::Create(_)) => "directive create",
        Op::Directive(DirectiveOp::Get { .. }) => "directive get",
        Op::Directive(DirectiveOp::Act { .. }) => "directive start|progress|complete|fail|reject|cancel",
        Op::Ack(_) => "ack",
        Op::Fact { .. } => "fact",
        Op::Ping => "ping",
    }
}

async fn op(gw: &Gateway, session: &SessionHandle, frame: ClientFrame) -> String {
    let reference = frame.reference.as_deref();
    if let Err(e) = scopes::check(session.scopes, scopes::need_ws(op_name(&frame.op))) {
        return frames::result_err(reference, &e);
    }
    let (tenant, identity) = (session.tenant.as_str(), session.identity.as_str());
    let result = match frame.op {
        // Serialized straight into the frame: the hot path builds no `Value`.
        Op::Send(req) => {
            return match fanout::send_any(gw, tenant, identity, req).await {
                Ok(answer) => frames::send_result(reference, &answer),
                Err(e) => frames::result_err(reference, &e),
            }
        }
        Op::Recall(None) => {
            metrics::recall(RecallOutcome::NotFound);
            Ok(json!({ "outcome": RecallOutcome::NotFound.as_str() }))
        }
        Op::RecallMany(what) => fanout::recall_many(gw, tenant, identity, what).await,
        Op::Directive(op) => directive(gw, tenant, identity, op).await,
        Op::Recall(Some(id)) => {
            commands::recall(gw, tenant, identity, id).await.map(|o| json!({ "outcome": o.as_str() }))
        }
        // The loop batches acks; one that reaches here anyway is recorded at once.
        Op::Ack(ids) => {
            commands::ack(gw, tenant, identity, Some(session), &ids).await;
            return acked(reference, ids.len());
        }
        Op::Fact { plugin, fact_type, state } => {
            commands::fact(gw, tenant, commands::FactAuthor::Agent(identity), &plugin, &fact_type, state)
                .await
                .map(|recorded| wire::fact_recorded(&recorded))
        }
        Op::Ping => return frames::pong(reference),
    };
    match result {
        Ok(v) => frames::result_ok(reference, &v),
        Err(e) => frames::result_err(reference, &e),
    }
}

async fn directive(gw: &Gateway, tenant: &str, identity: &str, op: DirectiveOp) -> Result<serde_json::Value, ApiError> {
    let unknown = || ApiError::from(bus::DomainError::UnknownDirective);
    match op {
        DirectiveOp::Create(req) => directives::create(gw, tenant, identity, req).await.map(|c| c.directive),
        DirectiveOp::Get { directive_id, wait } => {
            directives::get(gw, tenant, identity, directive_id.ok_or_else(unknown)?, wait).await
        }
        DirectiveOp::Act { directive_id, action } => {
            directives::act(gw, tenant, identity, directive_id.ok_or_else(unknown)?, action).await
        }
    }
}

pub async fn record_heartbeat(gw: &Gateway, handle: &SessionHandle) {
    // A session that does not receive is no presence session: nothing of it is on the stream.
    if !handle.agent.receives() {
        return;
    }
    gw.lifecycle().record_heartbeat(handle.id, &handle.tenant, &handle.identity, Utc::now()).await;
}
