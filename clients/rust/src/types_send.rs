//! The wire shapes of a send (CONTRACT §4, and §16's scheduled sends): the request and its
//! setters, the bus's accepted answer, a spooled send, and the §3 defaults (delivery class, TTL)
//! the client needs before the bus has answered.
//!
//! Deliberately data only, like `types.rs`: whether a scheduled send is well formed, and what
//! the spool keeps of it, is `schedule.rs`.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// A send (§4). Build it with [`SendRequest::new`] and the setters; every send the client makes
/// carries a `dedupe_key` (the caller's, or a generated `sbc-<uuid>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRequest {
    /// The recipient's identity (`@name` is a group: `send_group`).
    pub to: String,
    /// The signal type (CONTRACT §3 names the built-in ones; any other is allowed).
    #[serde(rename = "type")]
    pub signal_type: String,
    /// Any JSON value (`{}` unless set).
    #[serde(default)]
    pub payload: Value,
    /// `sync` or `async`; `None`: the type's default (§3).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_class: Option<String>,
    /// `None`: the type's default TTL (§3). A scheduled send's counts from `deliver_at`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ttl_seconds: Option<u64>,
    /// Ties a reply (and a conversation, `conversation`) to this send.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub correlation_id: Option<String>,
    /// The key that makes a resend harmless; `send` generates one when it is `None`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dedupe_key: Option<String>,
    /// Scheduled (§16): deliver this many whole seconds after the bus takes it. Not with
    /// `deliver_at`; async only.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub deliver_after_seconds: Option<u64>,
    /// Scheduled (§16): deliver at this instant (in the future, at most 30 days ahead). Not with
    /// `deliver_after_seconds`; async only.
    #[serde(skip_serializing_if = "Option::is_none", default, serialize_with = "millis")]
    pub deliver_at: Option<DateTime<Utc>>,
}

/// RFC 3339 in UTC with milliseconds and `Z`, as the Python and TypeScript clients write it
/// (the spool's files are shared).
fn millis<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(t) => s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true)),
        None => s.serialize_none(),
    }
}

impl SendRequest {
    /// A send of `signal_type` to `to` with an empty object as its payload.
    pub fn new(to: impl Into<String>, signal_type: impl Into<String>) -> Self {
        SendRequest {
            to: to.into(),
            signal_type: signal_type.into(),
            payload: Value::Object(Default::default()),
            delivery_class: None,
            ttl_seconds: None,
            correlation_id: None,
            dedupe_key: None,
            deliver_after_seconds: None,
            deliver_at: None,
        }
    }
    /// The payload (any JSON value).
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }
    /// `sync` or `async` (default: the type's, CONTRACT §3).
    pub fn delivery_class(mut self, class: impl Into<String>) -> Self {
        self.delivery_class = Some(class.into());
        self
    }
    /// The TTL in seconds (default: the type's, CONTRACT §3).
    pub fn ttl_seconds(mut self, ttl: u64) -> Self {
        self.ttl_seconds = Some(ttl);
        self
    }
    /// The correlation id a reply (and the conversation) carries.
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
    /// Your dedupe key (default: a fresh `sbc-<uuid>` per send).
    pub fn dedupe_key(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }
    /// Scheduled (CONTRACT §16): the bus holds the signal — invisible to its recipient — for
    /// `delay` (rounded up to whole seconds; at most 30 days), then delivers it like any async
    /// send. Async sends only; not with [`deliver_at`](Self::deliver_at): either mistake is
    /// `Error::Usage` at `send`, before anything is sent, and so is a zero delay.
    pub fn deliver_after(mut self, delay: Duration) -> Self {
        self.deliver_after_seconds = Some(delay.as_secs() + u64::from(delay.subsec_nanos() > 0));
        self
    }
    /// Scheduled (CONTRACT §16): the bus delivers the signal at `at` (in the future by its
    /// clock, at most 30 days ahead, else `Error::InvalidRequest`). Async sends only; not with
    /// [`deliver_after`](Self::deliver_after) (`Error::Usage` at `send`).
    pub fn deliver_at(mut self, at: DateTime<Utc>) -> Self {
        self.deliver_at = Some(at);
        self
    }
    /// The delivery class the bus will give this send: the request's, else the type's (§3).
    pub(crate) fn effective_class(&self) -> &str {
        self.delivery_class.as_deref().unwrap_or_else(|| default_delivery_class(&self.signal_type))
    }
}

