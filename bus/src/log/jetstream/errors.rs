//! Reading JetStream's answers: which client errors mean "nobody answered", "the
//! compare-and-set failed (and against which sequence)", or an API refusal with its code.
//!
//! Deliberately decides nothing: callers choose what an error means for their operation.

use async_nats::jetstream;

use crate::error::Error;

/// JetStream API errors that mean "the subject's last sequence was not the expected one".
pub(super) const WRONG_LAST_SEQUENCE: [u64; 2] = [10071, 10164];

pub(super) fn unavailable(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("{what}: {e}"))
}

/// Whether a read failed only because nobody answered for the consumer yet (status 503).
pub(super) fn no_responders(message: &str) -> bool {
    message.contains("503") || message.to_lowercase().contains("no responders")
}

/// The sequence of the newest event on the subject as reported in a wrong-last-sequence error
/// ("wrong last sequence: 7 (code 400, error code 10071)"), if the server said.
pub(super) fn found_seq(message: &str) -> Option<u64> {
    let rest = &message[message.find("sequence:")? + "sequence:".len()..];
    let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The JetStream API error behind a client error, if the server answered with one.
pub(super) fn api_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a jetstream::Error> {
    std::error::Error::source(e).and_then(|s| s.downcast_ref::<jetstream::Error>())
}

/// The numeric JetStream error code (`ErrorCode` keeps its number private but serializes it).
pub(super) fn error_code(e: &jetstream::Error) -> Option<u64> {
    serde_json::to_value(e.error_code()).ok()?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::found_seq;

    #[test]
    fn found_sequence_is_parsed_from_the_error() {
        assert_eq!(found_seq("wrong last sequence: 7"), Some(7));
        assert_eq!(found_seq("wrong last sequence: 12 (code 400, error code 10071)"), Some(12));
        assert_eq!(found_seq("something else"), None);
    }
}
