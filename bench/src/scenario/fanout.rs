//! `fanout`: S sender sessions send async signals to groups of 10 and of 100 members (every
//! member a connected, so available, session), each sender keeping `window` sends outstanding;
//! and first, in the same run with the same senders and members, single sends round-robin over
//! the members. Each phase reports delivered signals/s over its window and, per send, the time
//! from sending to the last member's receipt; a group phase's delivered/s is divided by the
//! single sends'.
//!
//! Deliberately never asserts a target. Members record every receipt and the numbers are
//! worked out after the run (`tally`), so the measured path is one parse and one push per frame.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::client::{self, Ws};
use crate::drive::{flush_acks, padding, Clock};
use crate::report::{latency_histogram, latency_json, per_sec, round, Outcome};
use crate::scenario::traffic;

/// One receipt: which phase and send (`sender`, `k`) it belongs to, the send's stamp and when it
/// arrived (µs since the run's base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Receipt {
    phase: u8,
    sender: u16,
    k: u64,
    sent_us: u64,
    at_us: u64,
}

/// One phase's numbers, worked out from every receipt.
#[derive(Debug)]
struct Tally {
    delivered: u64,
    /// Sends stamped inside the window that every one of the `size` recipients received.
    complete: u64,
    incomplete: u64,
    /// Send → the last recipient's receipt, of the complete sends.
    last: Histogram<u64>,
}

