//! Compact JSON text of a payload or fact state, without the formatter.
//!
//! `Value`'s `Display` (what `.to_string()` calls) writes through `core::fmt`, one small
//! `write_str` per token; `serde_json::to_writer` writes the same bytes straight into a buffer.
//! On the send path (every payload is stored as text, and measured by it) the formatter showed as
//! ~3 % of the bus's CPU flat out. Deliberately nothing else: no parsing, no pretty printing.

use serde_json::Value;

/// `v` as compact JSON text: byte for byte what `v.to_string()` gives.
pub fn to_text(v: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    serde_json::to_writer(&mut out, v).expect("a Value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_what_display_gives() {
        let values = [
            json!(null),
            json!({"z": 1, "a": ["x\n", {"k": null}], "é": "\u{1F600}\"\\", "n": -1.5e300}),
            json!("plain"),
        ];
        for v in values {
            let shown = v.to_string();
            assert_eq!(to_text(&v), shown);
        }
    }
}
