//! The child of `waiters` (this binary, hidden `_wait` mode): holds one `GET /v1/inbox?wait=60
//! &drain=true` long-poll per token over plain HTTP/1.1 keep-alive connections, re-polling as
//! soon as one is answered, and reports every answer on stdout as
//! `answer <index> <status> <signals> <latency_us> <held_ms>` (`latency_us`: now − the first
//! signal's payload `t`, both unix µs, or -1), after `ready <n> <seconds>` once every first
//! request is written. Holds them until stdin closes.
//!
//! Deliberately a hand-written HTTP/1.1 client (a request line, a header, a `Content-Length`
//! body): 10,000 connections with nothing between them and the socket, and no pool deciding
//! how many are open. Not a general client: it knows only the answers this bus gives here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::args::Args;

/// The long-poll each waiter repeats (CONTRACT §16: `wait` ≤ 60).
pub const WAIT_SECONDS: u64 = 60;

/// Connections opened at once while starting.
const OPENING: usize = 64;

pub async fn hold(args: &Args) -> anyhow::Result<()> {
    let base = args.url.clone().context("--url")?;
    let host = base.trim_start_matches("http://").trim_end_matches('/').to_string();
    let tokens: Vec<String> = std::fs::read_to_string(args.tokens_file.as_ref().context("--tokens-file")?)?
        .lines()
        .map(str::to_string)
        .collect();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let printer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if out.write_all(format!("{line}\n").as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let opened: Vec<anyhow::Result<(usize, TcpStream, Arc<str>)>> = futures::stream::iter(tokens.iter().enumerate())
        .map(|(i, token)| {
            let request: Arc<str> = Arc::from(format!(
                "GET /v1/inbox?wait={WAIT_SECONDS}&drain=true HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
            ));
            let host = host.clone();
            async move {
                let mut tcp = TcpStream::connect(&host).await.context("connect")?;
                tcp.set_nodelay(true)?;
                tcp.write_all(request.as_bytes()).await.context("first request")?;
                Ok((i, tcp, request))
            }
        })
        .buffer_unordered(OPENING)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let mut tasks = Vec::with_capacity(opened.len());
    for o in opened {
        let (i, tcp, request) = o?;
        tasks.push(tokio::spawn(waiter(i, tcp, request, tx.clone())));
    }
    let _ = tx.send(format!("ready {} {secs:.3}", tasks.len()));
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    for t in tasks {
        t.abort();
    }
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), printer).await;
    Ok(())
}

/// One waiter: reads the answer to the request already written, reports it, asks again.
async fn waiter(i: usize, mut tcp: TcpStream, request: Arc<str>, out: mpsc::UnboundedSender<String>) {
    let mut buf = Vec::with_capacity(512);
    let mut sent = Instant::now();
    loop {
        let (status, body) = match read_response(&mut tcp, &mut buf).await {
            Ok(r) => r,
            Err(e) => {
                let _ = out.send(format!("error {i} {e:#}"));
                return;
            }
        };
        let held_ms = sent.elapsed().as_millis();
        let now_us = chrono::Utc::now().timestamp_micros();
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let signals = v["signals"].as_array().map_or(0, Vec::len);
        let latency = v["signals"][0]["payload"]["t"].as_i64().map_or(-1, |t| now_us - t);
        let _ = out.send(format!("answer {i} {status} {signals} {latency} {held_ms}"));
        if let Err(e) = tcp.write_all(request.as_bytes()).await {
            let _ = out.send(format!("error {i} {e}"));
            return;
        }
        sent = Instant::now();
    }
}

/// Reads one response with a `Content-Length` body from `tcp`, keeping what follows in `buf`.
async fn read_response(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<(u16, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).context("response head")?;
            let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).context("status line")?;
            let Some(len) = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().ok())?
            }) else {
                bail!("a response without Content-Length: {head}");
            };
            let total = end + 4 + len;
            while buf.len() < total {
                read_more(tcp, buf).await?;
            }
            let body = buf[end + 4..total].to_vec();
            buf.drain(..total);
            return Ok((status, body));
        }
        read_more(tcp, buf).await?;
    }
}

async fn read_more(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    buf.reserve(1024);
    if tcp.read_buf(buf).await.context("read")? == 0 {
        bail!("the bus closed the connection");
    }
    Ok(())
}