/// Counts the receipts of `phase` that arrived inside `[start, end)` µs, and for each send
/// stamped inside it whether all `size` recipients got it and when the last one did.
fn tally(receipts: &[Receipt], phase: u8, size: usize, start: u64, end: u64) -> Tally {
    let mut delivered = 0;
    let mut sends: HashMap<(u16, u64), (usize, u64, u64)> = HashMap::new();
    for r in receipts.iter().filter(|r| r.phase == phase) {
        if r.at_us >= start && r.at_us < end {
            delivered += 1;
        }
        if r.sent_us >= start && r.sent_us < end {
            let e = sends.entry((r.sender, r.k)).or_insert((0, r.sent_us, 0));
            e.0 += 1;
            e.2 = e.2.max(r.at_us);
        }
    }
    let mut last = latency_histogram();
    let mut complete = 0;
    for (n, sent, at) in sends.values() {
        if *n >= size {
            complete += 1;
            let _ = last.record(at.saturating_sub(*sent).max(1));
        }
    }
    Tally { delivered, complete, incomplete: sends.len() as u64 - complete, last }
}

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let target = traffic::target(args, args.embedded).await?;
    let mode = traffic::mode_name(args, args.embedded);
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let largest = args.group_sizes.iter().copied().max().unwrap_or(1).max(1);
    let members: Vec<String> = (0..largest).map(|i| format!("{prefix}-m{i}")).collect();
    let senders: Vec<String> = (0..args.fanout_senders).map(|i| format!("{prefix}-s{i}")).collect();
    let m_tokens = client::register_all(&http, &target, &members).await?;
    let s_tokens = client::register_all(&http, &target, &senders).await?;
    for size in &args.group_sizes {
        client::create_group(&http, &target, &format!("{prefix}-g{size}"), &members[..*size]).await?;
    }
    let mut m_ws = Vec::new();
    for t in &m_tokens {
        m_ws.push(client::connect(&target.ws_url, t).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let base = Instant::now();
    let stop = CancellationToken::new();
    let member_tasks: Vec<_> = m_ws.into_iter().map(|ws| tokio::spawn(member(ws, base, stop.clone()))).collect();
    let members = Arc::new(members);
    let pad = padding(args.payload_bytes);
    // Phase 0: single sends; phase i: the group of `group_sizes[i - 1]`.
    let mut phases: Vec<(String, usize, Clock, u64)> = Vec::new();
    let plan = std::iter::once(("single".to_string(), 1, To::RoundRobin(members.clone())))
        .chain(args.group_sizes.iter().map(|s| (format!("group_{s}"), *s, To::Group(format!("@{prefix}-g{s}")))));
    for (phase, (name, size, to)) in plan.enumerate() {
        let mut s_ws = Vec::new();
        for t in &s_tokens {
            s_ws.push(client::connect(&target.ws_url, t).await?);
        }
        let start = Instant::now() + args.warmup;
        let clock = Clock { base, start, end: start + args.duration };
        let tasks: Vec<_> = s_ws
            .into_iter()
            .enumerate()
            .map(|(i, ws)| {
                let ctx = SendCtx { phase: phase as u8, idx: i, senders: args.fanout_senders, window: args.window };
                tokio::spawn(sender(ws, ctx, to.clone(), pad.clone(), clock))
            })
            .collect();
        let mut sends = 0;
        for t in tasks {
            sends += t.await.context("sender task")?.context("sender")?;
        }
        // The last sends' pushes still arrive: they count for latency, not for delivered/s.
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some((b, _)) = &target.local {
            b.settle(Duration::from_secs(120)).await?;
        }
        phases.push((name, size, clock, sends));
    }
    stop.cancel();
    let mut receipts = Vec::new();
    for t in member_tasks {
        receipts.extend(t.await.context("member task")?.context("member")?);
    }
    target.shutdown().await;

    let mut results = json!({"mode": mode, "members": largest, "senders": args.fanout_senders});
    let mut summary = Vec::new();
    let mut single_per_s = None;
    for (phase, (name, size, clock, sends)) in phases.iter().enumerate() {
        let (start, end) = (clock.us(clock.start), clock.us(clock.end));
        let t = tally(&receipts, phase as u8, *size, start, end);
        let delivered_per_s = per_sec(t.delivered, args.duration);
        let last = latency_json(&t.last);
        let mut v = json!({
            "size": size,
            "sends_whole_phase": sends,
            "sends_per_s": per_sec(t.complete + t.incomplete, args.duration),
            "delivered": t.delivered,
            "delivered_per_s": delivered_per_s,
            "complete_sends": t.complete,
            "incomplete_sends": t.incomplete,
            "send_to_last_member": last,
        });
        let line = format!(
            "{name}: {delivered_per_s} signals/s delivered; send→last member p50 {} ms, p99 {} ms",
            last["p50_ms"], last["p99_ms"]
        );
        match single_per_s {
            None => {
                single_per_s = Some(delivered_per_s);
                summary.push(format!("{mode}, {} senders, {largest} members — {line}", args.fanout_senders));
            }
            Some(single) => {
                let ratio = if single > 0.0 { json!(round(delivered_per_s / single, 3)) } else { Value::Null };
                v["ratio"] = ratio.clone();
                summary.push(format!("{line}; ÷ single-send delivered/s {ratio} (target ≥ 1.0)"));
            }
        }
        results[name] = v;
    }
    Ok(Outcome { results, summary })
}

#[derive(Clone)]
enum To {
    RoundRobin(Arc<Vec<String>>),
    Group(String),
}

#[derive(Clone, Copy)]
struct SendCtx {
    phase: u8,
    idx: usize,
    senders: usize,
    window: usize,
}

/// Sends until the clock's end with `window` sends outstanding; returns how many it sent.
async fn sender(ws: Ws, ctx: SendCtx, to: To, pad: Arc<str>, clock: Clock) -> anyhow::Result<u64> {
    let (mut sink, mut stream) = ws.split();
    let (mut k, mut open) = (0u64, 0usize);
    let drain_until = clock.end + Duration::from_secs(10);
    loop {
        let sending = Instant::now() < clock.end;
        if !sending && (open == 0 || Instant::now() >= drain_until) {
            break;
        }
        tokio::select! {
            _ = std::future::ready(()), if sending && open < ctx.window => {
                let dest = match &to {
                    To::Group(g) => g.as_str(),
                    To::RoundRobin(all) => &all[((k * ctx.senders as u64 + ctx.idx as u64) % all.len() as u64) as usize],
                };
                let stamp = clock.us(Instant::now());
                let frame = format!(
                    r#"{{"op":"send","ref":"{k}","to":"{dest}","type":"StatusUpdate","payload":{{"p":{},"s":{},"k":{k},"t":{stamp},"pad":"{pad}"}}}}"#,
                    ctx.phase, ctx.idx
                );
                sink.send(Message::text(frame)).await.context("send frame")?;
                k += 1;
                open += 1;
            }
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break };
                if matches!(&msg, Message::Text(t) if t.as_str().contains(r#""op":"result""#)) {
                    open = open.saturating_sub(1);
                }
            }
            _ = tokio::time::sleep_until(clock.end), if sending => {}
            _ = tokio::time::sleep_until(drain_until), if !sending => {}
        }
    }
    let _ = sink.close().await;
    Ok(k)
}

