//! `/openapi.json` against the running server: every answer a scripted tour of the API gets
//! (every endpoint, successes and errors) has its status documented for its operation, and its
//! body validates against the documented schema (JSON Schema 2020-12, `$ref`s resolved in the
//! document itself).

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN};

struct Doc(Value);

impl Doc {
    /// Asserts `status` is documented for `method template` and `body` fits its schema.
    fn check(&self, method: &str, template: &str, status: u16, body: &Value) {
        let escaped = template.replace('~', "~0").replace('/', "~1");
        let op = format!("/paths/{escaped}/{}", method.to_lowercase());
        assert!(self.0.pointer(&op).is_some(), "{method} {template} is not documented");
        let response = format!("{op}/responses/{status}");
        assert!(self.0.pointer(&response).is_some(), "{method} {template} answered undocumented {status}: {body}");
        let schema_ptr = format!("{response}/content/application~1json/schema");
        assert!(self.0.pointer(&schema_ptr).is_some(), "{method} {template} {status} has no JSON schema");
        let mut root = self.0.clone();
        // Inline the operation's schema; its own `$ref`s resolve against the document root.
        root["allOf"] = json!([self.0.pointer(&schema_ptr).unwrap().clone()]);
        let validator = jsonschema::validator_for(&root).expect("the document is a valid schema");
        let errors: Vec<String> = validator.iter_errors(body).map(|e| format!("{e} at {}", e.instance_path)).collect();
        assert!(errors.is_empty(), "{method} {template} {status}: {errors:?}\nbody: {body}");
    }
}

