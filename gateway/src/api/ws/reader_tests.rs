//! The WebSocket read loop (`reader.rs`) driven by hand: frames go in through a channel, work
//! is recorded (and held back while `gate` has no permits), answers come out of the session's
//! queue; time is paused, so every interval and timeout is exact and instant.
//!
//! Deliberately no socket, no stream, no gateway: only the loop's own decisions are under test
//! (ack batching, the in-flight cap, pings, heartbeats, the silence timeout).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::Message;
use bus::event::SessionKind;
use futures::channel::mpsc as fmpsc;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::agent::Agent;
use crate::api::ws::dispatch::Work;
use crate::api::ws::frames::{self, MAX_ACK_IDS};
use crate::api::ws::reader::{read_loop, Runner, Settings, MAX_IN_FLIGHT};
use crate::close::CloseReason;
use crate::sessions::hub::{Control, SessionHandle};

const STALE: Duration = Duration::from_secs(4);

#[derive(Default)]
struct Recorder {
    batches: Mutex<Vec<Vec<Uuid>>>,
    ops: AtomicUsize,
    heartbeats: AtomicUsize,
    heard: AtomicUsize,
    pending: AtomicUsize,
    /// Operations wait for a permit each (closed: they run at once).
    gate: Option<Semaphore>,
    /// Ack batches, once taken down, wait for a permit each before they count as recorded.
    ack_gate: Option<Semaphore>,
}

impl Runner for Recorder {
    fn run(&self, work: Work) -> BoxFuture<'_, Option<String>> {
        async move {
            match work {
                Work::Op(frame) => {
                    self.ops.fetch_add(1, Ordering::SeqCst);
                    if let Some(gate) = &self.gate {
                        gate.acquire().await.unwrap().forget();
                    }
                    Some(frames::result_ok(frame.reference.as_deref(), &json!({})))
                }
                Work::Acks(ids) => {
                    self.batches.lock().unwrap().push(ids);
                    if let Some(gate) = &self.ack_gate {
                        gate.acquire().await.unwrap().forget();
                    }
                    None
                }
                Work::Heartbeat => {
                    self.heartbeats.fetch_add(1, Ordering::SeqCst);
                    None
                }
            }
        }
        .boxed()
    }
    fn heard(&self) {
        self.heard.fetch_add(1, Ordering::SeqCst);
    }
    fn acks_received(&self, n: usize) {
        self.pending.fetch_add(n, Ordering::SeqCst);
    }
    fn acks_recorded(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::SeqCst);
    }
}

struct Harness {
    frames: fmpsc::UnboundedSender<Result<Message, std::io::Error>>,
    /// Frames the loop took off the stream.
    read: Arc<AtomicUsize>,
    out: mpsc::Receiver<crate::wire::Outbound>,
    control: mpsc::UnboundedReceiver<Control>,
    runner: Arc<Recorder>,
    done: JoinHandle<CloseReason>,
}

fn start(runner: Recorder) -> Harness {
    let (frames, rx) = fmpsc::unbounded();
    let read = Arc::new(AtomicUsize::new(0));
    let counted = read.clone();
    let mut stream = rx.inspect(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let (out_tx, out) = mpsc::channel(1024);
    let (ctl_tx, control) = mpsc::unbounded_channel();
    let agent = Agent::registered("default", "bob", "h");
    let handle = SessionHandle::new(Uuid::new_v4(), &agent, SessionKind::Daemon, out_tx, ctl_tx);
    let settings = Settings { heartbeat_interval: STALE / 4, stale_after: STALE, max_frame_bytes: 64 * 1024 };
    let runner = Arc::new(runner);
    let r = runner.clone();
    let done = tokio::spawn(async move { read_loop(&settings, &*r, &handle, &mut stream).await });
    Harness { frames, read, out, control, runner, done }
}

impl Harness {
    fn send(&self, frame: Value) {
        self.frames.unbounded_send(Ok(Message::Text(frame.to_string().into()))).unwrap();
    }
    fn answers(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.out.try_recv().ok()).map(|t| serde_json::from_str(&t.text).unwrap()).collect()
    }
    fn batches(&self) -> Vec<Vec<Uuid>> {
        self.runner.batches.lock().unwrap().clone()
    }
}

/// Lets every task run until all wait on the (paused) clock or a channel.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

fn ids(n: usize) -> Vec<Uuid> {
    (0..n).map(|_| Uuid::new_v4()).collect()
}

