//! The stream tail of one gateway process: applies every event to the registry and presence,
//! closes sessions whose token was rotated anywhere, and hands every `signal.sent` to the
//! push path, so a signal sent through any process reaches a session held by this one.
//!
//! Deliberately never appends: what it reads is already decided. It resumes after a tail
//! error from the last applied sequence, so it never skips an event.

use std::time::Duration;

use bus::event::EventBody;
use bus::log::Stored;
use futures::StreamExt;
use tokio::sync::watch;

use crate::delivery;
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
    gw.registry().apply(event);
    gw.presence().apply(event);
    match &event.body {
        EventBody::TokenRotated(r) => gw.hub().close_stale_tokens(&event.tenant, &r.identity, &r.token_hash),
        EventBody::SignalSent(sent) => delivery::on_sent(gw, &event.tenant, sent, stored.seq),
        _ => {}
    }
}
