//! `memory`: what a hostile or broken client can make the bus hold, as RSS against the idle
//! baseline of the same run. Four phases, one after the other on one bus:
//!
//! - **ack flood**: one session sends `--ack-frames` frames of 1,000 random ids as fast as the
//!   socket takes them;
//! - **fact reads**: `--readers` clients page at once through `--facts` plugin facts of about
//!   1 MiB each with `limit=1000`;
//! - **slow consumers**: `--slow-sessions` sessions that never read are pushed 16 KiB signals
//!   until the bus closes each with 1013; RSS is read while they are still connected;
//! - **announced frames**: `--announce-sessions` sessions each send a frame header announcing
//!   1 MiB − 1 bytes and one byte of it (`announced.rs`), reported per session.
//!
//! Each phase runs on a fresh bus in a child process of its own (the allocator keeps what a
//! phase freed, which would hide a later phase's cost), and reports the idle RSS of that bus,
//! the RSS before the phase, its peak (sampled every 20 ms) and the RSS once it settled, in KiB
//! and as ratios to the idle baseline, and its growth (peak − before). The clients run in this process too but hold next to
//! nothing (readers stream and discard, slow sessions never read), so with the bus in-process
//! the numbers are the bus's; with `--url` they are `--bus-pid`'s.
//!
//! Deliberately no thresholds: the ratios are read off the output (docs/performance.md).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

mod announced;
mod sampling;

use sampling::{rss, Phase, Sampler, SETTLE};

use crate::args::Args;
use crate::bed::Target;
use crate::client;
use crate::report::{round, Outcome};

/// Ids per ack frame: the most the bus takes.
const ACK_IDS: usize = 1000;
/// Encoded state of one fact: just under the 1 MiB limit.
const FACT_BYTES: usize = 1_000_000;
/// Payload of one signal pushed to a slow consumer.
const SLOW_PAYLOAD_BYTES: usize = 16 * 1024;

/// The phases, in the order they run.
const PHASES: [&str; 4] = ["ack_flood", "fact_reads", "slow_consumers", "announced_frames"];

/// Runs every phase on a fresh bus in a child process of its own (the allocator keeps what a
/// phase freed, so phases sharing a process would hide each other), or — with `--url`, or as
/// that child (`--memory-phase`) — in this process.
pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() || args.memory_phase.is_some() {
        return run_here(args).await;
    }
    let mut results = serde_json::Map::new();
    let mut summary = Vec::new();
    for phase in PHASES {
        let mut child_args: Vec<String> = std::env::args().skip(1).collect();
        child_args.extend(["--memory-phase".to_string(), phase.to_string()]);
        let out = tokio::process::Command::new(std::env::current_exe()?)
            .args(&child_args)
            .kill_on_drop(true)
            .output()
            .await
            .context("spawn a phase")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().find(|l| l.starts_with('{')) else {
            bail!("phase {phase} failed: {}", String::from_utf8_lossy(&out.stderr));
        };
        let v: Value = serde_json::from_str(line)?;
        results.insert(phase.to_string(), v["results"][phase].clone());
        summary.extend(stdout.lines().filter(|l| l.starts_with("  ")).map(|l| l.trim().to_string()));
    }
    Ok(Outcome { results: Value::Object(results), summary })
}

async fn run_here(args: &Args) -> anyhow::Result<Outcome> {
    let target = match &args.url {
        Some(url) => {
            if args.bus_pid.is_none() {
                bail!("with --url, memory needs --bus-pid to read the bus's RSS");
            }
            Target::external(url, args.admin_token.as_deref().unwrap_or_default(), None)
        }
        None => Target::start(args.embedded, args.nats).await?,
    };
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let names = ["flood", "reader", "slow", "sender", "announcer"].map(|n| format!("{prefix}-{n}"));
    let tokens = client::register_all(&http, &target, &names).await?;
    let (flood, reader, slow, sender, announcer) = (&tokens[0], &tokens[1], &tokens[2], &tokens[3], &tokens[4]);
    // Warm the paths once (a session, a send, a fact), so one-time allocations are not billed.
    drop(client::connect(&target.ws_url, flood).await?);
    send(&http, &target, sender, &names[2], 16).await?;
    append_fact(&http, &target, reader, &names[1], 16).await?;
    tokio::time::sleep(SETTLE).await;
    let idle = rss(args)?;

    let wanted = |p: &str| args.memory_phase.as_deref().is_none_or(|w| w == p);
    let mut phases = Vec::new();
    if wanted("ack_flood") {
        phases.push(("ack_flood", ack_flood(args, &target, flood).await?));
    }
    if wanted("fact_reads") {
        phases.push(("fact_reads", fact_reads(args, &http, &target, reader, &names[1]).await?));
    }
    if wanted("slow_consumers") {
        phases.push(("slow_consumers", slow_consumers(args, &http, &target, slow, sender, &names[2]).await?));
    }
    if wanted("announced_frames") {
        phases.push(("announced_frames", announced::announced_frames(args, &target, announcer).await?));
    }
    target.shutdown().await;

    let ratio = |kib: u64| round(kib as f64 / idle as f64, 2);
    let mut results = serde_json::Map::new();
    let mut summary = Vec::new();
    for (name, p) in &phases {
        results.insert(
            name.to_string(),
            json!({ "idle_kib": idle, "before_kib": p.before, "peak_kib": p.peak, "after_kib": p.after,
                    "growth_kib": p.peak.saturating_sub(p.before), "peak_ratio": ratio(p.peak),
                    "after_ratio": ratio(p.after), "detail": p.detail }),
        );
        summary.push(format!(
            "{name}: idle {idle} KiB, before {} → peak {} KiB (+{} KiB; {}× idle), after {} KiB ({}× idle) — {}",
            p.before,
            p.peak,
            p.peak.saturating_sub(p.before),
            ratio(p.peak),
            p.after,
            ratio(p.after),
            p.summary
        ));
    }
    Ok(Outcome { results: Value::Object(results), summary })
}

