//! The send flow (CONTRACT §4), shared by `POST /v1/signals` and the WebSocket `send` op:
//! resolve the recipient from registry and presence, let `bus::send` decide, record it with the
//! per-signal compare-and-set, and answer — including the original answer for a dedupe repeat.
//!
//! A send that resolved to a live WebSocket session answers `delivered: true` only once the
//! push is recorded on the stream (CONTRACT §13); a sync one whose push is not recorded within
//! `push_confirm_timeout` is given up on the stream and answered `recipient_unavailable`.
//!
//! Pushes only what it can record in the send's own event: when this process holds the
//! recipient's session, the send and the push are one append (`delivery::push::PushAtSend`);
//! otherwise the pushing node learns of the send from the stream tail.

use bus::catalog::DeliveryClass;
use bus::event::{EventBody, PublishPath, RecipientState, SignalSent};
use bus::send::{decide_send, RecipientView, SendDecision, SendRequest};
use bus::signal::{SignalCommand, SignalState, Status};
use bus::store::SendRecorded;
use chrono::Utc;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::SendResponse;
use crate::{metrics, wire};

/// The actor of events the gateway records on its own behalf.
const GATEWAY_ACTOR: &str = "signalbus/gateway";

/// Sends `req` from `(tenant, from)` and returns the accepted-send response body.
pub async fn send(gw: &Gateway, tenant: &str, from: &str, req: SendRequest) -> Result<SendResponse, ApiError> {
    let cfg = gw.config();
    if let Err(wait) = gw.limiter().check(tenant, from) {
        metrics::rate_limited();
        let message = format!("{from} is over its send rate; retry in {} ms", wait.as_millis().max(1));
        return Err(ApiError::rate_limited(message, wait));
    }
    // Held while the read models trail too far (never refused; see `backpressure.rs`), before
    // anything is resolved against the clock or presence.
    gw.backpressure().admit().await;
    let now = Utc::now();
    let registered = gw.registry().is_registered(tenant, &req.to);
    let resolution = gw.presence().resolve(tenant, &req.to, now, cfg.stale_after);
    let view = RecipientView {
        registered,
        state: resolution.state,
        has_live_ws: resolution.has_live_ws,
        freshest_session: resolution.resolved.as_ref().map(|(id, _)| *id),
    };
    let signal_type = req.signal_type.clone();
    let mut decision = match decide_send(&cfg.types, tenant, from, req, view, now, cfg.send_limits()) {
        Ok(d) => d,
        Err(bus::DomainError::UnknownRecipient) => {
            metrics::unknown_recipient(&cfg.types, &signal_type, from);
            return Err(ApiError::UnknownRecipient);
        }
        Err(e) => return Err(e.into()),
    };
    let (signal_id, bounced_state) = match &decision {
        SendDecision::Accepted(s) => (s.signal_id, None),
        SendDecision::Bounced(b) => (b.signal_id, Some(b.recipient_state)),
    };
    let pushing = matches!(&decision, SendDecision::Accepted(s) if s.publish_path == PublishPath::PushedToWs);
    // The recipient's session is here: record the send and its push in one event.
    let at_send = if pushing { gw.deliverer().reserve_push_at_send(resolution.resolved.as_ref()) } else { None };
    if let (SendDecision::Accepted(sent), Some(push)) = (&mut decision, &at_send) {
        sent.pushed_to = Some(push.session_id());
    }
    // Watched before the append, so a push recorded at once is not missed.
    let watch = (pushing && at_send.is_none()).then(|| gw.confirmations().watch(signal_id));
    let recorded = match decision {
        SendDecision::Accepted(sent) if bus::send::may_gather(&sent, now) => {
            match gw.sends().record(tenant, sent).await {
                Ok(answer) => {
                    let (seq, sent) = answer?;
                    SendRecorded { state: SignalState::from_event(EventBody::SignalSent(sent)), created: true, seq }
                }
                // The batcher is stopping: recorded alone.
                Err(sent) => gw.store().record_send(tenant, from, SendDecision::Accepted(sent), now).await?,
            }
        }
        decision => gw.store().record_send(tenant, from, decision, now).await?,
    };
    if !recorded.created {
        return repeat(gw, tenant, signal_id, &recorded.state).await;
    }
    match (&recorded.state.sent, recorded.state.bounced) {
        (Some(sent), _) => {
            let delivered = match (at_send, watch) {
                (Some(push), _) => {
                    push.complete(gw.deliverer(), sent);
                    true
                }
                (None, Some(w)) if w.delivered_within(cfg.push_confirm_timeout).await => true,
                (None, Some(_)) if sent.delivery_class == DeliveryClass::Sync => {
                    return give_up_sync(gw, tenant, sent).await;
                }
                _ => false,
            };
            metrics::sent(&cfg.types, &sent.signal_type, sent.delivery_class, sent.recipient_state, sent.publish_path);
            Ok(SendResponse::new(sent, delivered, !delivered, sent.resolved_to_session))
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

/// A sync send whose push was not recorded in time (the session or its gateway is gone, or the
/// socket is stuck): it ends here, expired as undeliverable, and the sender hears
/// `recipient_unavailable` — unless a delivery got onto the stream first, which the
/// compare-and-set reveals and the answer then reports.
pub(crate) async fn give_up_sync(gw: &Gateway, tenant: &str, sent: &SignalSent) -> Result<SendResponse, ApiError> {
    let cfg = gw.config();
    let now = Utc::now();
    let outcome = gw.store().execute(tenant, sent.signal_id, &SignalCommand::Abandon, GATEWAY_ACTOR, now).await;
    let state = match outcome {
        Ok(executed) => executed.state,
        Err(bus::Error::Domain(_)) => gw.store().load(tenant, sent.signal_id).await?.0,
        Err(e) => {
            // The give-up is not on the stream, so the signal is pending and will be pushed:
            // say so rather than guess a bounce.
            tracing::warn!(error = %e, signal_id = %sent.signal_id, "sync push unconfirmed and could not be given up");
            metrics::sent(&cfg.types, &sent.signal_type, sent.delivery_class, sent.recipient_state, sent.publish_path);
            return Ok(SendResponse::new(sent, false, true, sent.resolved_to_session));
        }
    };
    if matches!(state.status, Status::Delivered { .. }) {
        metrics::sent(&cfg.types, &sent.signal_type, sent.delivery_class, sent.recipient_state, sent.publish_path);
        return Ok(SendResponse::new(sent, true, false, sent.resolved_to_session));
    }
    let now_state = gw.presence().resolve(tenant, &sent.to, Utc::now(), cfg.stale_after).state;
    let answered = bus::send::unreachable_state(now_state);
    tracing::info!(signal_id = %sent.signal_id, to = %sent.to, "sync push not confirmed in time; answered recipient_unavailable");
    metrics::bounced(&cfg.types, &sent.signal_type, answered);
    Err(wire::bounce(sent.signal_id, answered))
}

/// The answer to a repeated dedupe key: the original signal with its current state.
pub(crate) async fn repeat(
    gw: &Gateway,
    tenant: &str,
    signal_id: Uuid,
    state: &bus::signal::SignalState,
) -> Result<SendResponse, ApiError> {
    if let Some(sent) = state.sent.as_deref() {
        let delivered = matches!(state.status, Status::Delivered { .. });
        // A sync send that was given up answered a bounce; its repeat does too.
        if state.answered_as_bounce() {
            return Err(wire::bounce(signal_id, RecipientState::NotAvailableOffline));
        }
        let queued = !delivered && state.status == Status::Pending;
        let resolved = state.last_delivery.as_ref().and_then(|d| d.session_id).or(sent.resolved_to_session);
        return Ok(SendResponse::new(sent, delivered, queued, resolved));
    }
    if state.bounced {
        return Err(wire::bounce(signal_id, bounce_state(gw, tenant, signal_id).await?));
    }
    Err(ApiError::Internal)
}

/// The recipient state a bounce recorded.
pub(crate) async fn bounce_state(
    gw: &Gateway,
    tenant: &str,
    signal_id: Uuid,
) -> Result<bus::event::RecipientState, ApiError> {
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
