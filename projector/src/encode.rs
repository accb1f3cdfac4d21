//! The projector's encoding of text and JSON, total over whatever is on the stream: U+0000 (which
//! PostgreSQL's `text` and `jsonb` cannot hold) becomes U+FFFD, the replacement character, in
//! every text column and in every JSON string and key. Both backends store the same result, so
//! the two modes and a rebuild agree.
//!
//! Since the edge refuses NUL (`bus::nul`), this only ever changes events written before that,
//! or by another program. Deliberately never judges anything else about a value: what cannot be
//! stored at all is the dead-letter path's business (`batch.rs`, `bisect.rs`).

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// The replacement character, and its JSON escape.
const REPLACEMENT: char = '\u{FFFD}';
const REPLACEMENT_ESCAPE: &str = "\\ufffd";

/// `s` with every U+0000 replaced by U+FFFD.
pub(crate) fn text(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{FFFD}")
    } else {
        s.to_string()
    }
}

/// JSON text with every NUL inside a string or key — escaped (`\u0000`) or raw — replaced by
/// `\ufffd`. Borrowed (no copy) in the common case of no NUL at all. Everything else is copied
/// byte for byte, so numbers, key order and spacing are what the writer wrote.
pub(crate) fn json_text(s: &str) -> Cow<'_, str> {
    if !s.contains('\0') && !s.contains("\\u0000") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut in_string = false;
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '\0' if in_string => out.push_str(REPLACEMENT_ESCAPE),
            // Invalid JSON either way; replaced so no NUL survives even there.
            '\0' => out.push(REPLACEMENT),
            '"' => {
                in_string = !in_string;
                out.push('"');
            }
            // An escape is copied whole, so an escaped backslash never starts another one.
            '\\' if in_string => {
                if let Some(after) = rest.strip_prefix("u0000") {
                    out.push_str(REPLACEMENT_ESCAPE);
                    rest = after;
                } else if let Some(next) = rest.chars().next() {
                    rest = &rest[next.len_utf8()..];
                    out.push('\\');
                    out.push(if next == '\0' { REPLACEMENT } else { next });
                } else {
                    out.push('\\');
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `s` is one JSON value that both backends can store and read back: the same parse
/// `serde_json` does when a row is read (escapes decoded, surrogates paired, depth bounded),
/// without building the value.
pub(crate) fn check_json(s: &str) -> Result<(), serde_json::Error> {
    serde_json::from_str::<Checked>(s).map(|_| ())
}

/// A JSON value visited in full and then dropped. `IgnoredAny` alone would skip over strings
/// without decoding their escapes, passing a lone surrogate PostgreSQL refuses.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_in_text_becomes_the_replacement_character() {
        assert_eq!(text("a\0b\0"), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(text("plain"), "plain");
    }

    #[test]
    fn nul_in_json_strings_and_keys_becomes_an_escaped_replacement_character() {
        let cases = [
            (r#"{"a":"x\u0000y"}"#, r#"{"a":"x\ufffdy"}"#),
            (r#"{"k\u0000":[1,"\u0000"]}"#, r#"{"k\ufffd":[1,"\ufffd"]}"#),
            // An escaped backslash followed by `u0000` is six ordinary characters.
            (r#"{"a":"\\u0000"}"#, r#"{"a":"\\u0000"}"#),
            (r#"{"a":"\\\u0000"}"#, r#"{"a":"\\\ufffd"}"#),
            ("{\"a\":\"raw\0nul\"}", r#"{"a":"raw\ufffdnul"}"#),
            (r#"{"a": 1.50, "b" : "\"\u0000"}"#, r#"{"a": 1.50, "b" : "\"\ufffd"}"#),
        ];
        for (input, expected) in cases {
            assert_eq!(json_text(input), expected, "{input}");
            let back: serde_json::Value = serde_json::from_str(&json_text(input)).unwrap();
            assert!(!has_nul(&back), "{input}");
        }
        assert!(matches!(json_text(r#"{"a":"\u0001"}"#), Cow::Borrowed(_)));
    }

    fn has_nul(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => s.contains('\0'),
            serde_json::Value::Array(items) => items.iter().any(has_nul),
            serde_json::Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
            _ => false,
        }
    }

    #[test]
    fn only_json_both_backends_can_read_back_passes_the_check() {
        assert!(check_json(r#"{"a":[1,2.5,"\ud83d\ude00",null,true,{"b":{}}]}"#).is_ok());
        assert!(check_json(r#""just a string""#).is_ok());
        for bad in [r#"{"a":"#, "not json", r#"{"a":"\ud800"}"#, "{\"a\":\"\u{1}\"}", "1 2", &"[".repeat(200)] {
            assert!(check_json(bad).is_err(), "{bad}");
        }
    }
}
