//! The send flow (CONTRACT §4), shared by `POST /v1/signals` and the WebSocket `send` op:
//! resolve the recipient from registry and presence, let `bus::send` decide, record it with the
//! per-signal compare-and-set, and answer — including the original answer for a dedupe repeat.
//!
//! Deliberately does not push: the pushing node learns of the send from the stream tail, the
//! same way whether the sender is on this process or another.

use bus::event::{EventBody, PublishPath};
use bus::send::{decide_send, RecipientView, SendDecision, SendRequest};
use bus::signal::Status;
use chrono::Utc;
use serde_json::Value;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::Gateway;
use crate::{metrics, wire};

/// Sends `req` from `(tenant, from)` and returns the accepted-send response body.
pub async fn send(gw: &Gateway, tenant: &str, from: &str, req: SendRequest) -> Result<Value, ApiError> {
    let cfg = gw.config();
    if let Err(wait) = gw.limiter().check(tenant, from) {
        metrics::rate_limited();
        return Err(ApiError::RateLimited(format!(
            "{from} is over its send rate; retry in {} ms",
            wait.as_millis().max(1)
        )));
    }
    let now = Utc::now();
    let registered = gw.registry().is_registered(tenant, &req.to);
    let resolution = gw.presence().resolve(tenant, &req.to, now, cfg.stale_after);
    let view = RecipientView { registered, state: resolution.state, has_live_ws: resolution.has_live_ws };
    let signal_type = req.signal_type.clone();
    let decision = match decide_send(&cfg.types, tenant, from, req, view, now, cfg.max_payload_bytes) {
        Ok(d) => d,
        Err(bus::DomainError::UnknownRecipient) => {
            metrics::unknown_recipient(&cfg.types, &signal_type, from);
            return Err(ApiError::UnknownRecipient);
        }
        Err(e) => return Err(e.into()),
    };
    let mut decision = decision;
    let (signal_id, bounced_state) = match &mut decision {
        SendDecision::Accepted(s) => {
            // Recorded with the send, so a dedupe repeat answers the session the original did.
            if s.publish_path != PublishPath::QueuedOffline {
                s.resolved_to_session = resolution.resolved.as_ref().map(|(id, _)| *id);
            }
            (s.signal_id, None)
        }
        SendDecision::Bounced(b) => (b.signal_id, Some(b.recipient_state)),
    };
    let recorded = gw.store().record_send(tenant, from, decision, now).await?;
    if !recorded.created {
        return repeat(gw, tenant, signal_id, &recorded.state).await;
    }
    match (&recorded.state.sent, recorded.state.bounced) {
        (Some(sent), _) => {
            metrics::sent(&cfg.types, &sent.signal_type, sent.delivery_class, sent.recipient_state, sent.publish_path);
            let (delivered, queued) = wire::fresh_flags(sent.publish_path);
            Ok(wire::SendResponse { sent, delivered, queued, resolved_to_session: sent.resolved_to_session }.to_json())
        }
        (None, true) => {
            let state = match bounced_state {
                Some(s) => s,
                None => bounce_state(gw, tenant, signal_id).await?,
            };
            metrics::bounced(&cfg.types, &signal_type, state);
            Err(wire::bounce(signal_id, state))
        }
        (None, false) => Err(ApiError::Internal),
    }
}

/// The answer to a repeated dedupe key: the original signal with its current state.
async fn repeat(
    gw: &Gateway,
    tenant: &str,
    signal_id: Uuid,
    state: &bus::signal::SignalState,
) -> Result<Value, ApiError> {
    if let Some(sent) = state.sent.as_deref() {
        let delivered = matches!(state.status, Status::Delivered { .. })
            || (sent.publish_path == PublishPath::PushedToWs && state.status == Status::Pending);
        let queued = !delivered && state.status == Status::Pending;
        let resolved = state.last_delivery.as_ref().and_then(|d| d.session_id).or(sent.resolved_to_session);
        return Ok(wire::SendResponse { sent, delivered, queued, resolved_to_session: resolved }.to_json());
    }
    if state.bounced {
        return Err(wire::bounce(signal_id, bounce_state(gw, tenant, signal_id).await?));
    }
    Err(ApiError::Internal)
}

/// The recipient state a bounce recorded.
async fn bounce_state(gw: &Gateway, tenant: &str, signal_id: Uuid) -> Result<bus::event::RecipientState, ApiError> {
    let subject = gw.log().subjects().of(tenant, bus::event::Entity::Signal(signal_id));
    let stored = gw.log().read_subject(&subject).await?;
    stored
        .iter()
        .find_map(|s| match &s.event.body {
            EventBody::SignalBounced(b) => Some(b.recipient_state),
            _ => None,
        })
        .ok_or(ApiError::Internal)
}
