//! The stream tail of one gateway process: applies every event to the registry and presence,
//! closes sessions whose token was rotated or whose agent was removed anywhere, and hands every
//! `signal.sent` to the push path and the MCP announcement, so a signal sent through any process
//! reaches a session held by this one.
//!
//! Deliberately never appends: what it reads is already decided. It resumes after a tail
//! error from the last applied sequence, so it never skips an event — except one that cannot
//! be decoded, which is logged and passed.

use std::time::Duration;

use bus::event::EventBody;
use bus::log::Stored;
use futures::StreamExt;
use tokio::sync::watch;

use crate::delivery;
use crate::hub::CloseReason;
use crate::state::Gateway;

pub fn spawn(gw: Gateway, applied: watch::Sender<u64>) {
    let tasks = gw.tasks().clone();
    tasks.spawn(async move {
        let stop = gw.shutdown_token().clone();
        let mut next = 1u64;
        let mut backoff = Duration::from_millis(100);
        loop {
            let tail = tokio::select! {
                _ = stop.cancelled() => return,
                t = gw.log().tail(next) => t,
            };
            match tail {
                Ok(mut stream) => loop {
                    let item = tokio::select! {
                        _ = stop.cancelled() => return,
                        item = stream.next() => item,
                    };
                    match item {
                        Some(Ok(stored)) => {
                            // Sequences are gapless from `next`; anything lower was already applied.
                            if stored.seq < next {
                                continue;
                            }
                            apply(&gw, &stored);
                            next = stored.seq + 1;
                            applied.send_replace(stored.seq);
                            backoff = Duration::from_millis(100);
                        }
                        // Nothing can be derived from it (the projector dead-letters it), and
                        // the tail has moved past it: resuming there would only meet it again
                        // and stop pushes and presence for everyone.
                        Some(Err(bus::Error::Undecodable { seq, subject, reason })) => {
                            tracing::error!(seq, subject, reason, "undecodable event on the stream; skipped");
                            if seq >= next {
                                next = seq + 1;
                                applied.send_replace(seq);
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, next, "stream tail failed; resuming");
                            break;
                        }
                        None => {
                            tracing::warn!(next, "stream tail ended; resuming");
                            break;
                        }
                    }
                },
                Err(e) => tracing::warn!(error = %e, next, "could not open the stream tail; retrying"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
}

fn apply(gw: &Gateway, stored: &Stored) {
    let event = &stored.event;
    gw.registry().apply(stored.seq, event);
    gw.presence().apply(event);
    match &event.body {
        EventBody::TokenRotated(r) => gw.hub().close_stale_tokens(&event.tenant, &r.identity, &r.token_hash),
        EventBody::AgentRemoved(r) => {
            gw.hub().close_identity(&event.tenant, &r.identity, CloseReason::AgentRemoved);
        }
        EventBody::SignalSent(sent) => {
            delivery::on_sent(gw, &event.tenant, sent, stored.seq);
            crate::mcp::announce(gw, &event.tenant, sent);
        }
        EventBody::SignalDelivered(d) => gw.confirmations().delivered(d.signal_id),
        _ => {}
    }
}
