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

use crate::close::CloseReason;
use crate::sessions::hub::Control;

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

    #[tokio::test(start_paused = true)]
    async fn pings_and_the_close_go_ahead_of_queued_data() {
        let (sink, written) = fmpsc::unbounded::<Message>();
        let (data_tx, data) = mpsc::channel(8);
        let (ctl_tx, control) = mpsc::unbounded_channel();
        data_tx.try_send("a".to_string()).unwrap();
        data_tx.try_send("b".to_string()).unwrap();
        ctl_tx.send(Control::Ping).unwrap();
        let writer = tokio::spawn(run(sink, data, control));
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
        data_tx.try_send("never read".to_string()).unwrap();
        let writer = tokio::spawn(run(Stuck, data, control));
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
