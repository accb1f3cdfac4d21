//! The `announced_frames` phase of `memory`: sessions that each send a WebSocket frame header
//! announcing a text frame of 1 MiB − 1 (14 bytes, within the frame limit) and then one byte of
//! it, and nothing more. What the bus holds per such session is what a peer's 15 bytes cost it:
//! reported per session, both for the open session alone and for the announced frame on top.
//!
//! Deliberately only the measurement; the phase's place among the others is `mod.rs`'s.

use anyhow::Context;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::MaybeTlsStream;

use super::sampling::{rss, Phase, Sampler, SETTLE};
use crate::args::Args;
use crate::bed::Target;
use crate::client;
use crate::report::round;

/// The length the header announces: one byte under the bus's 1 MiB frame limit.
const ANNOUNCED: u64 = 1024 * 1024 - 1;

/// A masked client text frame header announcing `ANNOUNCED` bytes, and the first of them.
fn header_and_one_byte() -> Vec<u8> {
    let mask = [0x5a, 0x17, 0xc3, 0x08];
    let mut bytes = vec![0x81, 0x80 | 127];
    bytes.extend_from_slice(&ANNOUNCED.to_be_bytes());
    bytes.extend_from_slice(&mask);
    bytes.push(b'{' ^ mask[0]);
    bytes
}

/// A session whose client side holds next to nothing (tungstenite's client reserves 128 KiB
/// of read buffer by default, which in-process would be billed to the bus).
async fn lean(ws_url: &str, token: &str) -> anyhow::Result<client::Ws> {
    let config = WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0);
    let url = format!("{ws_url}?token={token}");
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
    Ok(ws)
}

pub(super) async fn announced_frames(args: &Args, target: &Target, token: &str) -> anyhow::Result<Phase> {
    let before = rss(args)?;
    let sampler = Sampler::start(args.bus_pid);
    let n = args.announce_sessions.max(1);
    let mut sessions = Vec::with_capacity(n);
    // The first through `client::connect`, which waits until the bus knows the token.
    drop(client::connect(&target.ws_url, token).await?);
    for _ in 0..n {
        sessions.push(lean(&target.ws_url, token).await?);
    }
    tokio::time::sleep(SETTLE).await;
    let open = rss(args)?;
    let frame = header_and_one_byte();
    for ws in &mut sessions {
        let MaybeTlsStream::Plain(tcp) = ws.get_mut() else { anyhow::bail!("announced_frames needs ws://") };
        tcp.write_all(&frame).await.context("write a frame header")?;
    }
    tokio::time::sleep(SETTLE).await;
    let announced = rss(args)?;
    let peak = sampler.peak();
    drop(sessions);
    tokio::time::sleep(SETTLE).await;
    let after = rss(args)?;
    let per = |kib: u64| round(kib as f64 / n as f64, 1);
    let per_session = per(open.saturating_sub(before));
    let per_frame = per(announced.saturating_sub(open));
    Ok(Phase {
        before,
        peak,
        after,
        detail: serde_json::json!({
            "sessions": n, "announced_bytes": ANNOUNCED, "rss_open_kib": open, "rss_announced_kib": announced,
            "per_session_kib": per_session, "per_announced_frame_kib": per_frame,
            "per_session_with_frame_kib": round(per_session + per_frame, 1),
        }),
        summary: format!(
            "{n} sessions: {per_session} KiB each open, +{per_frame} KiB each once a header announced \
             {ANNOUNCED} bytes and one arrived (target ≤ 64 KiB)"
        ),
    })
}
