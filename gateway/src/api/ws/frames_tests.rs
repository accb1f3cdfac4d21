//! Unit tests of `frames.rs`: every answer and message a frame gets, the strict `send` reader
//! against the `Value` path, and the hand-written frames against what serde writes.
//!
//! Deliberately no session or stream: frames in, frames out.

use super::*;

#[test]
fn a_result_frame_is_what_a_value_prints() {
    let result = json!({ "signal_id": "x", "delivered": true, "redacted": ["a.b"], "n": null });
    for reference in [None, Some("r\"1")] {
        let before = json!({ "op": "result", "ref": reference, "ok": true, "result": result }).to_string();
        assert_eq!(result_ok(reference, &result), before);
    }
}

#[test]
fn a_send_result_frame_is_what_result_ok_writes() {
    let sent: bus::event::SignalSent = serde_json::from_value(json!({
        "signal_id": uuid::Uuid::new_v4(), "from": "a", "to": "b", "signal_type": "X", "category": "BLOCKER",
        "priority": 1, "payload": "{}", "delivery_class": "async", "created_at": chrono::Utc::now(),
        "expires_at": chrono::Utc::now(), "recipient_state": "available", "publish_path": "pushed_to_ws",
    }))
    .unwrap();
    let answers = [
        wire::SendAnswer::One(wire::SendResponse::new(&sent, true, false, Some(uuid::Uuid::new_v4()))),
        wire::SendAnswer::Fanout(json!({"fanout_id": "f", "results": [{"to": "x"}]})),
    ];
    for answer in &answers {
        for reference in [None, Some("r\"1")] {
            assert_eq!(send_result(reference, answer), result_ok(reference, answer));
        }
    }
}

fn err_message(text: &str) -> String {
    match step(text) {
        Step::Reply(r) => {
            let v: Value = serde_json::from_str(&r).unwrap();
            assert_eq!(v["ok"], false);
            assert_eq!(v["error"]["code"], "invalid_request");
            v["error"]["message"].as_str().unwrap().to_string()
        }
        Step::Run(f) => panic!("expected an error, got {f:?}"),
    }
}

#[test]
fn bad_frames_get_specific_messages() {
    assert!(err_message("nope").starts_with("frame is not valid JSON"));
    assert_eq!(err_message("[1]"), "frame must be a JSON object");
    assert_eq!(err_message(r#"{"ref":"a"}"#), "op is required");
    assert!(err_message(r#"{"op":"dance"}"#).starts_with("unknown op \"dance\""));
    assert_eq!(err_message(r#"{"op":"ack","signal_ids":["x"]}"#), "signal_ids[0] is not a uuid");
    assert_eq!(err_message(r#"{"op":"ack","signal_ids":[]}"#), "signal_ids must hold 1 to 1000 ids");
    assert_eq!(err_message(r#"{"op":"recall"}"#), "signal_id is required");
    assert!(err_message(r#"{"op":"send","to":"b","type":"X","from":"eve"}"#).starts_with("from is not allowed"));
}

/// Every frame the strict `send` reader takes, it reads as the `Value` path does; every
/// other one it leaves to that path, so the answers and messages are the same either way.
#[test]
fn the_plain_send_reader_agrees_with_the_value_path() {
    let long_ref = "r".repeat(MAX_REF_CHARS + 1);
    let frames = [
        r#"{"op":"send","to":"bob","type":"StatusUpdate","payload":{"z":[1,{"a":null}],"s":"x\ny"}}"#.to_string(),
        r#"{"to":"bob","ref":"r1","type":"X","op":"send","payload":null,"ttl_seconds":60}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","delivery_class":"sync","correlation_id":"c","dedupe_key":null}"#
            .to_string(),
        r#"{"op":"send","to":"b","type":"X","deliver_after_seconds":5,"ref":null}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","ttl_seconds":2801.0}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","ttl_seconds":-1}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","delivery_class":"soon"}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","from":"eve"}"#.to_string(),
        r#"{"op":"send","to":"b","to":"c","type":"X"}"#.to_string(),
        r#"{"op":"send","to":1,"type":"X"}"#.to_string(),
        r#"{"op":"send","type":"X"}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","deliver_at":"2026-11-21T09:30:00Z"}"#.to_string(),
        r#"{"op":"send","to":"b","type":"X","deliver_at":"soon"}"#.to_string(),
        r#"{"op":"s\u0065nd","to":"b","type":"X"}"#.to_string(),
        r#"{"op":"ack","signal_ids":["x"]}"#.to_string(),
        r#"{"op":"ping"}"#.to_string(),
        format!(r#"{{"op":"send","to":"b","type":"X","ref":"{long_ref}"}}"#),
        format!(
            r#"{{"op":"send","to":"b","type":"X","payload":{}}}"#,
            serde_json::to_string(&deep(wire::MAX_JSON_DEPTH + 1)).unwrap()
        ),
        format!(
            r#"{{"op":"send","to":"b","type":"X","payload":{}}}"#,
            serde_json::to_string(&deep(wire::MAX_JSON_DEPTH)).unwrap()
        ),
        "{nope".to_string(),
    ];
    let mut plain = 0;
    for text in &frames {
        let value_path = decode_value(text);
        assert_eq!(decode(text), value_path, "{text}");
        if let Some(frame) = plain_send(text) {
            plain += 1;
            assert_eq!(Ok(frame), value_path, "{text}");
        }
    }
    assert_eq!(plain, 5, "the plain frames above are read without a map");
}

fn deep(levels: usize) -> Value {
    (1..levels).fold(json!({}), |inner, i| if i % 2 == 0 { json!({ "k": inner }) } else { json!([inner]) })
}

#[test]
fn refs_are_echoed_and_pings_answered() {
    match step(r#"{"op":"nope","ref":"r1"}"#) {
        Step::Reply(r) => assert!(r.contains(r#""ref":"r1""#)),
        other => panic!("{other:?}"),
    }
    assert_eq!(step(r#"{"op":"ping"}"#), Step::Reply(r#"{"op":"pong"}"#.to_string()));
    assert_eq!(
        step(r#"{"op":"recall","signal_id":"not-a-uuid","ref":"x"}"#),
        Step::Run(ClientFrame { reference: Some("x".into()), op: Op::Recall(None) })
    );
}
