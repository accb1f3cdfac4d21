//! The opaque page cursor of `GET /v1/signals` and `GET /v1/directives`: the `(created_at, id)`
//! of a page's last row, as `<µs since the epoch>-<id as 32 hex digits>`.
//!
//! Deliberately knows no query: the handlers pass the position to the read models.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::ApiError;

/// What a cursor looks like (declared in the OpenAPI document): every string of this shape is
/// a position `decode_cursor` accepts, and nothing else is.
pub const PATTERN: &str = "^[0-9]{1,16}-[0-9a-f]{32}$";

/// The cursor is opaque to clients: `<created_at in µs since the epoch>-<id, 32 hex digits>` of
/// the last row of a page.
pub fn encode(at: DateTime<Utc>, id: Uuid) -> String {
    format!("{}-{}", at.timestamp_micros(), id.simple())
}

pub fn decode(c: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let bad = || ApiError::invalid("cursor is not one this bus handed out");
    let (micros, id) = c.split_once('-').ok_or_else(bad)?;
    let digits = |s: &str, max: usize, ok: fn(&u8) -> bool| (1..=max).contains(&s.len()) && s.bytes().all(|b| ok(&b));
    if !digits(micros, 16, u8::is_ascii_digit)
        || id.len() != 32
        || !digits(id, 32, |b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(bad());
    }
    let at = micros.parse().ok().and_then(DateTime::from_timestamp_micros).ok_or_else(bad)?;
    Ok((at, Uuid::parse_str(id).map_err(|_| bad())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let at = DateTime::parse_from_rfc3339("2026-05-03T12:00:00.123456Z").unwrap().with_timezone(&Utc);
        let id = Uuid::new_v4();
        assert_eq!(decode(&encode(at, id)).unwrap(), (at, id));
        assert!(encode(at, id).len() <= 16 + 1 + 32);
        for garbage in ["zz", "", "-", "1-", &format!("-{}", id.simple()), &format!("1-{}", id.simple()).to_uppercase()]
        {
            assert!(decode(garbage).is_err(), "{garbage:?}");
        }
        assert!(decode(&format!("{}-{id}", at.timestamp_micros())).is_err(), "hyphenated ids are not cursors");
        // Every string of the declared shape is a cursor, the extremes included.
        for ok in [format!("0-{}", "0".repeat(32)), format!("{}-{}", "9".repeat(16), "f".repeat(32))] {
            assert!(decode(&ok).is_ok(), "{ok}");
        }
    }
}
