//! `EventLog` for `JetStreamLog`: the trait's calls mapped onto the stream — appends
//! (`append.rs`), subject reads (`subject_reads.rs`), paged reads through the handle's cursor,
//! and tails through the shared upstream (`fanout.rs`).
//!
//! Deliberately the top of `jetstream/`: the handle (`jetstream.rs`) and the parts below it
//! never call back up into this.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use tracing::debug;

use super::errors::{no_responders, unavailable};
use super::subject_reads::{self, ReadPath};
use super::{append, fanout, Cursor, JetStreamLog, READ_RETRIES};
use crate::error::{Error, Result};
use crate::event::{Event, Subjects};
use crate::log::{Appended, EventLog, Expect, Stored};

#[async_trait]
impl EventLog for JetStreamLog {
    fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    async fn append(&self, event: &Event, expect: Expect) -> Result<Appended> {
        let subject = self.subjects.for_event(event);
        let result = append::append(self, subject.clone(), event, expect).await;
        // Whatever the outcome: a list kept from before would only cost a check that fails.
        self.recent.forget(&subject);
        match &result {
            Ok(a) => {
                // Stored by now: a bound for subjects born later (`marks.rs`).
                self.marks.note_append(chrono::Utc::now(), a.seq);
                // Stored on an empty subject (or a repeat of that): the subject begins here.
                if expect == Expect::LastSubjectSeq(0) {
                    self.firsts.note(&subject, a.seq);
                }
            }
            Err(Error::Conflict { expected, found, .. }) => {
                debug!(subject = %subject, expected, ?found, "append lost a compare-and-set");
            }
            Err(_) => {}
        }
        result
    }

    async fn read_subject(&self, subject: &str) -> Result<Vec<Stored>> {
        self.read_subject_from(subject, 1).await
    }

    async fn read_subject_born(&self, subject: &str, born: chrono::DateTime<chrono::Utc>) -> Result<Vec<Stored>> {
        let from = if self.walks_blocks { self.marks.start_for(born) } else { 1 };
        // A start inside a block can cost the server a scan of that block's rest (2.9 scans
        // linearly when few messages remain after the start), so only a long skip is worth it.
        let from = if from >= self.min_mark_skip { from } else { 1 };
        self.read_subject_from(subject, from).await
    }

    async fn read_subject_after(&self, subject: &str, after: u64) -> Result<Vec<Stored>> {
        subject_reads::read_subject(&self.stream, self.reads, subject, after + 1).await
    }

    async fn last_on_subject(&self, subject: &str) -> Result<Option<Stored>> {
        subject_reads::last_on_subject(&self.stream, self.reads, subject).await
    }