#[tokio::test(start_paused = true)]
async fn acks_are_recorded_at_once_and_what_arrives_meanwhile_goes_next_together() {
    let mut h = start(Recorder { ack_gate: Some(Semaphore::new(0)), ..Default::default() });
    let gate = |h: &Harness, n| h.runner.ack_gate.as_ref().unwrap().add_permits(n);
    settle().await;
    // Nothing of the session's is being recorded: a lone ack goes at once, no tick waited for.
    let first = ids(1);
    h.send(json!({"op": "ack", "ref": "a0", "signal_ids": first}));
    settle().await;
    assert_eq!(h.batches(), vec![first.clone()]);
    // Three frames while it is being recorded: three answers now, nothing recorded yet.
    let later = ids(3);
    for (i, id) in later.iter().enumerate() {
        h.send(json!({"op": "ack", "ref": format!("a{}", i + 1), "signal_ids": [id]}));
    }
    settle().await;
    let answers = h.answers();
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert!(answers.iter().all(|a| a["ok"] == true && a["result"]["acked"] == 1), "{answers:?}");
    assert_eq!(h.batches().len(), 1, "nothing more while the first batch is being recorded");
    assert_eq!(h.runner.pending.load(Ordering::SeqCst), 4);
    // The first one recorded: the three go together, at once.
    gate(&h, 1);
    settle().await;
    assert_eq!(h.batches(), vec![first, later]);
    assert_eq!(h.runner.pending.load(Ordering::SeqCst), 3);
    gate(&h, 1);
    settle().await;
    assert_eq!(h.runner.pending.load(Ordering::SeqCst), 0);
    // A full frame's worth goes at once even while another batch is being recorded.
    let one = ids(1);
    h.send(json!({"op": "ack", "signal_ids": one}));
    settle().await;
    let full = ids(MAX_ACK_IDS);
    h.send(json!({"op": "ack", "signal_ids": full}));
    settle().await;
    assert_eq!(&h.batches()[2..], [one, full]);
    // Acks received just before the client goes are still recorded.
    gate(&h, 8);
    let last = ids(2);
    h.send(json!({"op": "ack", "signal_ids": last}));
    drop(h.frames);
    assert_eq!(h.done.await.unwrap(), CloseReason::ClientClosed);
    assert_eq!(h.runner.batches.lock().unwrap().last(), Some(&last));
    assert_eq!(h.runner.pending.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn reading_stops_while_the_in_flight_cap_is_reached() {
    let mut h = start(Recorder { gate: Some(Semaphore::new(0)), ..Default::default() });
    let n = MAX_IN_FLIGHT + 5;
    for i in 0..n {
        h.send(json!({"op": "recall", "ref": format!("r{i}"), "signal_id": "x"}));
    }
    settle().await;
    assert_eq!(h.runner.ops.load(Ordering::SeqCst), MAX_IN_FLIGHT);
    assert_eq!(h.read.load(Ordering::SeqCst), MAX_IN_FLIGHT, "the rest wait in the stream");
    assert!(h.answers().is_empty());
    // Each finished operation makes room for one more frame.
    h.runner.gate.as_ref().unwrap().add_permits(5);
    settle().await;
    assert_eq!(h.read.load(Ordering::SeqCst), n);
    assert_eq!(h.answers().len(), 5);
    // A close waits for what already runs: every operation read is answered.
    drop(h.frames);
    h.runner.gate.as_ref().unwrap().add_permits(MAX_IN_FLIGHT);
    assert_eq!(h.done.await.unwrap(), CloseReason::ClientClosed);
    assert_eq!(h.runner.ops.load(Ordering::SeqCst), n);
    let answers = std::iter::from_fn(|| h.out.try_recv().ok()).count();
    assert_eq!(answers, MAX_IN_FLIGHT);
}

#[tokio::test(start_paused = true)]
async fn a_heard_client_gets_pings_and_heartbeats_and_a_silent_one_times_out() {
    let mut h = start(Recorder::default());
    // Heard every second for ten seconds (well past 2 x stale_after), half a second before
    // each tick: never timed out, pinged every interval, one heartbeat per interval heard.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..10 {
        h.send(json!({"op": "ping"}));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!h.done.is_finished());
    let pings = std::iter::from_fn(|| h.control.try_recv().ok()).filter(|c| *c == Control::Ping).count();
    assert_eq!(pings, 10);
    assert_eq!(h.runner.heartbeats.load(Ordering::SeqCst), 10);
    assert_eq!(h.runner.heard.load(Ordering::SeqCst), 10);
    assert_eq!(h.answers().len(), 10, "each ping answered with a pong");
    // Silent from now on: closed once twice the stale threshold has passed.
    tokio::time::sleep(STALE * 3).await;
    assert_eq!(h.done.await.unwrap(), CloseReason::Timeout);
    assert_eq!(h.runner.heartbeats.load(Ordering::SeqCst), 10, "no heartbeat for a silent interval");
}
