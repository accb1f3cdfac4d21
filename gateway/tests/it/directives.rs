//! Directives over HTTP and WebSocket (CONTRACT §14): the whole life with its lifecycle signals,
//! who may do what, errors with their shapes, `?wait`, idempotency, and the claim race —
//! 2..10 members starting one group directive at once, exactly one claimer.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN, WAIT};

async fn create(bus: &Bus, token: &str, body: Value) -> (u16, Value) {
    bus.call("POST", Some(token), "/v1/directives", Some(body)).await
}

async fn act(bus: &Bus, token: &str, id: &str, action: &str, body: Value) -> (u16, Value) {
    bus.call("POST", Some(token), &format!("/v1/directives/{id}/{action}"), Some(body)).await
}

async fn inbox_types(bus: &Bus, token: &str) -> Vec<(String, Value)> {
    let (_, v) = bus.call("GET", Some(token), "/v1/inbox", None).await;
    v["signals"].as_array().unwrap().iter().map(|s| (s["type"].as_str().unwrap().to_string(), s.clone())).collect()
}

#[tokio::test]
async fn a_directive_lives_from_request_to_completion_with_its_signals() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let carol = bus.register("carol").await;
    let body = json!({"to": "bob", "type": "package.install", "params": {"name": "jq"}, "idempotency_key": "k1"});
    let (s, d) = create(&bus, &alice, body.clone()).await;
    assert_eq!((s, d["status"].as_str()), (201, Some("requested")), "{d}");
    let id = d["directive_id"].as_str().unwrap().to_string();
    // The same key: the same directive, nothing new; other params: a conflict naming it.
    let (s, again) = create(&bus, &alice, body).await;
    assert_eq!((s, &again["directive_id"]), (200, &json!(id)));
    let other = json!({"to": "bob", "type": "package.install", "params": {"name": "yq"}, "idempotency_key": "k1"});
    let (s, e) = create(&bus, &alice, other).await;
    assert_eq!(
        (s, &e["error"]["code"], &e["error"]["directive_id"]),
        (409, &json!("idempotency_conflict"), &json!(id))
    );

    let requested = inbox_types(&bus, &bob).await;
    assert_eq!(requested.len(), 1, "one request, however often it was created: {requested:?}");
    assert_eq!(requested[0].0, "DirectiveRequested");
    assert_eq!(requested[0].1["correlation_id"], json!(id));
    assert_eq!(requested[0].1["payload"]["params"], json!({"name": "jq"}));

    // Nobody else can see it or act on it; each party only in its column.
    for verb in ["start", "complete", "cancel"] {
        assert_eq!(act(&bus, &carol, &id, verb, json!({})).await.0, 404, "{verb}");
    }
    assert_eq!(bus.call("GET", Some(&carol), &format!("/v1/directives/{id}"), None).await.0, 404);
    assert_eq!(act(&bus, &bob, &id, "cancel", json!({})).await.0, 403);
    assert_eq!(act(&bus, &alice, &id, "complete", json!({"result": {}})).await.0, 403);

    let (s, d) = act(&bus, &bob, &id, "start", json!({})).await;
    assert_eq!((s, &d["status"], &d["claimed_by"]), (200, &json!("started"), &json!("bob")));
    let (s, d) = act(&bus, &bob, &id, "progress", json!({"message": "half", "percent": 40})).await;
    assert_eq!((s, &d["progress"]["percent"]), (200, &json!(40)));
    assert_eq!(act(&bus, &bob, &id, "progress", json!({"percent": 101})).await.0, 400);

    // A waiter is answered when the directive ends, not at its timeout.
    let waiter = {
        let (base, alice) = (bus.base.clone(), alice.clone());
        let path = format!("{base}/v1/directives/{id}?wait=30");
        tokio::spawn(async move {
            let t = Instant::now();
            let v: Value =
                reqwest::Client::new().get(path).bearer_auth(alice).send().await.unwrap().json().await.unwrap();
            (t.elapsed(), v)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (s, d) = act(&bus, &bob, &id, "complete", json!({"result": {"ok": true}})).await;
    assert_eq!((s, &d["status"], &d["result"]), (200, &json!("completed"), &json!({"ok": true})));
    let (waited, seen) = waiter.await.unwrap();
    assert_eq!(seen["status"], "completed");
    assert!(waited < Duration::from_secs(20), "the waiter was answered at its timeout: {waited:?}");

    let (s, e) = act(&bus, &bob, &id, "complete", json!({"result": {}})).await;
    assert_eq!((s, &e["error"]["code"]), (409, &json!("invalid_transition")));
    assert_eq!(e["error"]["directive"]["status"], "completed", "the error carries the directive");

    let signals = inbox_types(&bus, &alice).await;
    let types: Vec<&str> = signals.iter().map(|(t, _)| t.as_str()).collect();
    assert!(types.contains(&"DirectiveStarted") && types.contains(&"DirectiveCompleted"), "{types:?}");
    let completed = signals.iter().find(|(t, _)| t == "DirectiveCompleted").unwrap();
    assert_eq!((&completed.1["from"], &completed.1["payload"]["result"]), (&json!("bob"), &json!({"ok": true})));

    let (_, page) = bus.call("GET", Some(&alice), "/v1/directives?role=issued", None).await;
    assert_eq!(page["directives"][0]["directive_id"], json!(id), "{page}");
    let (_, page) = bus.call("GET", Some(&bob), "/v1/directives?role=assigned&status=open", None).await;
    assert_eq!(page["directives"], json!([]), "{page}");
    let (s, _) = bus.call("GET", Some(&bob), "/v1/directives?role=everyone", None).await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn bad_directive_input_gets_specific_errors_and_records_nothing() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    bus.register("bob").await;
    let seq = bus.log.last_seq().await.unwrap();
    let big = "x".repeat(70 * 1024);
    for (body, status, words) in [
        (
            json!({"to": "bob", "type": "a.b", "idempotency_key": "k", "params": [1]}),
            400,
            "params must be a JSON object",
        ),
        (json!({"to": "bob", "type": "a b", "idempotency_key": "k"}), 400, "type"),
        (json!({"to": "bob", "type": "a.b", "idempotency_key": "k", "deadline_seconds": 2_592_001}), 400, "deadline"),
        (json!({"to": "bob", "type": "a.b", "idempotency_key": "k\u{0}"}), 400, "U+0000"),
        (json!({"to": "bob", "type": "a.b", "idempotency_key": "k", "params": {"b": big}}), 413, ""),
        (json!({"to": "dave", "type": "a.b", "idempotency_key": "k"}), 404, "not registered"),
        (json!({"to": "@nobody", "type": "a.b", "idempotency_key": "k"}), 404, "@nobody"),
        (json!({"to": "bob", "type": "a.b", "idempotency_key": "k", "issuer": "eve"}), 400, "issuer"),
    ] {
        let (s, e) = create(&bus, &alice, body.clone()).await;
        assert_eq!(s, status, "{body}: {e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(words), "{body}: {e}");
    }
    assert_eq!(bus.log.last_seq().await.unwrap(), seq, "nothing half-recorded");
    // Each action is a path of its own: another word names no operation.
    let (s, e) = act(&bus, &alice, &uuid::Uuid::new_v4().to_string(), "dance", json!({})).await;
    assert_eq!((s, &e["error"]["code"]), (404, &json!("not_found")));
    assert_eq!(act(&bus, &alice, &uuid::Uuid::new_v4().to_string(), "start", json!({})).await.0, 404);
}

async fn group_of(bus: &Bus, name: &str, members: &[&str]) {
    let (s, v) = bus.call("PUT", Some(ADMIN), &format!("/v1/groups/{name}"), Some(json!({}))).await;
    assert_eq!(s, 201, "{v}");
    for m in members {
        let (s, v) = bus.call("PUT", Some(ADMIN), &format!("/v1/groups/{name}/members/{m}"), None).await;
        assert_eq!(s, 200, "{v}");
    }
}

#[tokio::test]
async fn of_members_starting_one_group_directive_at_once_exactly_one_claims_it() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let mut tokens = Vec::new();
    let names: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    for n in &names {
        tokens.push(bus.register(n).await);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    group_of(&bus, "builders", &refs).await;
    for n in 2..=10usize {
        let body = json!({"to": "@builders", "type": "build.run", "idempotency_key": format!("race-{n}")});
        let (_, d) = create(&bus, &alice, body).await;
        let id = d["directive_id"].as_str().unwrap().to_string();
        let starts = tokens[..n].iter().map(|t| {
            let (bus_base, t, id) = (bus.base.clone(), t.clone(), id.clone());
            tokio::spawn(async move {
                let r = reqwest::Client::new()
                    .post(format!("{bus_base}/v1/directives/{id}/start"))
                    .bearer_auth(t)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                (status, r.json::<Value>().await.unwrap())
            })
        });
        let answers: Vec<(u16, Value)> =
            futures::future::join_all(starts).await.into_iter().map(Result::unwrap).collect();
        let won: Vec<&Value> = answers.iter().filter(|(s, _)| *s == 200).map(|(_, v)| v).collect();
        assert_eq!(won.len(), 1, "{n} members: {answers:?}");
        for (s, v) in answers.iter().filter(|(s, _)| *s != 200) {
            assert_eq!((*s, &v["error"]["code"]), (409, &json!("already_claimed")), "{v}");
            assert_eq!(v["error"]["claimed_by"], won[0]["claimed_by"]);
        }
        let starts = bus
            .log
            .read_subject(&bus.log.subjects().of("default", bus::event::Entity::Directive(id.parse().unwrap())))
            .await
            .unwrap();
        let started = starts.iter().filter(|s| s.event.body.type_name() == "directive.started").count();
        assert_eq!(started, 1, "exactly one directive.started on the stream");
    }
    // The claimer's peers are no longer handed the work: their pending requests were recalled.
    let (_, pending) = bus.call("GET", Some(&tokens[9]), "/v1/inbox", None).await;
    let requested = pending["signals"].as_array().unwrap().iter().filter(|s| s["type"] == "DirectiveRequested").count();
    assert!(
        requested <= 1,
        "m9 was not in the races of 2..9 members, so it holds at most the 10-member one only if it won: {pending}"
    );
}

#[tokio::test]
async fn a_group_directive_declined_by_every_member_is_rejected_and_the_issuer_told() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let m1 = bus.register("m1").await;
    let m2 = bus.register("m2").await;
    group_of(&bus, "pair", &["m1", "m2", "alice"]).await;
    let (_, d) = create(&bus, &alice, json!({"to": "@pair", "type": "t.x", "idempotency_key": "d"})).await;
    let id = d["directive_id"].as_str().unwrap().to_string();
    let (s, d) = act(&bus, &m1, &id, "reject", json!({"reason": "busy"})).await;
    assert_eq!((s, &d["status"], &d["declined_by"]), (200, &json!("requested"), &json!(["m1"])));
    assert_eq!(act(&bus, &m1, &id, "start", json!({})).await.0, 403, "a decliner may not start it");
    let (_, d) = act(&bus, &m2, &id, "reject", json!({})).await;
    assert_eq!(d["status"], "rejected", "{d}");
    let types: Vec<String> = inbox_types(&bus, &alice).await.into_iter().map(|(t, _)| t).collect();
    assert_eq!(types, ["DirectiveRejected"]);
}

#[tokio::test]
async fn the_websocket_op_runs_every_action() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let mut a = bus.connect(&alice).await;
    let mut b = bus.connect(&bob).await;
    let r = a
        .request(json!({"op": "directive", "action": "create", "to": "bob", "type": "t.x", "idempotency_key": "w"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let id = r["result"]["directive_id"].as_str().unwrap().to_string();
    let pushed = b.next_signal(WAIT).await.unwrap();
    assert_eq!((&pushed["type"], &pushed["correlation_id"]), (&json!("DirectiveRequested"), &json!(id)));
    let r = b
        .request(
            json!({"op": "directive", "action": "fail", "directive_id": id, "failure": {"code": "E", "message": "no"}}),
        )
        .await;
    assert_eq!(r["result"]["status"], "failed", "{r}");
    let r = a.request(json!({"op": "directive", "action": "get", "directive_id": id, "wait_seconds": 1})).await;
    assert_eq!(r["result"]["failure"], json!({"code": "E", "message": "no"}));
    let r = a.request(json!({"op": "directive", "action": "cancel", "directive_id": id})).await;
    assert_eq!((&r["ok"], &r["error"]["code"]), (&json!(false), &json!("invalid_transition")));
    let r = a.request(json!({"op": "directive", "action": "get", "directive_id": "nope"})).await;
    assert_eq!(r["error"]["code"], "not_found");
    let r = a.request(json!({"op": "directive"})).await;
    assert_eq!(r["error"]["code"], "invalid_request");
}
