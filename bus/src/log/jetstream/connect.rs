//! Opening the JetStream log: the server list, the connection's failover settings, the
//! server's version check, and the stream created as configured or checked against the
//! configuration (never silently adopted).
//!
//! The connection settings are chosen for a cluster losing a node (docs/deploy.md, "Failover
//! times"): a server that dies with its host sends no TCP reset, so an idle connection pings it
//! every `PING_INTERVAL` and gives it up after three unanswered pings; connecting to a host that
//! is gone gives up after `CONNECT_TIMEOUT`; the first reconnect is immediate. Every drop is
//! counted (`JetStreamLog::drops`), so an append waiting for an ack that went down with the
//! connection publishes again at once instead of waiting out its attempt.
//!
//! Deliberately does not read or append events.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::stream::{self, StorageType};
use tokio::sync::{watch, Mutex};
use tracing::debug;

use super::errors::unavailable;
use super::subject_reads::ReadPath;
use super::{stream_check, JetStreamConfig, JetStreamLog, DUPLICATE_WINDOW, PER_SUBJECT_LIMIT};
use crate::error::{Error, Result};
use crate::event::Subjects;

/// How often an idle connection pings its server; three unanswered pings drop it (async-nats
/// allows two outstanding), so a silent server is left after about three of these.
const PING_INTERVAL: Duration = Duration::from_secs(1);
/// How long connecting to one server may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Delay before reconnect attempt `attempts` (counted per server tried, from 1): none for the
/// first, then 100 ms more per attempt up to a second, so a dead server in the list costs one
/// refused connect, not a pause.
fn reconnect_delay(attempts: usize) -> Duration {
    Duration::from_millis((attempts.saturating_sub(1) as u64 * 100).min(1000))
}

/// The server refuses a duplicate window longer than `max_age` (`0`: keep forever).
fn duplicate_window(max_age: Duration) -> Duration {
    if max_age.is_zero() {
        DUPLICATE_WINDOW
    } else {
        DUPLICATE_WINDOW.min(max_age)
    }
}

/// `nats://a:4222,nats://b:4222` as the servers async-nats connects to (any of them, and
/// whichever the cluster tells it about).
fn server_addrs(url: &str) -> Result<Vec<async_nats::ServerAddr>> {
    let addrs: Vec<async_nats::ServerAddr> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| Error::Config(format!("invalid nats url {s:?}: {e}"))))
        .collect::<Result<_>>()?;
    if addrs.is_empty() {
        return Err(Error::Config("no nats url given".into()));
    }
    Ok(addrs)
}

fn valid_stream_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// How far before an existing stream's end its history's first probe is (`probe_history`).
const NEAREST_PROBE: u64 = 4096;