async fn ack_flood(args: &Args, target: &Target, token: &str) -> anyhow::Result<Phase> {
    let before = rss(args)?;
    let sampler = Sampler::start(args.bus_pid);
    let started = Instant::now();
    let ws = client::connect(&target.ws_url, token).await?;
    let (mut tx, mut rx) = ws.split();
    // Results come back as frames are read; reading them keeps the session from being a slow
    // consumer, and the last one says the bus has read every frame.
    let frames = args.ack_frames;
    let reader = tokio::spawn(async move {
        let mut results = 0;
        while results < frames + 1 {
            match rx.next().await {
                Some(Ok(Message::Text(t))) if t.as_str().contains("\"result\"") => results += 1,
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        results
    });
    for _ in 0..frames {
        let ids: Vec<String> = (0..ACK_IDS).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        tx.send(Message::text(json!({"op": "ack", "signal_ids": ids}).to_string())).await?;
    }
    tx.send(Message::text(json!({"op": "recall", "signal_id": uuid::Uuid::new_v4()}).to_string())).await?;
    let results = tokio::time::timeout(Duration::from_secs(600), reader).await.context("ack results")??;
    let read_secs = started.elapsed().as_secs_f64();
    // Then the acks are recorded (the bus has them all by now).
    if let Some((_, gw)) = &target.local {
        let deadline = Instant::now() + Duration::from_secs(600);
        while gw.acks_pending() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let recorded_secs = started.elapsed().as_secs_f64();
    drop(tx);
    tokio::time::sleep(SETTLE).await;
    let ids = frames * ACK_IDS;
    Ok(Phase {
        before,
        peak: sampler.peak(),
        after: rss(args)?,
        detail: json!({ "frames": frames, "ids": ids, "results": results, "read_seconds": round(read_secs, 2),
                        "recorded_seconds": round(recorded_secs, 2) }),
        summary: format!("{frames} frames of {ACK_IDS} random ids, recorded in {recorded_secs:.1} s"),
    })
}

async fn fact_reads(
    args: &Args,
    http: &reqwest::Client,
    target: &Target,
    token: &str,
    plugin: &str,
) -> anyhow::Result<Phase> {
    for n in 0..args.facts {
        append_fact(http, target, token, plugin, FACT_BYTES + n % 2).await?;
    }
    tokio::time::sleep(SETTLE).await;
    let before = rss(args)?;
    let sampler = Sampler::start(args.bus_pid);
    let started = Instant::now();
    let readers = (0..args.readers).map(|_| read_all_facts(http, target, token, plugin));
    let pages: Vec<anyhow::Result<(usize, u64)>> = futures::future::join_all(readers).await;
    let secs = started.elapsed().as_secs_f64();
    let pages = pages.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let peak = sampler.peak();
    tokio::time::sleep(SETTLE).await;
    let (n_pages, bytes) = pages[0];
    Ok(Phase {
        before,
        peak,
        after: rss(args)?,
        detail: json!({ "facts": args.facts, "fact_bytes": FACT_BYTES, "readers": args.readers,
                        "pages_per_reader": n_pages, "bytes_per_reader": bytes, "seconds": round(secs, 2) }),
        summary: format!(
            "{} readers × {} facts of 1 MB, {n_pages} pages each, in {secs:.1} s",
            args.readers, args.facts
        ),
    })
}

/// Pages through a plugin's facts with `limit=1000`, streaming each answer and discarding it.
async fn read_all_facts(
    http: &reqwest::Client,
    target: &Target,
    token: &str,
    plugin: &str,
) -> anyhow::Result<(usize, u64)> {
    let (mut pages, mut bytes, mut before) = (0, 0u64, None::<i64>);
    loop {
        let mut url = format!("{}/v1/plugins/{plugin}/facts?limit=1000", target.base);
        if let Some(b) = before {
            url.push_str(&format!("&before_seq={b}"));
        }
        let mut resp = http.get(url).bearer_auth(token).send().await?;
        if !resp.status().is_success() {
            bail!("fact read: {}", resp.status());
        }
        // Only the tail is kept: `next_before_seq` is the answer's last member.
        let mut tail = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            bytes += chunk.len() as u64;
            tail.extend_from_slice(&chunk);
            let keep = tail.len().saturating_sub(64);
            tail.drain(..keep);
        }
        pages += 1;
        let tail = String::from_utf8_lossy(&tail);
        before = tail
            .rsplit_once("\"next_before_seq\":")
            .and_then(|(_, n)| n.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok());
        if before.is_none() {
            return Ok((pages, bytes));
        }
    }
}

async fn slow_consumers(
    args: &Args,
    http: &reqwest::Client,
    target: &Target,
    slow: &str,
    sender: &str,
    slow_name: &str,
) -> anyhow::Result<Phase> {
    let before = rss(args)?;
    let sampler = Sampler::start(args.bus_pid);
    let server = target.base.trim_start_matches("http://").to_string();
    let local = target.local.as_ref().map(|(_, gw)| gw.clone());
    let open_before = local.as_ref().map_or(0, |gw| gw.local_sessions());
    let mut sessions = Vec::new();
    for _ in 0..args.slow_sessions {
        sessions.push(never_reading(&server, &target.ws_url, slow).await?);
    }
    let started = Instant::now();
    let mut sends = 0u64;
    // Every session is pushed to in turn (the freshest first) until it is closed as a slow
    // consumer; with an external bus, a fixed budget of sends per session stands in.
    let budget = args.slow_sessions as u64 * 2_000;
    while sends < budget && local.as_ref().is_none_or(|gw| gw.local_sessions() > open_before) {
        send(http, target, sender, slow_name, SLOW_PAYLOAD_BYTES).await?;
        sends += 1;
    }
    let fill_secs = started.elapsed().as_secs_f64();
    let peak = sampler.peak();
    // The clients are still connected and still not reading: what the bus holds now is what a
    // closed session keeps.
    tokio::time::sleep(SETTLE).await;
    let after_close = rss(args)?;
    drop(sessions);
    tokio::time::sleep(SETTLE).await;
    let after_hangup = rss(args)?;
    Ok(Phase {
        before,
        peak,
        after: after_close,
        detail: json!({ "sessions": args.slow_sessions, "payload_bytes": SLOW_PAYLOAD_BYTES, "sends": sends,
                        "rss_after_clients_hung_up_kib": after_hangup,
                        "fill_seconds": round(fill_secs, 2) }),
        summary: format!(
            "{} sessions closed with 1013 after {sends} sends; {after_hangup} KiB once the clients hung up",
            args.slow_sessions
        ),
    })
}

/// A session with a small receive buffer that reads its welcome and nothing after.
async fn never_reading(server: &str, ws_url: &str, token: &str) -> anyhow::Result<client::Ws> {
    let addr: std::net::SocketAddr = tokio::net::lookup_host(server).await?.next().context("bus address")?;
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_recv_buffer_size(4096)?;
    let tcp = socket.connect(addr).await?;
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(tcp);
    let (mut ws, _) = tokio_tungstenite::client_async(format!("{ws_url}?token={token}"), stream).await?;
    ws.next().await.context("no welcome frame")??;
    Ok(ws)
}

async fn send(http: &reqwest::Client, target: &Target, token: &str, to: &str, bytes: usize) -> anyhow::Result<()> {
    let body = json!({"to": to, "type": "StatusUpdate", "payload": {"pad": "p".repeat(bytes)}});
    let resp = http.post(format!("{}/v1/signals", target.base)).bearer_auth(token).json(&body).send().await?;
    if !resp.status().is_success() {
        bail!("send: {} {}", resp.status(), resp.text().await.unwrap_or_default());
    }
    Ok(())
}

async fn append_fact(
    http: &reqwest::Client,
    target: &Target,
    token: &str,
    plugin: &str,
    bytes: usize,
) -> anyhow::Result<()> {
    let body = json!({"fact_type": "blob", "state": {"pad": "f".repeat(bytes.saturating_sub(12))}});
    let url = format!("{}/v1/plugins/{plugin}/facts", target.base);
    let resp = http.post(url).bearer_auth(token).json(&body).send().await?;
    if !resp.status().is_success() {
        bail!("fact append: {} {}", resp.status(), resp.text().await.unwrap_or_default());
    }
    Ok(())
}
