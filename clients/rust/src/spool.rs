//! The offline spool: a directory of JSON files, one per send the bus could not take, in the
//! format shared with the Python and TypeScript clients (clients/SCENARIOS.md), with a size cap
//! and an age cap that evict the oldest entries first.
//!
//! Deliberately only storage: when to spool and how to replay is `client.rs` and `replay.rs`.
//! File I/O is blocking std::fs — entries are small and written once per failed send.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::schedule;
use crate::types_send::SendRequest;

pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
pub const DEFAULT_MAX_AGE_SECONDS: u64 = 24 * 3600;

/// A process-wide sequence number, so two entries spooled in the same millisecond sort in the
/// order they were written.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The file's JSON document (version 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Doc {
    version: u32,
    kind: String,
    spooled_at: String,
    identity: Option<String>,
    ttl_seconds: u64,
    #[serde(default)]
    reason: String,
    request: SendRequest,
}

/// One spooled send.
#[derive(Debug, Clone, PartialEq)]
pub struct SpoolEntry {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub spooled_at: DateTime<Utc>,
    /// The identity that spooled it, when known: only that identity replays it.
    pub identity: Option<String>,
    /// The send's TTL when it was spooled.
    pub ttl_seconds: u64,
    pub reason: String,
    /// The request, `dedupe_key` always set, `ttl_seconds` left out (see `ttl_seconds`).
    pub request: SendRequest,
}

impl SpoolEntry {
    pub fn dedupe_key(&self) -> &str {
        self.request.dedupe_key.as_deref().unwrap_or_default()
    }

    /// Whole seconds of TTL left at `now` (≤ 0: it expired while spooled). A scheduled send's
    /// TTL runs from its `deliver_at` (CONTRACT §16: `expires_at = deliver_at + ttl`).
    pub fn remaining_ttl(&self, now: DateTime<Utc>) -> i64 {
        let start = schedule::ttl_start(self.spooled_at, &self.request);
        let age = (now - start).num_milliseconds().max(0) as f64 / 1000.0;
        (self.ttl_seconds as f64 - age).floor() as i64
    }
}

/// A spool directory with its caps.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    max_age_seconds: u64,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Spool(format!("{what} {}: {e}", path.display()))
}

