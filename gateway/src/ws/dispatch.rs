//! Runs one decoded client operation for a session and builds its `result` frame.
//!
//! Deliberately holds no protocol state: acks are handed back to the session loop, which
//! batches them, and decoding happened before (`frames.rs`).

use bus::signal::RecallOutcome;
use serde_json::json;
use uuid::Uuid;

use crate::hub::SessionHandle;
use crate::state::Gateway;
use crate::ws::frames::{self, ClientFrame, Op};
use crate::{commands, metrics, send};

/// Runs `frame` and returns the frame to answer with. Ack ids are appended to `acks` to be
/// recorded with the session's next batch.
pub async fn run(gw: &Gateway, session: &SessionHandle, frame: ClientFrame, acks: &mut Vec<Uuid>) -> String {
    let reference = frame.reference.as_deref();
    let (tenant, identity) = (session.tenant.as_str(), session.identity.as_str());
    let result = match frame.op {
        Op::Send(req) => send::send(gw, tenant, identity, req).await,
        Op::Recall(None) => {
            metrics::recall(RecallOutcome::NotFound);
            Ok(json!({ "outcome": RecallOutcome::NotFound.as_str() }))
        }
        Op::Recall(Some(id)) => {
            commands::recall(gw, tenant, identity, id).await.map(|o| json!({ "outcome": o.as_str() }))
        }
        Op::Ack(ids) => {
            let n = ids.len();
            acks.extend(ids);
            Ok(json!({ "acked": n }))
        }
        Op::Fact { plugin, fact_type, state } => {
            commands::fact(gw, tenant, identity, &plugin, &fact_type, &state).await.map(|seq| json!({ "seq": seq }))
        }
        Op::Ping => return frames::pong(reference),
    };
    match result {
        Ok(v) => frames::result_ok(reference, v),
        Err(e) => frames::result_err(reference, &e),
    }
}
