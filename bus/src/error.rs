//! Errors of the bus crate: `DomainError` for rule violations decided without I/O, `Error` for
//! everything that touched the event log.
//!
//! Deliberately does not map to HTTP statuses or wire codes: that is the gateway's job.

use crate::directive_status::DirectiveStatus;

/// A command the rules refuse. Pure: produced by `decide`, never by I/O.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("signal not found")]
    NotFound,
    #[error("recipient is not registered")]
    UnknownRecipient,
    /// A registration of an identity that is registered.
    #[error("{0} is already registered")]
    AlreadyRegistered(String),
    /// A command on an identity that is not registered (never, or removed).
    #[error("no agent {0:?}")]
    UnknownAgent(String),
    /// The caller may not do this (the message says what it may do).
    #[error("{0}")]
    Forbidden(String),
    /// The command does not apply in the signal's current state (the reason says which).
    #[error("refused: {0}")]
    Refused(Refusal),
    /// A directive that does not exist, or that the caller is no party to (ids cannot be probed).
    #[error("directive not found")]
    UnknownDirective,
    /// A directive transition its current state does not allow.
    #[error("the directive is {status}: {action} is not allowed")]
    InvalidTransition { status: DirectiveStatus, action: &'static str },
    /// A group member acting on a directive another member claimed.
    #[error("the directive is claimed by {claimed_by}")]
    AlreadyClaimed { claimed_by: String },
    /// An idempotency key repeated with another `to`, `type` or `params`.
    #[error("idempotency_key was used for directive {directive_id} with another to, type or params")]
    IdempotencyConflict { directive_id: uuid::Uuid },
    /// A group that does not exist (never created, or deleted).
    #[error("no group {0:?}")]
    UnknownGroup(String),
    /// A token id never issued (to that agent, or as a tenant admin token).
    #[error("no token {0}")]
    UnknownToken(uuid::Uuid),
    /// A revocation of a token revoked already (the caller may treat it as done).
    #[error("token {0} is revoked already")]
    TokenRevoked(uuid::Uuid),
}

/// Why a command does not apply to a signal in its current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("already delivered")]
    AlreadyDelivered,
    /// Past its `expires_at`, or expired on the stream; also a delivery that could not be
    /// stored before the signal's `expires_at` (`acceptance::store_by`).
    #[error("expired")]
    Expired,
    #[error("recalled")]
    Recalled,
    /// Before its time: an expiry before `expires_at`, a release before `deliver_at`, or a
    /// delivery of a scheduled signal that is neither due nor released (CONTRACT §16).
    #[error("not yet due")]
    NotYetDue,
    /// A release of a signal that was not scheduled.
    #[error("not scheduled")]
    NotScheduled,
    /// A release of a scheduled signal that was released already.
    #[error("already released")]
    AlreadyReleased,
    #[error("already terminal")]
    AlreadyTerminal,
    #[error("not delivered")]
    NotDelivered,
}

impl DomainError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::Invalid(msg.into())
    }
}

pub type DomainResult<T> = std::result::Result<T, DomainError>;

/// Everything that can go wrong in the bus crate, including the event log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// A compare-and-set append lost: the subject's last sequence was not the expected one.
    #[error("append lost a race on {subject} (expected last seq {expected}, found {found:?})")]
    Conflict { subject: String, expected: u64, found: Option<u64> },
    /// The log could not take or give the event; nothing was accepted.
    #[error("event log unavailable: {0}")]
    Unavailable(String),
    /// The stream stayed silent so long that whether the event was stored cannot be told yet
    /// (a copy may have been stored in time and its answer lost). Never "nothing was accepted".
    #[error("the outcome of an append is unknown: {0}")]
    Indeterminate(String),
    #[error("event could not be decoded: {0}")]
    Decode(String),
    /// A stored event that cannot be decoded (corrupt, or written by something other than
    /// signalbus). Readers are told once where it is and read on past it, so one bad event never
    /// stops a tail; what to do with it (the projector dead-letters it) is theirs to decide.
    #[error("event {seq} on {subject} cannot be decoded: {reason}")]
    Undecodable { seq: u64, subject: String, reason: String },
    #[error("event could not be encoded: {0}")]
    Encode(String),
    /// The log cannot be used as configured: a bad URL or stream name, a stream that exists
    /// with other settings, a data file written by a newer binary.
    #[error("event log configuration: {0}")]
    Config(String),
    /// The stream refused the event itself (too large, stream sealed, ...).
    #[error("the stream refused the event: {0}")]
    Rejected(String),
    /// The embedded log's SQLite file failed.
    #[error("event log storage: {0}")]
    Sqlite(#[from] sqlx::Error),
    /// The event would count only if stored before its deadline (`acceptance::store_by`: a
    /// delivery before its signal's `expires_at`), and the stream stored it later or could not
    /// store it in time: nothing was accepted. `store` turns it into `Refusal::Expired`.
    #[error("the event could not be stored before its deadline; nothing was accepted")]
    TooLate,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
