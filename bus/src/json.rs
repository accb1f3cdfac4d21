//! Compact JSON text of a payload or fact state, and its length, without the formatter.
//!
//! `Value`'s `Display` (what `.to_string()` calls) writes through `core::fmt`, one small
//! `write_str` per token; `serde_json::to_writer` writes the same bytes straight into a buffer.
//! On the send path (every payload is measured and then stored as text) the formatter showed as
//! ~3 % of the bus's CPU flat out. Deliberately nothing else: no parsing, no pretty printing.

use std::io;

use serde_json::Value;

/// `v` as compact JSON text: byte for byte what `v.to_string()` gives.
pub fn to_text(v: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    serde_json::to_writer(&mut out, v).expect("a Value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The length of `v`'s compact JSON text, counted without building it.
pub fn encoded_len(v: &Value) -> usize {
    let mut count = Count(0);
    serde_json::to_writer(&mut count, v).expect("a Value always serializes");
    count.0
}

struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_and_length_are_what_display_gives() {
        let values = [
            json!(null),
            json!({"z": 1, "a": ["x\n", {"k": null}], "é": "\u{1F600}\"\\", "n": -1.5e300}),
            json!("plain"),
        ];
        for v in values {
            let shown = v.to_string();
            assert_eq!(to_text(&v), shown);
            assert_eq!(encoded_len(&v), shown.len());
        }
    }
}
