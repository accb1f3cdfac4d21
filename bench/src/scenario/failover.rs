//! `failover`: how long a clustered bus refuses sends when the node leading its stream dies.
//! The bed is `--nats cluster` (3 nodes of the current nats-server, the stream at 3 replicas);
//! this process runs the projector, the sweeper and two gateways, each gateway on its own NATS
//! connection as two gateway processes would be. One sender per gateway posts a signal every
//! `SEND_EVERY`, each send its own request, whatever happens. `--kills` times: kill -9 the node
//! leading the stream, measure from the kill to the first accepted send asked after it on each
//! gateway, and to the new leader's election as its own log stamps it; restart the node, wait
//! until every replica is current and `--warmup` of steady load has passed, repeat. Both
//! senders send to one recipient holding a WebSocket session on gateway b and acking every push,
//! as in tests/cluster.rs: a send through a is answered once b's push is recorded (or after
//! `push_confirm_timeout`), so the time measured is what a sender waits, push included. At the
//! end every answer is checked against the stream: a 200 must count there, a 503 must not.
//!
//! Deliberately measures and counts, never asserts a time (tests/cluster.rs holds every
//! invariant to account).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bus::log::SharedLog;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::bed::{NatsChoice, Target};
use crate::client;
use crate::report::{round, Outcome};

/// The bus's stream (`JetStreamConfig::default`).
const STREAM: &str = "SIGNALBUS";
/// Pace of each gateway's sender: 20 sends/s per gateway.
const SEND_EVERY: Duration = Duration::from_millis(50);
/// A bound on a takeover, to fail a broken run rather than to time a slow one.
const WITHIN: Duration = Duration::from_secs(60);
const GATEWAYS: [&str; 2] = ["a", "b"];

/// One send and its answer.
struct Answer {
    gateway: usize,
    corr: String,
    status: u16,
    asked: Instant,
    answered: Instant,
}

type Answers = Arc<Mutex<Vec<Answer>>>;

/// One leader kill, in seconds after it.
struct Kill {
    leader: String,
    new_leader: String,
    /// The new leader's log line "new stream leader", if its clock could be read.
    elected: Option<f64>,
    /// Per gateway: the first accepted send asked after the kill, answered.
    recovered: [f64; 2],
    refused: usize,
    unknown: usize,
    /// The longest a send asked after the kill (and before recovery) waited for its answer.
    slowest: f64,
}

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() || args.embedded {
        bail!("failover starts its own 3-node cluster; --url and --embedded are not supported");
    }
    let mut target = Target::start(false, NatsChoice::Cluster).await?;
    let bases = [target.base.clone(), target.add_gateway("bench-b").await?];
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let ids: Vec<String> = ["a", "b", "to"].iter().map(|s| format!("{prefix}-{s}")).collect();
    let tokens = client::register_all(&http, &target, &ids).await?;
    let senders: Vec<(String, String)> = bases.iter().cloned().zip(tokens.iter().cloned()).collect();
    let ws_b = format!("{}/v1/ws", bases[1].replacen("http://", "ws://", 1));
    let recipient = tokio::spawn(ack_everything(client::connect(&ws_b, &tokens[2]).await?));
    for (base, token) in &senders {
        // Gateway b learns the agents from the stream: wait until it accepts their sends.
        until_accepted(&http, base, token, &ids[2]).await?;
    }
    let answers: Answers = Arc::default();
    let stop = CancellationToken::new();
    let load = start_load(http.clone(), senders, ids[2].clone(), answers.clone(), stop.clone());
    let mut kills = Vec::new();
    for k in 0..args.kills {
        tokio::time::sleep(args.warmup).await;
        let kill = kill_leader(&mut target, &answers).await?;
        eprintln!(
            "bench: kill {}: {} → {}, elected {:?} s, sends accepted again after {:?} s (a, b)",
            k + 1,
            kill.leader,
            kill.new_leader,
            kill.elected,
            kill.recovered
        );
        kills.push(kill);
    }
    stop.cancel();
    for task in load.await? {
        task.await?;
    }
    recipient.abort();
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let log = target.log().context("an in-process bus")?.clone();
    let audit = audit(&log, &answers).await?;
    target.shutdown().await;
    Ok(outcome(&kills, &answers, audit))
}

