//! SQLite's storage forms of the two kinds every row holds several of — a timestamp as
//! fixed-width UTC text (`2026-11-30T01:02:03.000004Z`) and a UUID as hyphenated lower-case
//! text — written straight into a buffer.
//!
//! Why not `format!`: chrono parses its format string again for every value, and a batch of the
//! embedded projector writes tens of thousands of them; that parsing was a third of the
//! projector thread's time. Deliberately no other kinds and no parsing (`args.rs` parses).

use chrono::{DateTime, Datelike, Timelike, Utc};
use uuid::Uuid;

/// chrono's spelling of the same text, for the years the fixed width cannot hold and for leap
/// seconds (chrono's `:60`).
const TS_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

/// Appends `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds, truncated), so text order is time
/// order.
pub(crate) fn write_ts(out: &mut Vec<u8>, t: &DateTime<Utc>) {
    let year = t.year();
    if !(0..=9999).contains(&year) || t.nanosecond() >= 1_000_000_000 {
        use std::io::Write as _;
        _ = write!(out, "{}", t.format(TS_FORMAT)); // writing to a Vec cannot fail
        return;
    }
    let micros = t.nanosecond() / 1_000;
    let mut buf = *b"0000-00-00T00:00:00.000000Z";
    digits(&mut buf[0..4], year as u32);
    digits(&mut buf[5..7], t.month());
    digits(&mut buf[8..10], t.day());
    digits(&mut buf[11..13], t.hour());
    digits(&mut buf[14..16], t.minute());
    digits(&mut buf[17..19], t.second());
    digits(&mut buf[20..26], micros);
    out.extend_from_slice(&buf);
}

/// `write_ts` as a `String`.
pub(crate) fn ts(t: &DateTime<Utc>) -> String {
    let mut out = Vec::with_capacity(27);
    write_ts(&mut out, t);
    String::from_utf8(out).expect("timestamps are ASCII")
}

/// Appends `u` hyphenated, lower case.
pub(crate) fn write_uuid(out: &mut Vec<u8>, u: &Uuid) {
    let mut buf = Uuid::encode_buffer();
    out.extend_from_slice(u.hyphenated().encode_lower(&mut buf).as_bytes());
}

/// Writes `n` into `slot` as decimal digits, zero-padded to the slot's width.
fn digits(slot: &mut [u8], mut n: u32) {
    for d in slot.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn chrono_text(t: &DateTime<Utc>) -> String {
        t.format(TS_FORMAT).to_string()
    }

    #[test]
    fn timestamps_are_written_as_chrono_formats_them() {
        let instants = [
            Utc.with_ymd_and_hms(2026, 11, 30, 1, 2, 3).unwrap() + chrono::Duration::nanoseconds(4_567),
            Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap() + chrono::Duration::nanoseconds(999_999_999),
            Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-1, 6, 15, 12, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap(),
        ];
        for t in instants.iter().chain(&[Utc::now()]) {
            assert_eq!(ts(t), chrono_text(t), "{t:?}");
        }
        let mut t = Utc.with_ymd_and_hms(2001, 2, 28, 22, 58, 59).unwrap();
        for _ in 0..10_000 {
            t += chrono::Duration::microseconds(7_919_333_177);
            assert_eq!(ts(&t), chrono_text(&t), "{t:?}");
        }
    }

    #[test]
    fn uuids_are_written_as_display_writes_them() {
        for u in [Uuid::nil(), Uuid::max(), Uuid::new_v4(), Uuid::now_v7()] {
            let mut out = Vec::new();
            write_uuid(&mut out, &u);
            assert_eq!(String::from_utf8(out).unwrap(), u.to_string());
        }
    }
}
