//! Ids and names in paths: every malformed one answers 400 with the JSON error body, and an id
//! has one spelling — hyphenated, in any case — so the braced, `urn:uuid:` and hyphen-less
//! spellings of a real signal's id name nothing.
//!
//! Deliberately about path parameters only: bodies and frames have their own suites.

use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Value};

use crate::support::{Bus, ADMIN};

/// One call: (status, whether the body is JSON, body).
async fn call(bus: &Bus, method: &str, path: &str, token: &str) -> (u16, bool, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let resp = bus.http.request(method, format!("{}{path}", bus.base)).bearer_auth(token).send().await.unwrap();
    let status = resp.status().as_u16();
    let json = resp.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, json, body)
}

/// The spellings of `id` that are not its canonical form, plus text that is no id at all.
fn misspellings(id: &str) -> Vec<String> {
    vec![
        "%FF".to_string(),
        format!("%7B{id}%7D"),
        format!("{{{id}}}"),
        format!("urn:uuid:{id}"),
        id.replace('-', ""),
        "nope".to_string(),
    ]
}

#[tokio::test]
async fn a_malformed_or_non_canonical_id_in_a_path_is_400_json_and_uppercase_is_the_same_id() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let (s, sent) = bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{sent}");
    let sig = sent["signal_id"].as_str().unwrap().to_string();
    let (s, opened) = bus.call("POST", Some(&bob), "/v1/sessions", None).await;
    assert_eq!(s, 200, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_string();

    for bad in misspellings(&sig) {
        for (method, path, token) in
            [("GET", format!("/v1/signals/{bad}"), &bob), ("POST", format!("/v1/signals/{bad}/recall"), &alice)]
        {
            let (status, json, body) = call(&bus, method, &path, token).await;
            assert_eq!((status, json), (400, true), "{method} {path}: {body}");
            assert_eq!(body["error"]["code"], "invalid_request", "{method} {path}: {body}");
            assert!(body["error"]["message"].is_string(), "{body}");
        }
    }
    for bad in misspellings(&sid) {
        let path = format!("/v1/sessions/{bad}");
        let (status, json, body) = call(&bus, "DELETE", &path, &bob).await;
        assert_eq!((status, json), (400, true), "DELETE {path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    }

    // The canonical spelling in upper case is the same id.
    let (status, _, row) = call(&bus, "GET", &format!("/v1/signals/{}", sig.to_uppercase()), &bob).await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["id"], sig.as_str(), "{row}");
    let (status, _, body) = call(&bus, "POST", &format!("/v1/signals/{}/recall", sig.to_uppercase()), &alice).await;
    assert_eq!(status, 200, "{body}");
    assert!(["recalled", "already_delivered"].contains(&body["outcome"].as_str().unwrap()), "{body}");
    let (status, _, body) = call(&bus, "DELETE", &format!("/v1/sessions/{}", sid.to_uppercase()), &bob).await;
    assert_eq!((status, &body["closed"]), (200, &json!(true)), "{body}");
}

#[tokio::test]
async fn a_malformed_name_in_a_path_is_400_json() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    for (method, path, token) in [
        ("POST", "/v1/agents/%FF/token", ADMIN),
        ("DELETE", "/v1/agents/no%20spaces", ADMIN),
        ("POST", "/v1/agents/%7Balice%7D/token", ADMIN),
        ("GET", "/v1/plugins/%FF/state", alice.as_str()),
        ("GET", "/v1/plugins/alice%2F%2Fx/facts", alice.as_str()),
        ("GET", "/v1/plugins/no%20spaces/state", alice.as_str()),
    ] {
        let (status, json, body) = call(&bus, method, path, token).await;
        assert_eq!((status, json), (400, true), "{method} {path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request", "{method} {path}: {body}");
    }
}
