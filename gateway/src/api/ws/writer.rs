//! The writing half of one WebSocket: sends queued text frames in order, with pings and the
//! close frame going ahead of any queued data.
//!
//! Frames already queued when one is written go out with it, in one flush: under load a
//! session gets pushes, results and ack replies in bursts, and a write syscall (plus a TCP
//! segment for the client to read) per frame was a visible share of the throughput profile.
//! A lone frame is still flushed at once, so batching costs no latency.
//!
//! A close never waits on the client: a write blocked on a socket nobody reads is abandoned when
//! the close comes, the queue is dropped, and the close frame gets a bounded time to go out.
//!
//! Deliberately decides nothing: what to send and when to close is the session loop's call.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message};
use futures::{Sink, SinkExt};
use tokio::sync::mpsc;

use crate::sessions::hub::{CloseReason, Control};

/// Most queued frames written before one flush; bounds how long a ping waits behind data.
const BATCH: usize = 64;
/// How long a closing session tries to get its close frame out. A client that stopped reading
/// never takes it: past this the socket is dropped without one. Long enough for a client that
/// was merely slow (or a loaded machine) to read up to the close frame.
const CLOSE_SEND_TIMEOUT: Duration = Duration::from_secs(3);

/// Writes the session's frames to `sink` (the socket's write half) until the session closes.
pub async fn run<S: Sink<Message> + Unpin>(
    mut sink: S,
    mut data: mpsc::Receiver<String>,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    loop {
        let msg = tokio::select! {
            biased;
            c = control.recv() => match c {
                Some(Control::Ping) => Message::Ping(Default::default()),
                Some(Control::Close(reason)) => return close(sink, data, Some(reason)).await,
                None => return close(sink, data, None).await,
            },
            d = data.recv() => match d {
                Some(text) => Message::Text(text.into()),
                None => break,
            },
        };
        // A write blocks for as long as the client does not read. A close asked meanwhile wins:
        // the session is over, so what is queued goes now, socket and all.
        let written = tokio::select! {
            biased;
            reason = next_close(&mut control) => Err(reason),
            r = write(&mut sink, &mut data, msg) => Ok(r),
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(_)) => break,
            Err(reason) => return close(sink, data, reason).await,
        }
    }
    let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, sink.close()).await;
}

/// Writes `first` and what else is queued (up to `BATCH`), then flushes.
async fn write<S: Sink<Message> + Unpin>(
    sink: &mut S,
    data: &mut mpsc::Receiver<String>,
    first: Message,
) -> Result<(), S::Error> {
    let is_data = matches!(first, Message::Text(_));
    sink.feed(first).await?;
    if is_data {
        for _ in 0..BATCH {
            let Ok(text) = data.try_recv() else { break };
            sink.feed(Message::Text(text.into())).await?;
        }
    }
    sink.flush().await
}

/// The next close asked of the writer (`None`: the session dropped its side without one).
/// Pings that arrive while a write is blocked are dropped: the socket is not taking anything.
async fn next_close(control: &mut mpsc::UnboundedReceiver<Control>) -> Option<CloseReason> {
    loop {
        match control.recv().await {
            Some(Control::Ping) => continue,
            Some(Control::Close(reason)) => return Some(reason),
            None => return None,
        }
    }
}

/// Ends the session's socket: the queued frames are dropped at once, the close frame gets
/// `CLOSE_SEND_TIMEOUT` to go out, and the socket goes with `sink`.
async fn close<S: Sink<Message> + Unpin>(mut sink: S, data: mpsc::Receiver<String>, reason: Option<CloseReason>) {
    drop(data);
    if let Some(reason) = reason {
        let frame = CloseFrame { code: reason.code(), reason: reason.text().into() };
        let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, sink.send(Message::Close(Some(frame)))).await;
    }
}
