//! `Agent`: who an authenticated agent is (tenant, identity, and the hash of the token it used).
//!
//! Deliberately a leaf and only data: authentication makes one (`auth`), sessions, reads and
//! the surfaces carry it, and none of them needs to know how it was made.

/// An authenticated agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub tenant: String,
    pub identity: String,
    /// The hash of the token it authenticated with, so a rotation can close exactly the
    /// sessions opened with an older token.
    pub token_hash: String,
}
