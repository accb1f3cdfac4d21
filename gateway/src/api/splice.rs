//! Adds one member to a JSON-object response body while it streams out: the handler's bytes
//! pass through untouched, except that the object's closing `}` becomes `,"<key>":<value>}`.
//! The piggyback middleware uses it to hand signals out on any answer without holding or
//! re-reading the answer, whatever its size.
//!
//! Deliberately no JSON parsing: a body is checked to open with `{` before anything is
//! committed to it (`open_object`), and is trusted to be the one JSON object a handler
//! serialized. It decides nothing about what to add.

use axum::body::{Body, Bytes};
use futures::{Stream, StreamExt};

type Chunks = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, axum::Error>> + Send>>;

/// A response body whose first non-whitespace byte was read.
pub enum Opened {
    /// It opens a JSON object: `splice` can add to it.
    Object(Peeked),
    /// Anything else (or an empty or failed body): passed on as it was.
    Other(Body),
}

/// A body with the chunks read so far kept aside, to be sent first.
pub struct Peeked {
    head: Vec<Bytes>,
    rest: Chunks,
}

/// Reads `body` up to its first non-whitespace byte (for a handler's JSON, the first chunk).
pub async fn open_object(body: Body) -> Opened {
    let mut rest: Chunks = Box::pin(body.into_data_stream());
    let mut head = Vec::new();
    loop {
        match rest.next().await {
            Some(Ok(chunk)) => {
                let first = chunk.iter().copied().find(|b| !b.is_ascii_whitespace());
                head.push(chunk);
                match first {
                    Some(b'{') => return Opened::Object(Peeked { head, rest }),
                    Some(_) => return Opened::Other(replay(head, rest)),
                    None => continue,
                }
            }
            Some(Err(e)) => {
                let failed = futures::stream::once(async move { Err::<Bytes, _>(e) });
                return Opened::Other(replay(head, Box::pin(failed)));
            }
            None => return Opened::Other(replay(head, rest)),
        }
    }
}

fn replay(head: Vec<Bytes>, rest: Chunks) -> Body {
    Body::from_stream(futures::stream::iter(head.into_iter().map(Ok)).chain(rest))
}

/// `peeked` with `"key":value` added as the object's last member. `value` must be one encoded
/// JSON value; `key` is written as given (a plain ASCII name).
pub fn splice(peeked: Peeked, key: &'static str, value: Vec<u8>) -> Body {
    let chunks = futures::stream::iter(peeked.head.into_iter().map(Ok)).chain(peeked.rest);
    let state = Tail { held: Vec::new(), members: false, opened: false, addition: Some((key, value)) };
    let spliced = futures::stream::unfold((chunks, state), |(mut chunks, mut state)| async move {
        loop {
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    let out = state.pass(&chunk);
                    if !out.is_empty() {
                        return Some((Ok(out), (chunks, state)));
                    }
                }
                Some(Err(e)) => {
                    state.addition = None;
                    return Some((Err(e), (chunks, state)));
                }
                None => {
                    let out = state.finish()?;
                    return Some((Ok(out), (chunks, state)));
                }
            }
        }
    });
    Body::from_stream(spliced)
}

/// What the splice remembers between chunks: the bytes from the last non-whitespace byte seen
/// on (the closing `}` once the body ends), and whether the object has members before it.
struct Tail {
    held: Vec<u8>,
    members: bool,
    opened: bool,
    addition: Option<(&'static str, Vec<u8>)>,
}

impl Tail {
    /// The bytes of `chunk` that can go out now: everything before its last non-whitespace
    /// byte, after what was held from earlier chunks.
    fn pass(&mut self, chunk: &[u8]) -> Bytes {
        let Some(last) = chunk.iter().rposition(|b| !b.is_ascii_whitespace()) else {
            self.held.extend_from_slice(chunk);
            return Bytes::new();
        };
        let mut out = std::mem::take(&mut self.held);
        out.extend_from_slice(&chunk[..last]);
        self.note(&out);
        self.held.extend_from_slice(&chunk[last..]);
        Bytes::from(out)
    }

    /// Tracks whether anything but whitespace follows the opening `{` in what went out.
    fn note(&mut self, out: &[u8]) {
        for &b in out {
            if self.members {
                return;
            }
            if b.is_ascii_whitespace() {
                continue;
            }
            if self.opened {
                self.members = true;
            } else {
                self.opened = true;
            }
        }
    }

    /// The last bytes: the addition and the closing `}`; `None` once they were sent.
    fn finish(&mut self) -> Option<Bytes> {
        let (key, value) = self.addition.take()?;
        let held = std::mem::take(&mut self.held);
        if held.first() != Some(&b'}') || !self.opened {
            // Not the object `open_object` saw: pass it on unchanged rather than corrupt it.
            tracing::error!(key, "response body is not one JSON object; could not add to it");
            return Some(Bytes::from(held));
        }
        let mut out = Vec::with_capacity(value.len() + key.len() + 5);
        if self.members {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(&value);
        out.push(b'}');
        Some(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(chunks: Vec<&'static str>) -> String {
        let stream = futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        let Opened::Object(p) = open_object(Body::from_stream(stream)).await else { return "not an object".into() };
        let body = splice(p, "signals", b"[1,2]".to_vec());
        String::from_utf8(axum::body::to_bytes(body, usize::MAX).await.unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_member_goes_in_before_the_closing_brace_across_chunk_boundaries() {
        assert_eq!(run(vec![r#"{"a":1}"#]).await, r#"{"a":1,"signals":[1,2]}"#);
        assert_eq!(run(vec!["{}"]).await, r#"{"signals":[1,2]}"#);
        assert_eq!(run(vec!["  ", " {", " ", "}", "\n"]).await, r#"   { "signals":[1,2]}"#);
        assert_eq!(run(vec![r#"{"a""#, r#":[1,"#, "2]", "}  ", " "]).await, r#"{"a":[1,2],"signals":[1,2]}"#);
        assert_eq!(run(vec!["[1]"]).await, "not an object");
        assert_eq!(run(vec![]).await, "not an object");
    }

    #[tokio::test]
    async fn a_large_body_streams_through_unchanged() {
        let big = format!(r#"{{"x":"{}"}}"#, "y".repeat(20 * 1024 * 1024));
        let chunks: Vec<Bytes> = big.as_bytes().chunks(64 * 1024).map(Bytes::copy_from_slice).collect();
        let stream = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
        let Opened::Object(p) = open_object(Body::from_stream(stream)).await else { panic!("an object") };
        let out = axum::body::to_bytes(splice(p, "signals", b"[]".to_vec()), usize::MAX).await.unwrap();
        assert_eq!(out.len(), big.len() + r#","signals":[]"#.len());
        assert!(out.ends_with(br#"yyy","signals":[]}"#));
    }
}
