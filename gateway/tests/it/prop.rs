//! The frame decoder and pure dispatcher never panic: at least 100,000 random and mutated
//! frames, each answered with a well-formed frame or turned into a runnable operation.

use gateway::ws::frames::{step, Step};
use proptest::prelude::*;
use serde_json::Value;

const SEEDS: &[&str] = &[
    r#"{"op":"send","to":"bob","type":"Blocker","payload":{"a":[1,2,{"b":null}]},"ttl_seconds":60,"ref":"r1"}"#,
    r#"{"op":"ack","signal_ids":["6a0f7f2e-3c1b-4a57-9f5e-0d2b1c3a4e5f"]}"#,
    r#"{"op":"recall","signal_id":"6a0f7f2e-3c1b-4a57-9f5e-0d2b1c3a4e5f","ref":"x"}"#,
    r#"{"op":"fact","plugin":"alice/w","fact_type":"t","state":{"k":"v"}}"#,
    r#"{"op":"ping"}"#,
];

fn check(text: &str) {
    match step(text) {
        Step::Reply(r) => {
            let v: Value = serde_json::from_str(&r).expect("replies are JSON");
            assert!(v["op"] == "pong" || (v["op"] == "result" && v["ok"] == false), "{r}");
        }
        Step::Run(_) => {}
    }
}

fn mutate(seed: &str, edits: &[(usize, u8, u8)]) -> String {
    let mut bytes = seed.as_bytes().to_vec();
    for &(pos, kind, b) in edits {
        if bytes.is_empty() {
            bytes.push(b);
            continue;
        }
        let i = pos % bytes.len();
        match kind % 4 {
            0 => bytes[i] = b,
            1 => bytes.insert(i, b),
            2 => {
                bytes.remove(i);
            }
            _ => bytes.truncate(i),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 50_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_frames_never_panic(text in "\\PC{0,200}") {
        check(&text);
    }

    #[test]
    fn mutated_frames_never_panic(seed in 0..SEEDS.len(), edits in prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..8)) {
        check(&mutate(SEEDS[seed], &edits));
    }
}

#[test]
fn structured_frames_of_every_shape_never_panic() {
    let values = [
        "null",
        "1",
        "-1",
        "1e400",
        "\"s\"",
        "[]",
        "{}",
        "true",
        "[\"x\"]",
        "{\"a\":1}",
        "\"6a0f7f2e-3c1b-4a57-9f5e-0d2b1c3a4e5f\"",
        "18446744073709551616",
    ];
    let keys = ["op", "ref", "to", "type", "payload", "ttl_seconds", "signal_id", "signal_ids", "from", "state"];
    let ops = ["\"send\"", "\"ack\"", "\"recall\"", "\"fact\"", "\"ping\"", "\"x\"", "1"];
    for op in ops {
        for k in keys {
            for v in values {
                check(&format!("{{\"op\":{op},\"{k}\":{v}}}"));
                check(&format!("{{\"op\":{op},\"to\":\"b\",\"type\":\"T\",\"{k}\":{v}}}"));
            }
        }
    }
}