    async fn read(&self, from_seq: u64, max: usize) -> Result<Vec<Stored>> {
        let from_seq = from_seq.max(1);
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        let mut cursor = self.cursor.lock().await;
        // Reuse the cursor if it stands where this read starts; a failed fetch may have left it
        // anywhere, so it is then replaced, once.
        let mut fresh = false;
        // A new consumer on a replicated stream may answer "no responders" (503) until its own
        // leader is elected: a few short retries, not an outage.
        let mut retries = 0u32;
        loop {
            let connects = self.client.statistics().connects.load(Ordering::Relaxed);
            let consumer = match cursor.take() {
                Some(c) if c.reusable_at(from_seq, connects) => c.consumer,
                _ => {
                    fresh = true;
                    self.consumer_from(from_seq).await?
                }
            };
            let fetched = match Self::fetch(&consumer, max, &mut out).await {
                Ok(true) if out.len() < max && self.reads == ReadPath::Leader => {
                    self.fetch_to_leader(&consumer, from_seq, max, &mut out).await
                }
                other => other,
            };
            match fetched {
                Ok(in_step) => {
                    let next = out.last().map_or(from_seq, |s| s.seq + 1);
                    if in_step {
                        *cursor = Some(Cursor { next, consumer, connects, used: Instant::now() });
                    }
                    return Ok(out);
                }
                // Another consumer would only find it again.
                Err(e @ Error::Undecodable { .. }) => return Err(e),
                Err(e) if !fresh => {
                    debug!(error = %e, from_seq, "read cursor failed, recreating it");
                    out.clear();
                }
                Err(Error::Unavailable(ref m)) if retries < READ_RETRIES && no_responders(m) => {
                    retries += 1;
                    debug!(error = %m, from_seq, retries, "read failed on a new consumer; retrying");
                    out.clear();
                    tokio::time::sleep(Duration::from_millis(100 << retries)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn tail(&self, from_seq: u64) -> Result<BoxStream<'static, Result<std::sync::Arc<Stored>>>> {
        let source = fanout::Source {
            js: self.js.clone(),
            client: self.client.clone(),
            drops: self.drops.clone(),
            stream: self.stream.clone(),
            all: self.subjects.all(),
        };
        // Asked before the lock (it is a round trip); a stale answer only makes the upstream
        // start earlier than needed.
        let live_from = if self.fanout.lock().unwrap().as_ref().is_some_and(fanout::Fanout::is_running) {
            0
        } else {
            self.last_seq().await? + 1
        };
        let sub = {
            let mut shared = self.fanout.lock().unwrap();
            if !shared.as_ref().is_some_and(fanout::Fanout::is_running) {
                *shared = Some(fanout::Fanout::start(&source, live_from.max(1), self.own.clone()));
            }
            shared.as_ref().map(|f| f.subscribe(source, from_seq))
        };
        let Some(sub) = sub else { return Err(Error::Unavailable("the shared tail did not start".into())) };
        // Boxed: the stream moves its state into and out of every step, and a subscriber holds
        // a whole private tail (consumer info and all, kilobytes) — a copy per event per reader.
        let sub = Box::new(sub);
        Ok(futures::stream::unfold(sub, |mut s| async move { s.next_event().await.map(|item| (item, s)) }).boxed())
    }

    async fn last_seq(&self) -> Result<u64> {
        let info = self.stream.get_info().await.map_err(|e| unavailable("cannot read stream info", e))?;
        Ok(info.state.last_sequence)
    }

    async fn announce_node(&self, node: &str) -> Result<()> {
        let subject = format!("_signalbus_nodes.{}", self.stream_name());
        self.node_listener.call_once(|| {
            let (client, book, subject) = (self.client.clone(), self.nodes.clone(), subject.clone());
            tokio::spawn(async move {
                // async-nats resubscribes after a reconnect; the book notices the gap in our own beats.
                let Ok(mut sub) = client.subscribe(subject).await else { return };
                while let Some(msg) = sub.next().await {
                    if let Ok(node) = std::str::from_utf8(&msg.payload) {
                        book.heard(node);
                    }
                }
            });
        });
        self.nodes.set_me(node);
        self.client
            .publish(subject, node.to_string().into())
            .await
            .map_err(|e| unavailable("cannot announce the node", e))
    }

    fn node_is_dead(&self, node: &str) -> bool {
        self.nodes.is_dead(node)
    }

    async fn ping(&self) -> Result<()> {
        self.stream.get_info().await.map(|_| ()).map_err(|e| unavailable("stream does not answer", e))
    }
}

impl JetStreamLog {
    /// Every event on `subject` from where it begins, when that is known (`firsts.rs`: exact),
    /// else from `bound` (1, or a mark the caller checks). A whole read teaches where the
    /// subject begins; a known start that finds nothing is forgotten and read past. A subject
    /// read before and not appended to since is answered from what that read found, once the
    /// stream's newest event on it says so (`recent.rs`).
    async fn read_subject_from(&self, subject: &str, bound: u64) -> Result<Vec<Stored>> {
        if self.recent.holds(subject) {
            match subject_reads::last_on_subject(&self.stream, self.reads, subject).await? {
                Some(last) => {
                    if let Some(events) = self.recent.current(subject, &last) {
                        return Ok(events);
                    }
                }
                None => self.recent.forget(subject),
            }
        }
        let (stored, bytes) = self.read_on_stream(subject, bound).await?;
        // Only a read known to start where the subject begins is its whole: one from a mark may
        // have started past it (the caller checks, and reads again from 1).
        if let Some(bytes) = bytes {
            self.recent.keep(subject, &stored, bytes);
        }
        Ok(stored)
    }

    /// `read_subject_from` on the stream itself, with the encoded size of what it read when the
    /// read is the subject's whole (it started at the subject's known first event, or at 1).
    async fn read_on_stream(&self, subject: &str, bound: u64) -> Result<(Vec<Stored>, Option<usize>)> {
        if let Some(first) = self.firsts.get(subject) {
            let (stored, bytes) = subject_reads::read_subject_sized(&self.stream, self.reads, subject, first).await?;
            if !stored.is_empty() {
                return Ok((stored, Some(bytes)));
            }
            self.firsts.forget(subject);
        }
        let (stored, bytes) = subject_reads::read_subject_sized(&self.stream, self.reads, subject, bound).await?;
        if let (1, Some(first)) = (bound, stored.first()) {
            self.firsts.note(subject, first.seq);
        }
        Ok((stored, (bound <= 1).then_some(bytes)))
    }
}