/// Records every signal it receives and acks in batches (64 ids or 5 ms), until `stop`.
async fn member(ws: Ws, base: Instant, stop: CancellationToken) -> anyhow::Result<Vec<Receipt>> {
    let (mut sink, mut stream) = ws.split();
    let mut receipts = Vec::new();
    let mut acks: Vec<String> = Vec::with_capacity(64);
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break };
                let Message::Text(t) = msg else { continue };
                if !t.as_str().starts_with(r#"{"op":"signal""#) {
                    continue;
                }
                let at_us = Instant::now().saturating_duration_since(base).as_micros() as u64;
                let v: Value = serde_json::from_str(t.as_str()).context("signal frame")?;
                let (s, p) = (&v["signal"], &v["signal"]["payload"]);
                if let (Some(phase), Some(sender), Some(k), Some(sent_us)) =
                    (p["p"].as_u64(), p["s"].as_u64(), p["k"].as_u64(), p["t"].as_u64())
                {
                    receipts.push(Receipt { phase: phase as u8, sender: sender as u16, k, sent_us, at_us });
                }
                if let Some(id) = s["id"].as_str() {
                    acks.push(id.to_string());
                }
                if acks.len() >= 64 {
                    flush_acks(&mut sink, &mut acks).await?;
                }
            }
            _ = tick.tick(), if !acks.is_empty() => flush_acks(&mut sink, &mut acks).await?,
        }
    }
    if !acks.is_empty() {
        flush_acks(&mut sink, &mut acks).await?;
    }
    let _ = sink.close().await;
    Ok(receipts)
}

#[cfg(test)]
mod tests {
    use super::{tally, Receipt};

    fn r(phase: u8, sender: u16, k: u64, sent_us: u64, at_us: u64) -> Receipt {
        Receipt { phase, sender, k, sent_us, at_us }
    }

    #[test]
    fn a_send_counts_once_every_member_has_it_at_its_last_receipt() {
        let receipts = [
            // Phase 1, groups of 2: send (0, 0) complete, last at 150; (0, 1) one member short.
            r(1, 0, 0, 100, 120),
            r(1, 0, 0, 100, 150),
            r(1, 0, 1, 110, 130),
            // Sent before the window: delivered inside it, but no latency.
            r(1, 1, 0, 50, 105),
            r(1, 1, 0, 50, 106),
            // Delivered after the window: latency, not delivered/s.
            r(1, 1, 1, 190, 260),
            r(1, 1, 1, 190, 270),
            // Another phase.
            r(0, 0, 0, 100, 101),
        ];
        let t = tally(&receipts, 1, 2, 100, 200);
        assert_eq!(t.delivered, 5);
        assert_eq!((t.complete, t.incomplete), (2, 1));
        assert_eq!(t.last.len(), 2);
        assert_eq!(t.last.max(), 80);
        assert_eq!(t.last.min(), 50, "150 − 100");
        assert_eq!(tally(&receipts, 0, 1, 100, 200).complete, 1);
    }
}
