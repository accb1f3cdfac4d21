//! The writing half of one WebSocket: sends queued text frames in order, with pings and the
//! close frame going ahead of any queued data.
//!
//! Deliberately decides nothing: what to send and when to close is the session loop's call.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures::stream::SplitSink;
use futures::SinkExt;
use tokio::sync::mpsc;

use crate::hub::Control;

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
        if sink.send(msg).await.is_err() {
            break;
        }
    }
    let _ = sink.close().await;
}
