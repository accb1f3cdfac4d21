//! The writing half of one WebSocket: sends queued text frames in order, with pings and the
//! close frame going ahead of any queued data.
//!
//! Frames already queued when one is written go out with it, in one flush: under load a
//! session gets pushes, results and ack replies in bursts, and a write syscall (plus a TCP
//! segment for the client to read) per frame was a visible share of the throughput profile.
//! A lone frame is still flushed at once, so batching costs no latency.
//!
//! Deliberately decides nothing: what to send and when to close is the session loop's call.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::SplitSink;
use futures::SinkExt;
use tokio::sync::mpsc;

use crate::hub::Control;

/// Most queued frames written before one flush; bounds how long a ping waits behind data.
const BATCH: usize = 64;

pub async fn run(
    mut sink: SplitSink<WebSocket, Message>,
    mut data: mpsc::Receiver<String>,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    loop {
        let msg = tokio::select! {
            biased;
            c = control.recv() => match c {
                Some(Control::Ping) => Message::Ping(Default::default()),
                Some(Control::Close(reason)) => {
                    let frame = CloseFrame { code: reason.code(), reason: reason.text().into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    break;
                }
                None => break,
            },
            d = data.recv() => match d {
                Some(text) => Message::Text(text.into()),
                None => break,
            },
        };
        let is_data = matches!(msg, Message::Text(_));
        if sink.feed(msg).await.is_err() {
            break;
        }
        if is_data {
            let mut more = 0;
            let mut failed = false;
            while more < BATCH {
                let Ok(text) = data.try_recv() else { break };
                if sink.feed(Message::Text(text.into())).await.is_err() {
                    failed = true;
                    break;
                }
                more += 1;
            }
            if failed {
                break;
            }
        }
        if sink.flush().await.is_err() {
            break;
        }
    }
    let _ = sink.close().await;
}
