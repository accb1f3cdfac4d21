//! The wire encoding of events: MessagePack with named fields (rmp-serde), so a field added
//! later with a default decodes old events, and old binaries skip fields they do not know.
//!
//! Decoding takes a fast path first: `Event` flattens its body, and serde's derive for a
//! flattened field buffers the whole map into an intermediate tree before decoding it again —
//! the largest single cost of reading the stream in the throughput profile. `Fast` reads the
//! envelope's fields directly and hands `type` + `data` to the body's own derive, which decodes
//! `data` straight from the bytes once it knows the tag (the order the encoder always writes).
//! Anything the fast path does not take (another field order, a malformed event) is decoded by
//! the derive, so what decodes, and every error message, is exactly as before.
//!
//! Deliberately does not know about subjects or sequences (`log/` does).

use serde::de::{self, DeserializeSeed, IgnoredAny, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::error::{Error, Result};
use crate::event::{Event, EventBody};

pub fn encode(event: &Event) -> Result<Vec<u8>> {
    // Sized for the event up front: a growing buffer reallocated ~5 times per send.
    let mut buf = Vec::with_capacity(ENVELOPE_BYTES + variable_bytes(&event.body));
    rmp_serde::encode::write_named(&mut buf, event).map_err(|e| Error::Encode(e.to_string()))?;
    Ok(buf)
}

/// What an event's fixed fields take encoded, names included, with room to spare: the largest
/// stored test vector (`tests/vectors/v1`, `signal.sent` with short strings) is 504 bytes.
const ENVELOPE_BYTES: usize = 640;

/// The bytes of the body's free-length text, where it has much: a send's payload and names.
fn variable_bytes(body: &EventBody) -> usize {
    match body {
        EventBody::SignalSent(s) => s.payload.len() + s.from.len() + s.to.len() + s.signal_type.len(),
        EventBody::SendsRecorded(r) => r
            .sends
            .iter()
            .map(|s| ENVELOPE_BYTES + s.payload.len() + s.from.len() + s.to.len() + s.signal_type.len())
            .sum(),
        _ => 0,
    }
}

pub fn decode(bytes: &[u8]) -> Result<Event> {
    if let Ok(Fast(event)) = rmp_serde::from_slice::<Fast>(bytes) {
        return Ok(event);
    }
    rmp_serde::from_slice(bytes).map_err(|e| Error::Decode(e.to_string()))
}

/// What a failed `decode` says, without the `Error` wrapper's prefix (for `Error::Undecodable`).
pub fn reason(e: Error) -> String {
    match e {
        Error::Decode(reason) => reason,
        other => other.to_string(),
    }
}

/// An `Event` decoded without the flatten buffer; refuses what it cannot decode directly.
struct Fast(Event);

impl<'de> Deserialize<'de> for Fast {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Fast;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an event map with `type` before `data`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Fast, A::Error> {
        let (mut event_id, mut schema_version, mut tenant, mut occurred_at) = (None, None, None, None);
        let (mut actor, mut correlation_id, mut causation_id, mut accept_by) = (None, None, None, None);
        let mut tag: Option<String> = None;
        let mut body: Option<EventBody> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "event_id" => event_id = Some(map.next_value()?),
                "schema_version" => schema_version = Some(map.next_value()?),
                "tenant" => tenant = Some(map.next_value()?),
                "occurred_at" => occurred_at = Some(map.next_value()?),
                "actor" => actor = map.next_value()?,
                "correlation_id" => correlation_id = map.next_value()?,
                "causation_id" => causation_id = map.next_value()?,
                "accept_by" => accept_by = map.next_value()?,
                "type" if tag.is_none() && body.is_none() => tag = Some(map.next_value()?),
                "data" if body.is_none() => {
                    let Some(t) = tag.as_deref() else { return Err(de::Error::custom("data before type")) };
                    body = Some(EventBody::deserialize(Tagged { tag: t, stage: 0, outer: &mut map })?);
                }
                "type" | "data" => return Err(de::Error::custom("repeated type or data")),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing = |f: &'static str| de::Error::missing_field(f);
        Ok(Fast(Event {
            event_id: event_id.ok_or_else(|| missing("event_id"))?,
            schema_version: schema_version.ok_or_else(|| missing("schema_version"))?,
            tenant: tenant.ok_or_else(|| missing("tenant"))?,
            occurred_at: occurred_at.ok_or_else(|| missing("occurred_at"))?,
            actor,
            correlation_id,
            causation_id,
            accept_by,
            body: body.ok_or_else(|| missing("data"))?,
        }))
    }
}

/// The body as the adjacently tagged derive wants it: a two-entry map, `type` (already read)
/// then `data`, whose value is read straight from the envelope.
struct Tagged<'a, A> {
    tag: &'a str,
    stage: u8,
    outer: &'a mut A,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for Tagged<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Tagged<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> std::result::Result<Option<K::Value>, A::Error> {
        let key = match self.stage {
            0 => "type",
            1 => "data",
            _ => return Ok(None),
        };
        seed.deserialize(IntoDeserializer::<A::Error>::into_deserializer(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> std::result::Result<V::Value, A::Error> {
        self.stage += 1;
        match self.stage {
            1 => seed.deserialize(IntoDeserializer::<A::Error>::into_deserializer(self.tag)),
            _ => self.outer.next_value_seed(seed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{SignalAcked, SignalDelivered};
    use chrono::Utc;
    use uuid::Uuid;

    #[test]
    fn the_fast_path_decodes_what_the_encoder_writes() {
        let id = Uuid::new_v4();
        let bodies = [
            EventBody::SignalAcked(SignalAcked { signal_id: id, by: "bob".into(), session_id: Some(id) }),
            EventBody::SignalDelivered(SignalDelivered {
                signal_id: id,
                to: "bob".into(),
                via: crate::event::DeliveredVia::WsPush,
                session_id: None,
                redelivered: true,
                expires_at: Some(Utc::now()),
            }),
        ];
        for body in bodies {
            let mut event = Event::new("t", Some("bob".into()), Utc::now(), body);
            event.correlation_id = Some("c".into());
            let bytes = encode(&event).unwrap();
            let Fast(fast) = rmp_serde::from_slice::<Fast>(&bytes).expect("fast path");
            assert_eq!(fast, event);
            assert_eq!(rmp_serde::from_slice::<Event>(&bytes).unwrap(), event);
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_derive_on_every_stored_vector() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/v1");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            let Fast(fast) = rmp_serde::from_slice::<Fast>(&bytes).expect("fast path");
            assert_eq!(fast, rmp_serde::from_slice::<Event>(&bytes).unwrap());
            seen += 1;
        }
        assert!(seen >= 12);
    }
}
