//! Sends to a group (CONTRACT §15) and the one entry point every surface sends through
//! (`send_any`: an identity goes to `send::send`, `@name` fans out here), and recalling many.
//!
//! A fan-out is one ordinary signal per member, each recorded with its own compare-and-set
//! (`SignalStore::record_fanout`), so each entry of the answer is true on its own (§13): an
//! accepted one is on the stream, an `unavailable` one is not, and a repeat with the same
//! `dedupe_key` answers the accepted ones with their originals and fills in the rest.
//!
//! Deliberately decides nothing: `bus::fanout::plan_fanout` plans every member (ids, refusals),
//! and a member's answer is built like a single send's (`send::repeat`, `send::give_up_sync`).

use std::collections::HashMap;

use bus::catalog::DeliveryClass;
use bus::event::PublishPath;
use bus::fanout::{plan_fanout, FanoutLimits};
use bus::group_store::MemberSent;
use bus::names::is_group;
use bus::send::SendRequest;
use chrono::Utc;
use futures::StreamExt;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::delivery::confirm::Watch;
use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::{RecallMany, SendAnswer, SendResponse};
use crate::{metrics, reads, send, wire};

/// Sends `req` from `(tenant, from)` to an identity or, when `to` is `@name`, to a group.
pub async fn send_any(gw: &Gateway, tenant: &str, from: &str, req: SendRequest) -> Result<SendAnswer, ApiError> {
    if is_group(&req.to) {
        send_to_group(gw, tenant, from, req).await.map(SendAnswer::Fanout)
    } else {
        send::send(gw, tenant, from, req).await.map(SendAnswer::One)
    }
}

/// Fans `req` out to every member of group `req.to` other than `from`.
pub async fn send_to_group(gw: &Gateway, tenant: &str, from: &str, req: SendRequest) -> Result<Value, ApiError> {
    let cfg = gw.config();
    bus::names::validate_group(&req.to)?;
    let (group, _) = gw.store().load_group(tenant, &req.to).await?;
    if !group.exists {
        return Err(ApiError::UnknownGroup(req.to.clone()));
    }
    let members: Vec<String> = group.members.into_iter().collect();
    // Each member's signal is a send: the quota is charged per member (at most a full bucket,
    // so a fan-out to a large group is slow but always possible).
    let cost = members.iter().filter(|m| *m != from).count().max(1) as u32;
    if let Err(wait) = gw.limiter().check_n(tenant, from, cost) {
        metrics::rate_limited();
        let message = format!("{from} is over its send rate; retry in {} ms", wait.as_millis().max(1));
        return Err(ApiError::rate_limited(message, wait));
    }
    gw.backpressure().admit().await;
    let limits =
        FanoutLimits { types: &cfg.types, send: cfg.send_limits(), max_fanout: cfg.max_fanout, now: Utc::now() };
    let signal_type = req.signal_type.clone();
    let plan =
        plan_fanout(limits, tenant, from, req, &members, |to| reads::recipient_view(gw, tenant, to, limits.now))?;
    // Watched before the appends, so a push recorded at once is not missed.
    let mut watches: HashMap<Uuid, Watch> = plan
        .members
        .iter()
        .filter(|m| {
            matches!(&m.decision, Ok(bus::send::SendDecision::Accepted(s)) if s.publish_path == PublishPath::PushedToWs)
        })
        .map(|m| (m.signal_id, gw.confirmations().watch(m.signal_id)))
        .collect();
    let sent = gw.store().record_fanout(tenant, from, plan).await;
    // A fan-out counts once, when it sent something: a dedupe repeat that only found the
    // members' originals is not a second fan-out.
    if sent.results.iter().any(|m| m.outcome.as_ref().is_ok_and(|r| r.created)) {
        metrics::fanout(&cfg.types, &signal_type);
    }
    let entries: Vec<(MemberSent, Option<Watch>)> = sent
        .results
        .into_iter()
        .map(|m| {
            let w = watches.remove(&m.signal_id);
            (m, w)
        })
        .collect();
    let results: Vec<Value> = futures::stream::iter(entries)
        .map(|(m, watch)| member_answer(gw, tenant, &signal_type, m, watch))
        .buffered(bus::group_store::FANOUT_CONCURRENCY)
        .collect()
        .await;
    Ok(json!({ "fanout_id": sent.fanout_id, "to": sent.to, "results": results }))
}

/// One member's entry: the §4 answer of its signal, or its error object.
async fn member_answer(gw: &Gateway, tenant: &str, signal_type: &str, m: MemberSent, watch: Option<Watch>) -> Value {
    let to = m.to.clone();
    let answer = match m.outcome {
        Ok(recorded) if !recorded.created => send::repeat(gw, tenant, m.signal_id, &recorded.state).await,
        Ok(recorded) => accepted(gw, tenant, signal_type, m.signal_id, recorded, watch).await,
        Err(e) => Err(e.into()),
    };
    let mut v = match answer {
        Ok(r) => r.to_json(),
        Err(e) => json!({ "error": e.to_json() }),
    };
    v["to"] = json!(to);
    v
}

/// The answer of a member's signal this call recorded.
async fn accepted(
    gw: &Gateway,
    tenant: &str,
    signal_type: &str,
    signal_id: Uuid,
    recorded: bus::store::SendRecorded,
    watch: Option<Watch>,
) -> Result<SendResponse, ApiError> {
    let cfg = gw.config();
    let Some(sent) = recorded.state.sent.as_deref() else {
        let state = send::bounce_state(gw, tenant, signal_id).await?;
        metrics::bounced(&cfg.types, signal_type, state);
        return Err(wire::bounce(signal_id, state));
    };
    let delivered = match watch {
        Some(w) if w.delivered_within(cfg.push_confirm_timeout).await => true,
        Some(_) if sent.delivery_class == DeliveryClass::Sync => return send::give_up_sync(gw, tenant, sent).await,
        _ => false,
    };
    metrics::sent(&cfg.types, &sent.signal_type, sent.delivery_class, sent.recipient_state, sent.publish_path);
    Ok(SendResponse::new(sent, delivered, !delivered, sent.resolved_to_session))
}

/// Recalls each of the caller's signals `what` names (CONTRACT §15): `{"results": [{"signal_id",
/// "to","outcome"}]}`, each decided on its own. Another's fan-out or conversation names none of
/// the caller's signals, so it answers `results: []`, exactly as one that does not exist.
pub async fn recall_many(gw: &Gateway, tenant: &str, by: &str, what: RecallMany) -> Result<Value, ApiError> {
    reads::consistent(gw).await;
    let rows = match &what {
        RecallMany::Fanout(id) => gw.queries().signals_by_fanout(tenant, by, *id).await?,
        RecallMany::Correlation(c) => gw.queries().signals_by_correlation(tenant, by, c).await?,
    };
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let to: HashMap<Uuid, String> = rows.into_iter().map(|r| (r.id, r.to_identity)).collect();
    let entries = gw.store().recall_many(tenant, by, &ids, Utc::now()).await;
    let mut results = Vec::with_capacity(entries.len());
    for e in entries {
        let mut v = json!({ "signal_id": e.signal_id, "to": to.get(&e.signal_id) });
        // Each entry is true on its own: one the stream could not decide says so.
        match e.outcome {
            Ok(outcome) => {
                metrics::recall(outcome);
                v["outcome"] = json!(outcome.as_str());
            }
            Err(err) => v["error"] = ApiError::from(err).to_json(),
        }
        results.push(v);
    }
    Ok(json!({ "results": results }))
}
