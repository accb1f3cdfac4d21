//! The hot events' timestamps written without a heap allocation: chrono writes a `DateTime` as
//! its RFC 3339 text through `collect_str`, which rmp-serde answers by building a `String`
//! (and growing it) per timestamp — four of them in every send. Here the same text is formatted
//! into a buffer on the stack and handed over as a `str`.
//!
//! Deliberately the same bytes as chrono's own `Serialize` (a unit test holds them equal) and
//! chrono's own `Deserialize`: the encoding of stored events does not change.

use std::fmt::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Room for `+262143-12-31T23:59:59.999999999Z`, chrono's widest.
const WIDEST: usize = 40;

struct Text {
    buf: [u8; WIDEST],
    len: usize,
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// What chrono's `Serialize` writes: `to_rfc3339_opts(SecondsFormat::AutoSi, true)`. Its
/// `Debug` is the same text (naive date-time with 0, 3, 6 or 9 fraction digits, then `Z`).
pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut text = Text { buf: [0; WIDEST], len: 0 };
    match write!(text, "{at:?}").ok().and_then(|()| std::str::from_utf8(&text.buf[..text.len]).ok()) {
        Some(s) => serializer.serialize_str(s),
        None => serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
    DateTime::deserialize(deserializer)
}

/// The same for an `Option<DateTime<Utc>>`, as serde writes an `Option` (`some` or `none`).
pub mod option {
    use super::*;

    struct At<'a>(&'a DateTime<Utc>);

    impl Serialize for At<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            super::serialize(self.0, serializer)
        }
    }

    pub fn serialize<S: Serializer>(at: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => serializer.serialize_some(&At(at)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<DateTime<Utc>>::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[derive(Serialize)]
    struct Ours {
        #[serde(with = "super")]
        at: DateTime<Utc>,
        #[serde(with = "option")]
        maybe: Option<DateTime<Utc>>,
    }

    #[derive(Serialize)]
    struct Chronos {
        at: DateTime<Utc>,
        maybe: Option<DateTime<Utc>>,
    }

    fn instants() -> Vec<DateTime<Utc>> {
        let mut all = vec![Utc::now(), DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC];
        let base = Utc.with_ymd_and_hms(2026, 11, 28, 7, 4, 53).unwrap();
        for nanos in [0, 1, 9, 10, 999, 1_000, 1_500, 120_000, 999_999, 1_000_000, 5_000_000, 123_456_789, 999_999_999]
        {
            for days in [0i64, -20_000, 3_000_000] {
                all.push(base + chrono::Duration::days(days) + chrono::Duration::nanoseconds(nanos));
            }
        }
        all.push(Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap());
        all
    }

    #[test]
    fn given_any_instant_when_written_then_the_bytes_are_chronos_own() {
        for at in instants() {
            for maybe in [None, Some(at)] {
                let ours = rmp_serde::to_vec_named(&Ours { at, maybe }).unwrap();
                let chronos = rmp_serde::to_vec_named(&Chronos { at, maybe }).unwrap();
                assert_eq!(ours, chronos, "{at:?}");
                assert_eq!(
                    serde_json::to_string(&Ours { at, maybe }).unwrap(),
                    serde_json::to_string(&Chronos { at, maybe }).unwrap()
                );
            }
        }
    }
}