/// Kills the node leading the stream, waits until both gateways accept sends again, restarts it
/// and waits until every replica is current.
async fn kill_leader(target: &mut Target, answers: &Answers) -> anyhow::Result<Kill> {
    let cluster = target.local.as_mut().and_then(|(b, _)| b.cluster()).context("a NATS cluster")?;
    let leader = cluster.stream_leader(STREAM, WITHIN).await;
    let wall = std::time::SystemTime::now();
    let killed_at = Instant::now();
    cluster.node(leader).kill().await;
    let deadline = killed_at + WITHIN;
    let new_leader = loop {
        let now = cluster.stream_leader(STREAM, WITHIN).await;
        if now != leader {
            break now;
        }
        if Instant::now() > deadline {
            bail!("the dead node still leads the stream after {WITHIN:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut recovered = [None, None];
    while recovered.iter().any(Option::is_none) {
        if Instant::now() > deadline {
            bail!("a gateway accepted no send within {WITHIN:?} of the kill: {recovered:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answers = answers.lock().unwrap();
        for (g, slot) in recovered.iter_mut().enumerate() {
            *slot = answers
                .iter()
                .filter(|a| a.gateway == g && a.asked >= killed_at && a.status == 200)
                .map(|a| a.answered - killed_at)
                .min();
        }
    }
    let recovered = recovered.map(|d| d.unwrap_or_default());
    let until = killed_at + recovered.iter().max().copied().unwrap_or_default();
    let (refused, unknown, slowest) = {
        let answers = answers.lock().unwrap();
        let during: Vec<&Answer> = answers.iter().filter(|a| a.asked >= killed_at && a.asked <= until).collect();
        let slowest = during.iter().map(|a| a.answered - a.asked).max().unwrap_or_default();
        (during.iter().filter(|a| a.status == 503).count(), during.iter().filter(|a| a.status == 500).count(), slowest)
    };
    let elected = cluster.elected_after(new_leader, STREAM, wall).map(|d| d.as_secs_f64());
    let kill = Kill {
        leader: cluster.name_of(leader),
        new_leader: cluster.name_of(new_leader),
        elected,
        recovered: recovered.map(|d| d.as_secs_f64()),
        refused,
        unknown,
        slowest: slowest.as_secs_f64(),
    };
    cluster.node(leader).restart().await;
    cluster.wait_stream_current(STREAM, WITHIN).await;
    Ok(kill)
}

/// Retries one send until the gateway accepts it (it learns new agents from the stream).
async fn until_accepted(http: &reqwest::Client, base: &str, token: &str, to: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = json!({"to": to, "type": "StatusUpdate", "payload": {}});
        let r = http.post(format!("{base}/v1/signals")).bearer_auth(token).json(&body).send().await?;
        if r.status().is_success() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{base} refuses sends: {} {}", r.status(), r.text().await.unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The recipient's session: acks every signal pushed to it, until its socket closes.
async fn ack_everything(ws: client::Ws) {
    let (mut sink, mut frames) = ws.split();
    while let Some(Ok(msg)) = frames.next().await {
        let Message::Text(text) = msg else { continue };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
        if frame["op"] == "signal" {
            let ack = json!({"op": "ack", "signal_ids": [frame["signal"]["id"]]});
            if sink.send(Message::text(ack.to_string())).await.is_err() {
                return;
            }
        }
    }
}

/// One sender per `(gateway, token)`, each send its own task so an outage does not slow the pace.
fn start_load(
    http: reqwest::Client,
    senders: Vec<(String, String)>,
    to: String,
    answers: Answers,
    stop: CancellationToken,
) -> JoinHandle<Vec<JoinHandle<()>>> {
    tokio::spawn(async move {
        let mut tasks = Vec::new();
        let mut ticker = tokio::time::interval(SEND_EVERY);
        for n in 0u64.. {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = ticker.tick() => {}
            }
            for (gateway, (base, token)) in senders.iter().enumerate() {
                let (http, url, token, to, out) =
                    (http.clone(), format!("{base}/v1/signals"), token.clone(), to.clone(), answers.clone());
                tasks.push(tokio::spawn(async move {
                    let corr = format!("f{gateway}-{n}");
                    let body = json!({"to": to, "type": "StatusUpdate", "payload": {"n": n}, "correlation_id": corr});
                    let asked = Instant::now();
                    let status = match http.post(url).bearer_auth(token).json(&body).send().await {
                        Ok(r) => r.status().as_u16(),
                        Err(_) => 0,
                    };
                    out.lock().unwrap().push(Answer { gateway, corr, status, asked, answered: Instant::now() });
                }));
            }
        }
        tasks
    })
}

/// What the stream says of the answers: `(lost, refused_but_stored, unknown_stored)` — sends
/// answered 200 that do not count on it, answered 503 that do, and answered 500 that do.
async fn audit(log: &SharedLog, answers: &[Answer]) -> anyhow::Result<(usize, usize, usize)> {
    let last = log.last_seq().await?;
    let mut stored = HashSet::new();
    let mut next = 1;
    while next <= last {
        let page = log.read(next, 10_000).await?;
        let Some(end) = page.last().map(|s| s.seq) else { bail!("the stream ended before its sequence {last}") };
        for s in page {
            // Voided copies (stored after their `accept_by`) read as `Voided`: they never count.
            for sent in s.event.body.sent_signals() {
                stored.extend(sent.correlation_id.clone());
            }
        }
        next = end + 1;
    }
    let count = |status: u16, on_stream: bool| {
        answers.iter().filter(|a| a.status == status && stored.contains(&a.corr) == on_stream).count()
    };
    Ok((count(200, false), count(503, true), count(500, true)))
}

/// min / p50 / max of `v` in seconds (nearest-rank median).
fn spread(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v.get(((q * v.len() as f64).ceil() as usize).saturating_sub(1)).map(|x| round(*x, 3));
    json!({"n": v.len(), "min_s": at(0.0), "p50_s": at(0.5), "max_s": at(1.0)})
}

fn outcome(
    kills: &[Kill],
    answers: &[Answer],
    (lost, refused_stored, unknown_stored): (usize, usize, usize),
) -> Outcome {
    let worst: Vec<f64> = kills.iter().map(|k| k.recovered.iter().copied().fold(0.0, f64::max)).collect();
    let elected: Vec<f64> = kills.iter().filter_map(|k| k.elected).collect();
    let after_election: Vec<f64> = kills.iter().zip(&worst).filter_map(|(k, w)| k.elected.map(|e| w - e)).collect();
    let by_status = |s: u16| answers.iter().filter(|a| a.status == s).count();
    let other = answers.len() - by_status(200) - by_status(503) - by_status(500);
    let per_gateway: serde_json::Map<String, Value> = GATEWAYS
        .iter()
        .enumerate()
        .map(|(g, name)| (name.to_string(), spread(kills.iter().map(|k| k.recovered[g]).collect())))
        .collect();
    let results = json!({
        "kills": kills.iter().map(|k| json!({
            "leader": k.leader, "new_leader": k.new_leader,
            "elected_s": k.elected.map(|e| round(e, 3)),
            "recovered_s": k.recovered.map(|r| round(r, 3)),
            "answered_503": k.refused, "answered_500": k.unknown, "slowest_answer_s": round(k.slowest, 3),
        })).collect::<Vec<_>>(),
        "recovered": per_gateway,
        "worst": spread(worst.clone()),
        "elected": spread(elected.clone()),
        "after_election": spread(after_election.clone()),
        "answers": {
            "sends": answers.len(), "accepted": by_status(200), "answered_503": by_status(503),
            "answered_500": by_status(500), "other": other,
        },
        "lost": lost, "refused_but_stored": refused_stored, "unknown_stored": unknown_stored,
    });
    let s = |v: &Value| format!("min {} / p50 {} / max {} s", v["min_s"], v["p50_s"], v["max_s"]);
    let summary = vec![
        format!(
            "{} leader kills: first accepted send after the kill, worst gateway {} (target max ≤ 3 s)",
            kills.len(),
            s(&results["worst"])
        ),
        format!("gateway a {}; gateway b {}", s(&results["recovered"]["a"]), s(&results["recovered"]["b"])),
        format!(
            "the new leader's election (its log) {}; the bus after it {}",
            s(&results["elected"]),
            s(&results["after_election"])
        ),
        format!(
            "{} sends: {} accepted, {} answered 503, {} answered 500, {} other; {lost} lost, {refused_stored} \
             answered 503 but stored",
            answers.len(),
            by_status(200),
            by_status(503),
            by_status(500),
            other
        ),
    ];
    Outcome { results, summary }
}