impl Spool {
    /// Opens (creating it) `dir`; both caps must be positive.
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64, max_age_seconds: u64) -> Result<Self> {
        let dir = dir.into();
        if max_bytes == 0 || max_age_seconds == 0 {
            return Err(Error::Spool("spool max_bytes and max_age_seconds must be positive".into()));
        }
        fs::create_dir_all(&dir).map_err(|e| io("cannot create", &dir, e))?;
        Ok(Spool { dir, max_bytes, max_age_seconds })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Entry files, oldest first (names sort by the time they were spooled).
    fn paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = fs::read_dir(&self.dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                        n.starts_with("send-") && n.ends_with(".json") && p.is_file()
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    pub fn len(&self) -> usize {
        self.paths().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn total_bytes(&self) -> u64 {
        self.paths().iter().filter_map(|p| fs::metadata(p).ok()).map(|m| m.len()).sum()
    }

    /// Reads one entry; an unreadable one is renamed `*.bad`, logged, and never replayed.
    fn load(&self, path: &Path) -> Option<SpoolEntry> {
        let raw = fs::read(path).ok()?; // gone: replayed by another client sharing the directory
        let parsed = serde_json::from_slice::<Doc>(&raw).map_err(|e| e.to_string()).and_then(|doc| {
            if doc.version != 1 || doc.kind != "send" {
                return Err(format!("unsupported version/kind {}/{}", doc.version, doc.kind));
            }
            if doc.request.dedupe_key.as_deref().unwrap_or_default().is_empty() {
                return Err("the entry's request has no dedupe_key".into());
            }
            let at = DateTime::parse_from_rfc3339(&doc.spooled_at).map_err(|e| format!("spooled_at: {e}"))?;
            Ok((doc, at.with_timezone(&Utc)))
        });
        match parsed {
            Ok((mut doc, spooled_at)) => {
                doc.request.ttl_seconds = None;
                Some(SpoolEntry {
                    name: path.file_name()?.to_string_lossy().into_owned(),
                    path: path.to_path_buf(),
                    size: raw.len() as u64,
                    spooled_at,
                    identity: doc.identity,
                    ttl_seconds: doc.ttl_seconds,
                    reason: doc.reason,
                    request: doc.request,
                })
            }
            Err(why) => {
                let bad = path.with_file_name(format!("{}.bad", path.file_name()?.to_string_lossy()));
                tracing::error!(entry = %path.display(), %why, "spool entry is unreadable: moved aside as .bad, never replayed");
                if let Err(e) = fs::rename(path, &bad) {
                    tracing::error!(entry = %path.display(), error = %e, "could not move an unreadable spool entry aside");
                }
                None
            }
        }
    }

    /// Every entry, newest first, after evicting those past the age cap.
    pub fn entries(&self) -> Vec<SpoolEntry> {
        self.evict(Utc::now(), 0);
        let mut out: Vec<SpoolEntry> = self.paths().iter().filter_map(|p| self.load(p)).collect();
        out.sort_by(|a, b| (b.spooled_at, &b.name).cmp(&(a.spooled_at, &a.name)));
        out
    }

    /// Writes `request` (which must carry a dedupe_key) as a new entry spooled at `now`,
    /// evicting what the caps demand first. Temp file, fsync, rename: a crash never leaves half
    /// an entry.
    pub fn put(
        &self,
        request: &SendRequest,
        ttl_seconds: u64,
        identity: Option<&str>,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<SpoolEntry> {
        let key = request.dedupe_key.clone().filter(|k| !k.is_empty());
        let Some(key) = key else {
            return Err(Error::Spool("a spooled send needs a dedupe_key".into()));
        };
        let mut request = request.clone();
        request.ttl_seconds = None;
        let iso = now.to_rfc3339_opts(SecondsFormat::Millis, true);
        let doc = Doc {
            version: 1,
            kind: "send".into(),
            spooled_at: iso.clone(),
            identity: identity.map(str::to_string),
            ttl_seconds,
            reason: reason.to_string(),
            request,
        };
        let data = serde_json::to_vec(&doc).map_err(|e| Error::Spool(format!("cannot encode the entry: {e}")))?;
        let size = data.len() as u64;
        if size > self.max_bytes {
            return Err(Error::SpoolFull {
                message: format!(
                    "the send is {size} bytes encoded, more than the whole spool ({} bytes); nothing was spooled",
                    self.max_bytes
                ),
                dedupe_key: Some(key),
            });
        }
        self.evict(now, size);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed) % 1_000_000;
        let name = format!("send-{}-{seq:06}-{:08x}.json", iso.replace(':', "-"), rand::random::<u32>());
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600); // payloads may be private
        let mut file = opts.open(&tmp).map_err(|e| io("cannot create", &tmp, e))?;
        file.write_all(&data).and_then(|()| file.sync_all()).map_err(|e| io("cannot write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| io("cannot rename", &tmp, e))?;
        Ok(SpoolEntry {
            name,
            path,
            size,
            spooled_at: DateTime::parse_from_rfc3339(&iso).map(|t| t.with_timezone(&Utc)).unwrap_or(now),
            identity: doc.identity,
            ttl_seconds,
            reason: doc.reason,
            request: doc.request,
        })
    }

    /// Deletes an entry (already gone is fine: another client may have replayed it).
    pub fn delete(&self, name: &str) {
        if let Err(e) = fs::remove_file(self.dir.join(name)) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(entry = name, error = %e, "could not delete a spool entry");
            }
        }
    }

    /// Deletes entries past the age cap, then the oldest until `room_for` more bytes fit under
    /// the size cap. Returns the names evicted (each logged as a warning).
    pub fn evict(&self, now: DateTime<Utc>, room_for: u64) -> Vec<String> {
        let mut evicted = Vec::new();
        let mut sized = Vec::new();
        for p in self.paths() {
            let Ok(meta) = fs::metadata(&p) else { continue };
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let at = name_time(&name).or_else(|| meta.modified().ok().map(DateTime::<Utc>::from)).unwrap_or(now);
            if (now - at).num_seconds() > self.max_age_seconds as i64 {
                tracing::warn!(entry = %name, max_age_seconds = self.max_age_seconds, "spool entry past the age cap: evicted, never replayed");
                self.delete(&name);
                evicted.push(name);
            } else {
                sized.push((name, meta.len()));
            }
        }
        let mut total: u64 = sized.iter().map(|(_, s)| s).sum();
        for (name, size) in sized {
            if total + room_for <= self.max_bytes {
                break;
            }
            tracing::warn!(entry = %name, max_bytes = self.max_bytes, "spool over its size cap: evicted its oldest entry, never replayed");
            self.delete(&name);
            evicted.push(name);
            total -= size;
        }
        evicted
    }
}

/// The time a file name says it was spooled (`send-2026-05-03T12-00-00.123Z-…`).
fn name_time(name: &str) -> Option<DateTime<Utc>> {
    let stamp = name.get(5..29)?;
    NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H-%M-%S%.3fZ").ok().map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_its_name_carries_its_time() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), DEFAULT_MAX_BYTES, DEFAULT_MAX_AGE_SECONDS).unwrap();
        let req = SendRequest::new("bob", "StatusUpdate").dedupe_key("k1").ttl_seconds(60);
        let now = Utc::now() - chrono::Duration::seconds(10);
        let put = spool.put(&req, 60, Some("alice"), "transport: down", now).unwrap();
        assert_eq!(name_time(&put.name).map(|t| t.timestamp_millis()), Some(now.timestamp_millis()));
        let got = spool.entries();
        assert_eq!(got, vec![put]);
        assert!((49..=50).contains(&got[0].remaining_ttl(Utc::now())));
        assert_eq!(got[0].request.ttl_seconds, None, "the TTL lives in the entry, not the request");
    }

    #[test]
    fn an_unreadable_entry_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), DEFAULT_MAX_BYTES, DEFAULT_MAX_AGE_SECONDS).unwrap();
        let name = format!("send-{}-000001-00000000.json", Utc::now().format("%Y-%m-%dT%H-%M-%S%.3fZ"));
        fs::write(dir.path().join(&name), b"{not json").unwrap();
        assert!(spool.entries().is_empty());
        assert!(dir.path().join(format!("{name}.bad")).exists());
    }
}
