//! RFC 3339 text of an instant without a heap allocation or the formatter: chrono writes a
//! `DateTime` through `collect_str` (rmp-serde answers it by building a `String` per
//! timestamp, four in every send) and through `core::fmt` (a `write_char` per padded digit,
//! ~1,900 instructions a timestamp under callgrind). Here the digits are written into a buffer
//! on the stack (`Rfc3339`), for the hot events' serde and for the gateway's frames.
//!
//! Deliberately the same bytes as chrono's own `to_rfc3339_opts(format, true)` and `Serialize`
//! (unit tests hold them equal over chrono's whole range), and chrono's own `Deserialize`: the
//! encoding of stored events and frames does not change. Instants outside years 0–9999 and leap
//! seconds take chrono's own path.

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `2026-11-28T12:40:05.123456789Z`: the widest text the fast path writes.
const WIDEST: usize = 30;

/// An instant's RFC 3339 text, UTC with `Z`, held on the stack.
#[derive(Debug, Clone)]
pub struct Rfc3339 {
    buf: [u8; WIDEST],
    len: usize,
    /// chrono's own text, for what the fast path does not write.
    other: Option<String>,
}

impl Rfc3339 {
    /// What `at.to_rfc3339_opts(format, true)` gives.
    pub fn new(at: &DateTime<Utc>, format: SecondsFormat) -> Self {
        let mut text = Rfc3339 { buf: [0; WIDEST], len: 0, other: None };
        let (date, time) = (at.date_naive(), at.time());
        let nanos = time.nanosecond();
        let year = date.year();
        if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
            text.other = Some(at.to_rfc3339_opts(format, true));
            return text;
        }
        text.digits(year as u32, 4);
        text.byte(b'-');
        text.digits(date.month(), 2);
        text.byte(b'-');
        text.digits(date.day(), 2);
        text.byte(b'T');
        text.digits(time.hour(), 2);
        text.byte(b':');
        text.digits(time.minute(), 2);
        text.byte(b':');
        text.digits(time.second(), 2);
        let width = match format {
            SecondsFormat::Secs => 0,
            SecondsFormat::Millis => 3,
            SecondsFormat::Micros => 6,
            SecondsFormat::Nanos => 9,
            _ if nanos == 0 => 0,
            _ if nanos % 1_000_000 == 0 => 3,
            _ if nanos % 1_000 == 0 => 6,
            _ => 9,
        };
        if width > 0 {
            text.byte(b'.');
            text.digits(nanos / 10u32.pow(9 - width), width);
        }
        text.byte(b'Z');
        text
    }

    pub fn as_str(&self) -> &str {
        match &self.other {
            Some(s) => s,
            // Only ASCII digits and separators were written.
            None => std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default(),
        }
    }

    fn byte(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    /// `n`'s lowest `width` decimal digits, zero-padded.
    fn digits(&mut self, mut n: u32, width: u32) {
        let end = self.len + width as usize;
        for slot in self.buf[self.len..end].iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
        self.len = end;
    }
}

/// What chrono's `Serialize` writes: `to_rfc3339_opts(SecondsFormat::AutoSi, true)`.
pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(Rfc3339::new(at, SecondsFormat::AutoSi).as_str())
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
    fn given_any_instant_and_format_when_written_then_the_text_is_chronos_own() {
        let formats = [
            SecondsFormat::Secs,
            SecondsFormat::Millis,
            SecondsFormat::Micros,
            SecondsFormat::Nanos,
            SecondsFormat::AutoSi,
        ];
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .map(|n| n.and_utc())
            .unwrap();
        let far =
            [Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(), Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap()];
        for at in instants().into_iter().chain([leap]).chain(far) {
            for format in formats {
                assert_eq!(Rfc3339::new(&at, format).as_str(), at.to_rfc3339_opts(format, true), "{at:?} {format:?}");
            }
        }
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
