//! `connections`: how much memory an idle WebSocket session costs the bus. The bus runs in this
//! process; the sessions are opened and held by a child process (this binary, `_hold`), so the
//! RSS delta measured here is the bus's alone, not the clients' socket buffers.
//!
//! Deliberately idle sessions: they answer the bus's pings (which keeps them live and records
//! heartbeats) and send nothing else.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::args::Args;
use crate::bed::Target;
use crate::client;
use crate::report::{per_sec, round, rss_kib, Outcome};

/// Sessions per identity: several sessions per agent, as daemons and shims would have.
const SESSIONS_PER_IDENTITY: usize = 100;

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    let target = match &args.url {
        Some(url) => {
            if args.bus_pid.is_none() {
                bail!("with --url, connections needs --bus-pid to read the bus's RSS");
            }
            Target::external(url, args.admin_token.as_deref().unwrap_or_default(), None)
        }
        None => Target::start(args.embedded, args.nats).await?,
    };
    let pid = args.bus_pid;
    let http = reqwest::Client::new();
    let prefix = client::run_prefix();
    let identities: Vec<String> =
        (0..args.sessions.div_ceil(SESSIONS_PER_IDENTITY)).map(|i| format!("{prefix}-idle{i}")).collect();
    let tokens = client::register_all(&http, &target, &identities).await?;
    let tokens_file = tempfile::NamedTempFile::new()?;
    std::fs::write(tokens_file.path(), tokens.join("\n"))?;
    // Warm the bus's per-session paths once, so one-time allocations are not billed to sessions.
    drop(client::connect(&target.ws_url, &tokens[0]).await?);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before = rss_kib(pid).context("cannot read VmRSS")?;

    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args(["_hold", "--sessions", &args.sessions.to_string(), "--ws-url", &target.ws_url, "--tokens-file"])
        .arg(tokens_file.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("spawn the session holder")?;
    let mut lines = BufReader::new(child.stdout.take().context("child stdout")?).lines();
    let ready = tokio::time::timeout(Duration::from_secs(600), lines.next_line())
        .await
        .context("sessions not open within 10 minutes")??
        .context("the session holder exited")?;
    let connect_secs: f64 = ready.split_whitespace().nth(2).and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
    if let Some((_, gw)) = &target.local {
        let deadline = Instant::now() + Duration::from_secs(60);
        while gw.local_sessions() < args.sessions && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Session openings append events and run startup drains; let that settle before measuring.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_after = rss_kib(pid).context("cannot read VmRSS")?;
    let held = target.local.as_ref().map(|(_, gw)| gw.local_sessions());
    drop(child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    target.shutdown().await;

    let n = args.sessions as f64;
    let per_session_kib = round((rss_after as f64 - rss_before as f64) / n, 2);
    let results = json!({
        "sessions": args.sessions,
        "sessions_held_by_bus": held,
        "rss_before_kib": rss_before,
        "rss_after_kib": rss_after,
        "rss_per_session_kib": per_session_kib,
        "connect_seconds": round(connect_secs, 2),
        "connects_per_s": per_sec(args.sessions as u64, Duration::from_secs_f64(connect_secs.max(1e-9))),
    });
    let summary = vec![format!(
        "{} idle sessions: RSS {rss_before} → {rss_after} KiB = {per_session_kib} KiB per session (target ≤ 16 KiB); opened in {connect_secs:.1} s",
        args.sessions
    )];
    Ok(Outcome { results, summary })
}

/// The child: opens `--sessions` sessions round-robin over the tokens, keeps reading them (so
/// pings get their pongs), prints `ready <n> <seconds>`, and holds them until stdin closes.
pub async fn hold(args: &Args) -> anyhow::Result<()> {
    let ws_url = args.ws_url.clone().context("--ws-url")?;
    let tokens: Vec<String> = std::fs::read_to_string(args.tokens_file.as_ref().context("--tokens-file")?)?
        .lines()
        .map(str::to_string)
        .collect();
    let started = Instant::now();
    let opened: Vec<anyhow::Result<client::Ws>> = futures::stream::iter(0..args.sessions)
        .map(|i| {
            let url = ws_url.clone();
            let token = tokens[i % tokens.len()].clone();
            async move { client::connect(&url, &token).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let mut readers = Vec::with_capacity(opened.len());
    for ws in opened {
        let mut ws = ws?;
        readers.push(tokio::spawn(async move { while ws.next().await.is_some() {} }));
    }
    println!("ready {} {secs:.3}", readers.len());
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    for r in readers {
        r.abort();
    }
    Ok(())
}