impl JetStreamLog {
    /// Connects to `url` (one server, or a comma-separated list of a cluster's servers), and
    /// creates the stream if it does not exist (or updates its `max_age`, direct gets and
    /// per-subject limit). A stream that exists with other replicas, subjects, retention, a
    /// shorter duplicate window or a per-subject limit that drops events is refused.
    pub async fn connect(url: &str, config: JetStreamConfig) -> Result<JetStreamLog> {
        if !valid_stream_name(&config.stream) {
            return Err(Error::Config(format!("invalid stream name {:?}", config.stream)));
        }
        let (drops_tx, drops) = watch::channel(0u64);
        let client = async_nats::ConnectOptions::new()
            .name("signalbus")
            .connection_timeout(CONNECT_TIMEOUT)
            .ping_interval(PING_INTERVAL)
            // Come back at once after a server dies instead of the default's growing steps.
            .reconnect_delay_callback(reconnect_delay)
            .event_callback(move |event| {
                if matches!(event, async_nats::Event::Disconnected) {
                    drops_tx.send_modify(|n| *n += 1);
                }
                std::future::ready(())
            })
            .connect(server_addrs(url)?)
            .await
            .map_err(|e| unavailable("cannot connect to nats", e))?;
        stream_check::check_server(&client.server_info().version, config.replicas)?;
        let js = jetstream::new(client.clone());
        let prefix = config.stream.to_lowercase();
        let subjects = Subjects::new(prefix);
        let wanted = stream::Config {
            name: config.stream.clone(),
            subjects: vec![subjects.all()],
            storage: StorageType::File,
            max_age: config.max_age,
            duplicate_window: duplicate_window(config.max_age),
            allow_direct: true,
            max_messages_per_subject: PER_SUBJECT_LIMIT,
            num_replicas: config.replicas.max(1),
            ..Default::default()
        };
        let mut stream = match js.get_or_create_stream(wanted.clone()).await {
            Ok(stream) => stream,
            // Roles started together against a fresh server race to create the stream: the
            // loser's create fails (2.9 answers "subjects overlap") though the stream now exists.
            Err(e) => {
                created_meanwhile(&js, &config.stream).await.ok_or_else(|| unavailable("cannot open stream", e))?
            }
        };
        let current = stream.info().await.map_err(|e| unavailable("cannot read stream info", e))?.config.clone();
        stream_check::check_stream(&current, &wanted)?;
        let unlimited_per_subject = current.max_messages_per_subject <= 0;
        if current.max_age != config.max_age || !current.allow_direct || unlimited_per_subject {
            let updated = stream::Config {
                max_age: config.max_age,
                duplicate_window: duplicate_window(config.max_age),
                allow_direct: true,
                max_messages_per_subject: PER_SUBJECT_LIMIT,
                ..current
            };
            js.update_stream(updated).await.map_err(|e| unavailable("cannot update stream", e))?;
            stream = js.get_stream(&config.stream).await.map_err(|e| unavailable("cannot open stream", e))?;
        }
        debug!(stream = %config.stream, prefix = subjects.prefix(), "jetstream log opened");
        let reads = ReadPath::for_replicas(config.replicas);
        let marks = std::sync::Arc::new(super::marks::Marks::default());
        let walks_blocks = walks_blocks(&client.server_info().version);
        if walks_blocks {
            tokio::spawn(probe_history(stream.clone(), reads, marks.clone()));
        }
        Ok(JetStreamLog {
            client,
            js,
            drops,
            stream,
            subjects,
            reads,
            cursor: Mutex::new(None),
            nodes: std::sync::Arc::new(crate::log::nodes::NodeBook::new(false)),
            node_listener: std::sync::Once::new(),
            fanout: Default::default(),
            own: Default::default(),
            firsts: Default::default(),
            recent: Default::default(),
            marks,
            walks_blocks,
            min_mark_skip: config.min_mark_skip,
        })
    }
}

/// Whether a server of `version` ("2.9.10") finds a subject's next message by visiting its
/// message blocks one by one from the start sequence: releases before 2.10, which added an index
/// of each subject's first block. An unreadable version is taken as a newer one.
fn walks_blocks(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    matches!((parts.next().flatten(), parts.next().flatten()), (Some(major), Some(minor)) if (major, minor) < (2, 10))
}

/// Marks the stream's history with the stored times of sequences `NEAREST_PROBE`, twice that,
/// four times that, ... before its end (and its first), so subjects older than this process's
/// own appends are not read from sequence 1. A subject read walks to the stream's end anyway
/// (its last "next on this subject" finds nothing), so starting at the probe before a signal's
/// birth at most doubles that walk: about log2(stream ÷ 4,096) probes (16 for 268 million
/// events), newest first, in the background, one at a time (each costs the server one block
/// load). A failed probe ends them: the marks are only a help.
async fn probe_history(stream: stream::Stream, reads: ReadPath, marks: std::sync::Arc<super::marks::Marks>) {
    let mut stream = stream;
    let started = std::time::Instant::now();
    let (first, last) = match stream.info().await {
        Ok(info) => (info.state.first_sequence, info.state.last_sequence),
        Err(e) => return debug!(error = %e, "no history probes: cannot read stream info"),
    };
    if last <= first {
        return;
    }
    let mut back = NEAREST_PROBE;
    let mut probes = 0;
    loop {
        let seq = last.saturating_sub(back).max(first);
        match super::subject_reads::stored_at(&stream, reads, seq).await {
            Ok(at) => marks.note_stored(at, seq),
            Err(e) => return debug!(seq, error = %e, "history probes stopped"),
        }
        probes += 1;
        if seq == first {
            break;
        }
        back = back.saturating_mul(2);
    }
    debug!(first, last, probes, elapsed_ms = started.elapsed().as_millis() as u64, "stream history probed");
}

/// The stream `name`, if another process created it while this one tried to (looked for a few
/// times over half a second: the winner's create may still be settling).
async fn created_meanwhile(js: &jetstream::Context, name: &str) -> Option<jetstream::stream::Stream> {
    for _ in 0..5 {
        if let Ok(stream) = js.get_stream(name).await {
            return Some(stream);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}
