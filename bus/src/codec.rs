//! The wire encoding of events: MessagePack with named fields (rmp-serde), so a field added
//! later with a default decodes old events, and old binaries skip fields they do not know.
//!
//! Deliberately does not know about subjects or sequences (`log/` does).

use crate::error::{Error, Result};
use crate::event::Event;

pub fn encode(event: &Event) -> Result<Vec<u8>> {
    rmp_serde::to_vec_named(event).map_err(|e| Error::Encode(e.to_string()))
}

pub fn decode(bytes: &[u8]) -> Result<Event> {
    rmp_serde::from_slice(bytes).map_err(|e| Error::Decode(e.to_string()))
}
