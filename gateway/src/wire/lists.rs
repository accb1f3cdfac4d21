//! The query of a signal list (`GET /v1/signals`, MCP `list_signals`): `role`, `status`,
//! `correlation_id` (one conversation), `limit` and `cursor`, read with specific messages and
//! shared by both surfaces, so they refuse alike.
//!
//! Deliberately only parsing: what a page holds, and in which order, is `reads::signals`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use projector::queries::{Role, StatusFilter};
use uuid::Uuid;

use crate::error::ApiError;

/// Longest correlation id a send takes (and so the longest that can name a conversation).
pub const CORRELATION_ID_MAX: usize = 64;

/// A request for a page of the caller's signals: `GET /v1/signals` and MCP `list_signals`.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalList {
    pub role: Option<Role>,
    pub status: Option<StatusFilter>,
    /// Only this conversation's signals, oldest first (newest first without it).
    pub correlation_id: Option<String>,
    pub limit: u32,
    /// `next_cursor` of the previous page of the same listing.
    pub cursor: Option<(DateTime<Utc>, Uuid)>,
}

impl SignalList {
    /// Reads `role`, `status`, `correlation_id`, `limit` (1–1000, default 100) and `cursor` from
    /// query parameters (HTTP) or tool arguments (MCP); other names are ignored, as they always
    /// were over HTTP.
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let role = match q.get("role").map(String::as_str) {
            None => None,
            Some("sent") => Some(Role::Sent),
            Some("received") => Some(Role::Received),
            Some(_) => return Err(ApiError::invalid("role must be sent or received")),
        };
        let status = match q.get("status").map(String::as_str) {
            None => None,
            Some("pending") => Some(StatusFilter::Pending),
            Some("delivered") => Some(StatusFilter::Delivered),
            Some("expired") => Some(StatusFilter::Expired),
            Some("recalled") => Some(StatusFilter::Recalled),
            Some(_) => return Err(ApiError::invalid("status must be pending, delivered, expired or recalled")),
        };
        let correlation_id = q.get("correlation_id").cloned();
        if let Some(c) = &correlation_id {
            let n = c.chars().count();
            if n == 0 || n > CORRELATION_ID_MAX || c.contains('\0') {
                return Err(ApiError::invalid(format!(
                    "correlation_id must be 1 to {CORRELATION_ID_MAX} characters (without U+0000)"
                )));
            }
        }
        let limit = match q.get("limit") {
            None => 100,
            Some(l) => l
                .parse::<u32>()
                .ok()
                .filter(|l| (1..=1000).contains(l))
                .ok_or_else(|| ApiError::invalid("limit must be a whole number between 1 and 1000"))?,
        };
        let cursor = q.get("cursor").map(|c| super::cursor::decode(c)).transpose()?;
        Ok(SignalList { role, status, correlation_id, limit, cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<SignalList, String> {
        let q = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        SignalList::from_query(&q).map_err(|e| e.to_string())
    }

    #[test]
    fn a_conversation_needs_a_correlation_id_of_1_to_64_characters() {
        let ok = parse(&[("correlation_id", "t-1"), ("role", "sent"), ("limit", "5")]).unwrap();
        assert_eq!((ok.correlation_id.as_deref(), ok.role, ok.limit), (Some("t-1"), Some(Role::Sent), 5));
        assert_eq!(parse(&[]).unwrap().limit, 100);
        let long = "é".repeat(65);
        for bad in ["", long.as_str(), "a\0b"] {
            assert!(parse(&[("correlation_id", bad)]).unwrap_err().starts_with("correlation_id must be"), "{bad:?}");
        }
        assert!(parse(&[("correlation_id", &"é".repeat(64))]).is_ok(), "characters, not bytes");
        assert_eq!(parse(&[("status", "lost")]).unwrap_err(), "status must be pending, delivered, expired or recalled");
        assert!(parse(&[("cursor", "zz")]).is_err());
    }
}