/// The bus accepted a send (§4 accepted response).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SendResult {
    /// The new signal's id.
    pub signal_id: String,
    /// Pushed to a session and confirmed.
    #[serde(default)]
    pub delivered: bool,
    /// Waiting for the recipient (offline, stale, or scheduled).
    #[serde(default)]
    pub queued: bool,
    /// The recipient's state at send time (§2).
    pub recipient_state: String,
    /// `sync` or `async`.
    pub delivery_class: String,
    /// When the bus took it.
    pub created_at: DateTime<Utc>,
    /// When it expires if undelivered (a scheduled send's TTL counts from `deliver_at`).
    pub expires_at: DateTime<Utc>,
    /// The session it was pushed to, if it was.
    #[serde(default)]
    pub resolved_to_session: Option<String>,
    /// `pushed_to_ws`, `buffered_for_piggyback`, `queued_offline`, or `scheduled` (§16).
    pub publish_path: String,
    /// Payload paths the redaction guard replaced.
    #[serde(default)]
    pub redacted: Vec<String>,
    /// A scheduled send's delivery time (§16); `None` for a send that was not scheduled.
    #[serde(default)]
    pub deliver_at: Option<DateTime<Utc>>,
    /// The key the send carried (the caller's or the generated one); not a wire field.
    #[serde(skip)]
    pub dedupe_key: String,
}

impl SendResult {
    /// The bus holds it until `deliver_at` (`publish_path == "scheduled"`).
    pub fn is_scheduled(&self) -> bool {
        self.publish_path == "scheduled"
    }
}

/// The bus could not take the send; it waits in the spool and is replayed (same dedupe_key).
#[derive(Debug, Clone, PartialEq)]
pub struct Spooled {
    /// The key the replay sends it with.
    pub dedupe_key: String,
    /// The spool file's name.
    pub entry: String,
    /// Why it was spooled (the error's code and message).
    pub reason: String,
    /// When it was spooled.
    pub spooled_at: DateTime<Utc>,
    /// Its TTL as spooled (the replay sends what is left of it).
    pub ttl_seconds: u64,
}

/// What `send` did: accepted by the bus, or spooled for later.
#[derive(Debug, Clone, PartialEq)]
pub enum SendOutcome {
    /// The bus accepted it.
    Sent(SendResult),
    /// The spool took it.
    Spooled(Spooled),
}

impl SendOutcome {
    /// The key the send carried (the caller's or the generated one).
    pub fn dedupe_key(&self) -> &str {
        match self {
            SendOutcome::Sent(r) => &r.dedupe_key,
            SendOutcome::Spooled(s) => &s.dedupe_key,
        }
    }
    /// `true` when the spool took the send (Python `out.spooled`, TypeScript `out.spooled`).
    pub fn is_spooled(&self) -> bool {
        matches!(self, SendOutcome::Spooled(_))
    }
    /// The signal's id, or `None` when it was spooled: the bus gives it an id when the replay is
    /// accepted (`on_replay`). Python `out.signal_id`, TypeScript `out.signalId` (`null`).
    pub fn signal_id(&self) -> Option<&str> {
        self.sent().map(|r| r.signal_id.as_str())
    }
    /// The accepted result, or `None` when it was spooled.
    pub fn sent(&self) -> Option<&SendResult> {
        match self {
            SendOutcome::Sent(r) => Some(r),
            SendOutcome::Spooled(_) => None,
        }
    }
}

/// CONTRACT §3: the delivery class the bus gives a send of `signal_type` that names none
/// (`Blocker` and `Question` are sync, every other type async).
pub(crate) fn default_delivery_class(signal_type: &str) -> &'static str {
    match signal_type {
        "Blocker" | "Question" => "sync",
        _ => "async",
    }
}

/// CONTRACT §3: the type's default TTL in seconds. A spooled send without `ttl_seconds` is
/// stored with this so a replay can send the TTL it has left. A deployment that overrides the
/// defaults should pass `ttl_seconds` explicitly.
pub fn default_ttl(signal_type: &str) -> u64 {
    const H: u64 = 3600;
    match signal_type {
        "Blocker" => 4 * H,
        "Question" | "Acknowledgment" => H,
        "TaskAssigned" => 7 * 24 * H,
        "MasterPreempted" => 120,
        "PeerJoined" | "PeerLeft" => 300,
        _ => 24 * H,
    }
}