#[tokio::test]
async fn answers_of_every_endpoint_match_the_document() {
    let bus = Bus::start().await;
    let (s, doc) = bus.call("GET", None, "/openapi.json", None).await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    let doc = Doc(doc);
    let c = |m: &'static str, t: &'static str| move |r: (u16, Value)| (m, t, r);
    let mut seen = Vec::new();

    seen.push(c("GET", "/healthz")(bus.call("GET", None, "/healthz", None).await));
    seen.push(c("GET", "/readyz")(bus.call("GET", None, "/readyz", None).await));
    let reg = |id: &str| json!({"identity": id});
    seen.push(c("POST", "/v1/agents")(bus.call("POST", Some(ADMIN), "/v1/agents", Some(reg("alice"))).await));
    let alice = seen.last().unwrap().2 .1["token"].as_str().unwrap().to_string();
    let bob = bus.register("bob").await;
    seen.push(c("POST", "/v1/agents")(bus.call("POST", Some(ADMIN), "/v1/agents", Some(reg("alice"))).await));
    seen.push(c("POST", "/v1/agents")(bus.call("POST", Some(&alice), "/v1/agents", Some(reg("x"))).await));
    seen.push(c("POST", "/v1/agents")(bus.call("POST", None, "/v1/agents", Some(reg("x"))).await));
    seen.push(c("GET", "/v1/agents")(bus.call("GET", Some(&alice), "/v1/agents", None).await));
    seen.push(c("POST", "/v1/agents/{identity}/token")(
        bus.call("POST", Some(ADMIN), "/v1/agents/nobody/token", None).await,
    ));

    let send = |b: Value| b;
    seen.push(c("POST", "/v1/signals")(
        bus.send(&alice, send(json!({"to": "bob", "type": "StatusUpdate", "payload": {"password": "x"}}))).await,
    ));
    let sig = seen.last().unwrap().2 .1["signal_id"].as_str().unwrap().to_string();
    seen.push(c("POST", "/v1/signals")(
        bus.send(&alice, json!({"to": "bob", "type": "StatusUpdate", "deliver_after_seconds": 3600})).await,
    ));
    let scheduled = seen.last().unwrap().2 .1["signal_id"].as_str().unwrap().to_string();
    seen.push(c("GET", "/v1/signals/{id}")(
        bus.call("GET", Some(&alice), &format!("/v1/signals/{scheduled}"), None).await,
    ));
    seen.push(c("POST", "/v1/signals")(
        bus.send(&alice, json!({"to": "bob", "type": "Question", "deliver_after_seconds": 60})).await,
    ));
    seen.push(c("POST", "/v1/signals")(bus.send(&alice, json!({"to": "bob", "type": "Blocker"})).await));
    seen.push(c("POST", "/v1/signals")(bus.send(&alice, json!({"to": "nobody", "type": "X"})).await));
    seen.push(c("POST", "/v1/signals")(bus.send(&alice, json!({"to": "bob", "type": "X", "from": "eve"})).await));
    let big = "x".repeat(70 * 1024);
    seen.push(c("POST", "/v1/signals")(
        bus.send(&alice, json!({"to": "bob", "type": "X", "payload": {"b": big}})).await,
    ));
    seen.push(c("GET", "/v1/signals/{id}")(bus.call("GET", Some(&bob), &format!("/v1/signals/{sig}"), None).await));
    seen.push(c("GET", "/v1/signals/{id}")(bus.call("GET", Some(&bob), "/v1/signals/nope", None).await));
    seen.push(c("GET", "/v1/signals")(bus.call("GET", Some(&alice), "/v1/signals?limit=1", None).await));
    seen.push(c("GET", "/v1/signals")(bus.call("GET", Some(&alice), "/v1/signals?role=x", None).await));
    seen.push(c("GET", "/v1/inbox")(bus.call("GET", Some(&bob), "/v1/inbox", None).await));

    seen.push(c("POST", "/v1/sessions")(bus.call("POST", Some(&bob), "/v1/sessions", None).await));
    let sid = seen.last().unwrap().2 .1["session_id"].as_str().unwrap().to_string();
    let with_session = bus
        .http
        .get(format!("{}/v1/agents", bus.base))
        .bearer_auth(&bob)
        .header("X-Signalbus-Session", &sid)
        .send()
        .await
        .unwrap();
    let piggy = (with_session.status().as_u16(), with_session.json::<Value>().await.unwrap());
    assert_eq!(piggy.1["signals"].as_array().map(Vec::len), Some(1), "{}", piggy.1);
    // A piggyback answer is its operation's body plus `signals` of PushedSignal.
    seen.push(c("GET", "/v1/agents")(piggy.clone()));
    let mut list = doc.0.clone();
    list["$ref"] = json!("#/components/schemas/PushedSignal");
    let v = jsonschema::validator_for(&list).unwrap();
    assert!(v.is_valid(&piggy.1["signals"][0]), "{}", piggy.1);
    seen.push(c("POST", "/v1/inbox/ack")(
        bus.call("POST", Some(&bob), "/v1/inbox/ack", Some(json!({"signal_ids": [sig]}))).await,
    ));
    seen.push(c("POST", "/v1/inbox/ack")(
        bus.call("POST", Some(&bob), "/v1/inbox/ack", Some(json!({"signal_ids": []}))).await,
    ));
    seen.push(c("DELETE", "/v1/sessions/{id}")(
        bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await,
    ));
    seen.push(c("DELETE", "/v1/sessions/{id}")(
        bus.call("DELETE", Some(&bob), &format!("/v1/sessions/{sid}"), None).await,
    ));

    seen.push(c("POST", "/v1/signals/{id}/recall")(bus.recall(&alice, &sig).await));
    seen.push(c("POST", "/v1/signals/{id}/recall")(bus.recall(&alice, "nope").await));
    seen.push(c("POST", "/v1/plugins/{plugin}/facts")(
        bus.call(
            "POST",
            Some(&alice),
            "/v1/plugins/alice%2Fw/facts",
            Some(json!({"fact_type": "t", "state": {"a": 1}})),
        )
        .await,
    ));
    seen.push(c("POST", "/v1/plugins/{plugin}/facts")(
        bus.call("POST", Some(&alice), "/v1/plugins/bob/facts", Some(json!({"fact_type": "t", "state": {}}))).await,
    ));
    seen.push(c("GET", "/v1/plugins/{plugin}/state")(
        bus.call("GET", Some(&alice), "/v1/plugins/alice%2Fw/state", None).await,
    ));
    seen.push(c("GET", "/v1/plugins/{plugin}/state")(
        bus.call("GET", Some(&alice), "/v1/plugins/none/state", None).await,
    ));
    seen.push(c("GET", "/v1/plugins/{plugin}/facts")(
        bus.call("GET", Some(&alice), "/v1/plugins/alice%2Fw/facts", None).await,
    ));
    let expire = |b: Value, token: &'static str| {
        let bus = &bus;
        async move {
            c("POST", "/v1/admin/signals/expire")(
                bus.call("POST", Some(token), "/v1/admin/signals/expire", Some(b)).await,
            )
        }
    };
    let forced = bus.send(&alice, json!({"to": "bob", "type": "TaskAssigned"})).await.1["signal_id"].clone();
    let by_id = json!({"tenant": "default", "signal_ids": [forced]});
    let listed = crate::support::eventually(crate::support::WAIT, || async {
        bus.call(
            "POST",
            Some(ADMIN),
            "/v1/admin/signals/expire",
            Some(json!({"tenant": "default", "signal_ids": [forced], "dry_run": true})),
        )
        .await
        .1["count"]
            == 1
    })
    .await;
    assert!(listed, "the send reached the read models");
    seen.push(expire(json!({"tenant": "default", "signal_ids": [forced], "dry_run": true}), ADMIN).await);
    seen.push(expire(by_id.clone(), ADMIN).await);
    seen.push(expire(json!({"tenant": "default"}), ADMIN).await);
    let path = format!("/v1/signals/{}", forced.as_str().unwrap());
    let stamped = crate::support::eventually(crate::support::WAIT, || async {
        bus.call("GET", Some(&alice), &path, None).await.1["expired_reason"] == "forced"
    })
    .await;
    assert!(stamped, "the row says why it expired");
    seen.push(c("GET", "/v1/signals/{id}")(bus.call("GET", Some(&alice), &path, None).await));
    seen.push(c("POST", "/v1/admin/rebuild")(bus.call("POST", Some(ADMIN), "/v1/admin/rebuild", None).await));
    seen.push(c("GET", "/v1/admin/doctor")(bus.call("GET", Some(&alice), "/v1/admin/doctor", None).await));
    seen.push(c("GET", "/v1/ws")(bus.call("GET", Some(&alice), "/v1/ws", None).await));
    seen.push(c("GET", "/v1/ws")(bus.call("GET", None, "/v1/ws", None).await));

    let statuses: std::collections::BTreeSet<u16> = seen.iter().map(|(_, _, (s, _))| *s).collect();
    assert!(statuses.is_superset(&[200, 400, 401, 403, 404, 409, 413, 503].into()), "{statuses:?}");
    for (m, t, (status, body)) in &seen {
        doc.check(m, t, *status, body);
    }
}
