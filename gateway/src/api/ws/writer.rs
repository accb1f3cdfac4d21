//! The writing half of one WebSocket: sends queued text frames in order, with pings and the
//! close frame going ahead of any queued data.
//!
//! Frames already queued when one is written go out with it, in one flush: under load a
//! session gets pushes, results and ack replies in bursts, and a write syscall (plus a TCP
//! segment for the client to read) per frame was a visible share of the throughput profile.
//! A lone frame is still flushed at once, so batching costs no latency.
//!
//! A close never waits on the client: a write blocked on a socket nobody reads is abandoned when
//! the close comes, the queue is dropped, and the close frame goes ahead of it, into room the
//! connection makes for it (`listener::CloseRoom`: the kernel holds few unsent bytes until then,
//! so a client that stopped reading still finds the close frame right behind them, e.g. 1013
//! for a slow consumer). Only a close frame that cannot be written within a bounded time is
//! given up, and the socket dropped without one.
//!
//! Deliberately decides nothing: what to send and when to close is the session loop's call.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message};
use chrono::Utc;
use futures::{Sink, SinkExt};
use tokio::sync::mpsc;

use crate::close::CloseReason;
use crate::listener::CloseRoom;
use crate::sessions::hub::Control;
use crate::wire::Outbound;

/// Most queued frames written before one flush; bounds how long a ping waits behind data.
const BATCH: usize = 64;
/// How long a closing session tries to get its close frame out. With the room its connection
/// makes, the kernel takes it at once unless its send buffer is full of what was written before;
/// then a client that stopped reading never takes it, and past this the socket is dropped
/// without one. Long enough for a client that was merely slow (or a loaded machine).
const CLOSE_SEND_TIMEOUT: Duration = Duration::from_secs(3);

/// Writes the session's frames to `sink` (the socket's write half) until the session closes.
pub async fn run<S: Sink<Message> + Unpin>(
    mut sink: S,
    mut data: mpsc::Receiver<Outbound>,
    mut control: mpsc::UnboundedReceiver<Control>,
    room: Option<CloseRoom>,
) {
    loop {
        let msg = tokio::select! {
            biased;
            c = control.recv() => match c {
                Some(Control::Ping) => Message::Ping(Default::default()),
                Some(Control::Close(reason)) => return close(sink, data, Some(reason), room).await,
                None => return close(sink, data, None, room).await,
            },
            d = data.recv() => match d {
                Some(frame) if frame.writable_at(Utc::now()) => Message::Text(frame.text.into()),
                Some(_) => {
                    expired_push_dropped();
                    continue;
                }
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
            Err(reason) => return close(sink, data, reason, room).await,
        }
    }
    let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, sink.close()).await;
}

/// Writes `first` and what else is queued (up to `BATCH`), then flushes.
async fn write<S: Sink<Message> + Unpin>(
    sink: &mut S,
    data: &mut mpsc::Receiver<Outbound>,
    first: Message,
) -> Result<(), S::Error> {
    let is_data = matches!(first, Message::Text(_));
    sink.feed(first).await?;
    if is_data {
        let now = Utc::now();
        for _ in 0..BATCH {
            let Ok(frame) = data.try_recv() else { break };
            if !frame.writable_at(now) {
                expired_push_dropped();
                continue;
            }
            sink.feed(Message::Text(frame.text.into())).await?;
        }
    }
    sink.flush().await
}

/// A push whose signal expired while it waited in the queue: its delivery is on the stream (it
/// was recorded in time), but the frame is not handed over late (CONTRACT §5).
fn expired_push_dropped() {
    tracing::info!("a queued push outlived its signal's expiry; not written");
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

/// Ends the session's socket: the queued frames are dropped at once, the connection makes room
/// for the close frame (behind only what the socket already took), the close frame gets
/// `CLOSE_SEND_TIMEOUT` to go out, and the socket goes with `sink`.
async fn close<S: Sink<Message> + Unpin>(
    mut sink: S,
    data: mpsc::Receiver<Outbound>,
    reason: Option<CloseReason>,
    room: Option<CloseRoom>,
) {
    drop(data);
    if let Some(reason) = reason {
        if let Some(room) = room {
            room.make();
        }
        let frame = CloseFrame { code: reason.code(), reason: reason.text().into() };
        let _ = tokio::time::timeout(CLOSE_SEND_TIMEOUT, sink.send(Message::Close(Some(frame)))).await;
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use futures::channel::mpsc as fmpsc;
    use futures::StreamExt;

    use super::*;

    /// A socket nobody reads: it never takes a frame.
    struct Stuck;

    impl Sink<Message> for Stuck {
        type Error = std::io::Error;
        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }
        fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), Self::Error> {
            Ok(())
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn a_queued_push_is_not_written_once_its_signal_expired() {
        let (sink, written) = fmpsc::unbounded::<Message>();
        let (data_tx, data) = mpsc::channel(8);
        let (ctl_tx, control) = mpsc::unbounded_channel();
        let now = Utc::now();
        data_tx.try_send(Outbound::signal("late".into(), now - chrono::Duration::milliseconds(1))).unwrap();
        data_tx.try_send(Outbound::signal("in time".into(), now + chrono::Duration::hours(1))).unwrap();
        data_tx.try_send("result".to_string().into()).unwrap();
        drop(data_tx);
        run(sink, data, control, None).await;
        drop(ctl_tx);
        let texts: Vec<String> = written
            .filter_map(|m| async move {
                if let Message::Text(t) = m {
                    Some(t.to_string())
                } else {
                    None
                }
            })
            .collect()
            .await;
        assert_eq!(texts, ["in time", "result"]);
    }

    #[tokio::test(start_paused = true)]
    async fn pings_and_the_close_go_ahead_of_queued_data() {
        let (sink, written) = fmpsc::unbounded::<Message>();
        let (data_tx, data) = mpsc::channel(8);
        let (ctl_tx, control) = mpsc::unbounded_channel();
        data_tx.try_send("a".to_string().into()).unwrap();
        data_tx.try_send("b".to_string().into()).unwrap();
        ctl_tx.send(Control::Ping).unwrap();
        let writer = tokio::spawn(run(sink, data, control, None));
        tokio::time::sleep(Duration::from_millis(1)).await;
        ctl_tx.send(Control::Close(CloseReason::Shutdown)).unwrap();
        writer.await.unwrap();
        let got: Vec<Message> = written.collect().await;
        let shown: Vec<String> = got
            .iter()
            .map(|m| match m {
                Message::Ping(_) => "ping".to_string(),
                Message::Text(t) => t.to_string(),
                Message::Close(Some(f)) => format!("close {}", f.code),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(shown, ["ping", "a", "b", "close 1001"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_close_abandons_a_blocked_write_and_gives_the_close_frame_a_bounded_time() {
        let (data_tx, data) = mpsc::channel(8);
        let (ctl_tx, control) = mpsc::unbounded_channel();
        data_tx.try_send("never read".to_string().into()).unwrap();
        let writer = tokio::spawn(run(Stuck, data, control, None));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!writer.is_finished(), "a write waits for as long as the client does not read");
        ctl_tx.send(Control::Ping).unwrap();
        ctl_tx.send(Control::Close(CloseReason::SlowConsumer)).unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(data_tx.is_closed(), "the queue is dropped at once");
        assert!(!writer.is_finished(), "the close frame gets its time");
        tokio::time::sleep(CLOSE_SEND_TIMEOUT).await;
        assert!(writer.is_finished(), "and no more");
    }
}
