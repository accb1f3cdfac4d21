//! Steady send load and a live recipient for the cluster test: senders post a signal every
//! `EVERY` through their gateway whatever happens (each send its own task, so an outage does
//! not slow the pace), and every answer is kept with when it was asked and answered; the
//! recipient acks every pushed signal and remembers its correlation id.
//!
//! Deliberately judges nothing: the test compares the answers with the stream.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::roles::{connect, post};

/// Pace of each sender.
const EVERY: Duration = Duration::from_millis(50);

/// One send and its answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Which sender (its index in `Load::start`'s list): which gateway it asked.
    pub sender: usize,
    pub corr: String,
    pub status: u16,
    pub body: Value,
    pub asked: Instant,
    pub answered: Instant,
}

pub struct Load {
    answers: Arc<Mutex<Vec<Answer>>>,
    senders: usize,
    driver: JoinHandle<Vec<JoinHandle<()>>>,
    stop: tokio_util::sync::CancellationToken,
}

impl Load {
    /// Starts one sender per `(gateway base URL, token)`, all sending to `bob`.
    pub fn start(senders: Vec<(String, String)>) -> Load {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let count = senders.len();
        let stop = tokio_util::sync::CancellationToken::new();
        let (out, halt) = (answers.clone(), stop.clone());
        let driver = tokio::spawn(async move {
            let mut tasks = Vec::new();
            let mut ticker = tokio::time::interval(EVERY);
            for n in 0.. {
                tokio::select! {
                    _ = halt.cancelled() => break,
                    _ = ticker.tick() => {}
                }
                for (k, (base, token)) in senders.iter().enumerate() {
                    let (base, token, out) = (base.clone(), token.clone(), out.clone());
                    tasks.push(tokio::spawn(async move {
                        let corr = format!("s{k}-{n}");
                        let body =
                            json!({"to": "bob", "type": "StatusUpdate", "payload": {"n": n}, "correlation_id": corr});
                        let asked = Instant::now();
                        let (status, body) = post(&base, &token, "/v1/signals", body).await;
                        let answer = Answer { sender: k, corr, status, body, asked, answered: Instant::now() };
                        out.lock().unwrap().push(answer);
                    }));
                }
            }
            tasks
        });
        Load { answers, senders: count, driver, stop }
    }

    pub fn now(&self) -> Instant {
        Instant::now()
    }

    /// Per sender (so per gateway): how long after `since` the first send it asked after it was
    /// accepted; waits up to `within` for every sender.
    pub async fn recovered_per_sender(&self, since: Instant, within: Duration) -> Vec<Duration> {
        let deadline = Instant::now() + within;
        loop {
            let firsts: Vec<Option<Duration>> = {
                let answers = self.answers.lock().unwrap();
                (0..self.senders)
                    .map(|k| {
                        let accepted = answers.iter().filter(|a| a.sender == k && a.asked >= since && a.status == 200);
                        accepted.map(|a| a.answered - since).min()
                    })
                    .collect()
            };
            if firsts.iter().all(Option::is_some) {
                return firsts.into_iter().flatten().collect();
            }
            assert!(
                Instant::now() < deadline,
                "a sender had no send accepted within {within:?} of the fault: {firsts:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends asked since `since` and answered 503 so far.
    pub fn refused_since(&self, since: Instant) -> usize {
        self.answers.lock().unwrap().iter().filter(|a| a.asked >= since && a.status == 503).count()
    }

    /// Stops sending, waits for every send in flight to be answered, and returns all answers.
    pub async fn stop(self) -> Vec<Answer> {
        self.stop.cancel();
        for task in self.driver.await.unwrap() {
            task.await.unwrap();
        }
        let answers = self.answers.lock().unwrap().clone();
        answers
    }
}

/// A recipient on a WebSocket that acks every signal pushed to it.
pub struct Inbox {
    got: Arc<Mutex<HashSet<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Inbox {
    pub async fn listen(url: &str) -> Inbox {
        let (ws, _) = connect(url).await;
        let (mut tx, mut rx) = ws.split();
        let got = Arc::new(Mutex::new(HashSet::new()));
        let seen = got.clone();
        let task = tokio::spawn(async move {
            while let Some(Ok(msg)) = rx.next().await {
                let Message::Text(text) = msg else { continue };
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                if frame["op"] != "signal" {
                    continue;
                }
                let corr = frame["signal"]["correlation_id"].as_str().unwrap_or_default().to_string();
                seen.lock().unwrap().insert(corr);
                let ack = json!({"op": "ack", "signal_ids": [frame["signal"]["id"]]});
                if tx.send(Message::Text(ack.to_string().into())).await.is_err() {
                    return;
                }
            }
        });
        Inbox { got, task }
    }

    /// The correlation ids received, once every send answered `delivered: true` is among them
    /// or `within` has passed.
    pub async fn received(&self, answers: &[Answer], within: Duration) -> HashSet<String> {
        let deadline = Instant::now() + within;
        let delivered: Vec<&str> = answers
            .iter()
            .filter(|a| a.status == 200 && a.body["delivered"] == true)
            .map(|a| a.corr.as_str())
            .collect();
        loop {
            let got = self.got.lock().unwrap().clone();
            if delivered.iter().all(|c| got.contains(*c)) || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The stream's newest sequence, read fresh.
pub async fn stream_last_seq(urls: &str) -> u64 {
    use bus::log::EventLog;
    let config = bus::log::jetstream::JetStreamConfig { replicas: 3, ..Default::default() };
    let log = bus::log::jetstream::JetStreamLog::connect(urls, config).await.unwrap();
    log.last_seq().await.unwrap()
}
