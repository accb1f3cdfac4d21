//! Groups and fan-out over HTTP and WebSocket (CONTRACT §15): admin and self-join membership,
//! roster signals, a send to `@name` answered per member, its repeat filling in nothing twice,
//! recall by fan-out, and a removed agent leaving its groups.

use serde_json::{json, Value};

use crate::support::{Bus, ADMIN, WAIT};

async fn put(bus: &Bus, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    bus.call("PUT", Some(token), path, body).await
}

#[tokio::test]
async fn a_send_to_a_group_fans_out_once_per_member_and_a_repeat_sends_nothing_twice() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    let carol = bus.register("carol").await;
    let (s, g) = put(&bus, ADMIN, "/v1/groups/reviewers", Some(json!({"self_join": true}))).await;
    assert_eq!((s, &g["group"]), (201, &json!("@reviewers")));
    assert_eq!(put(&bus, ADMIN, "/v1/groups/reviewers", Some(json!({"self_join": true}))).await.0, 200);
    for who in ["alice", "bob"] {
        assert_eq!(put(&bus, ADMIN, &format!("/v1/groups/reviewers/members/{who}"), None).await.0, 200);
    }
    let mut b = bus.connect(&bob).await;
    let (s, g) = bus.call("POST", Some(&carol), "/v1/groups/reviewers/join", None).await;
    assert_eq!(s, 200, "{g}");
    let joined = b.next_signal(WAIT).await.unwrap();
    assert_eq!((&joined["type"], &joined["from"]), (&json!("PeerJoined"), &json!("signalbus")));
    assert_eq!(joined["payload"], json!({"group": "@reviewers", "identity": "carol"}));

    let body = json!({"to": "@reviewers", "type": "StatusUpdate", "payload": {"n": 1}, "dedupe_key": "f1"});
    let (s, first) = bus.send(&alice, body.clone()).await;
    assert_eq!(s, 200, "{first}");
    let results = first["results"].as_array().unwrap();
    let to: Vec<&str> = results.iter().map(|r| r["to"].as_str().unwrap()).collect();
    assert_eq!(to, ["bob", "carol"], "every member but the sender, sorted");
    assert_eq!(results[0]["delivered"], true, "bob is connected: {first}");
    assert_eq!(results[1]["queued"], true, "carol is not");
    let (_, again) = bus.send(&alice, body).await;
    assert_eq!(again["fanout_id"], first["fanout_id"]);
    for (a, b) in results.iter().zip(again["results"].as_array().unwrap()) {
        assert_eq!(a["signal_id"], b["signal_id"]);
    }
    let got = b.next_signal(WAIT).await.unwrap();
    assert_eq!(got["payload"], json!({"n": 1}));
    assert!(b.next_signal(std::time::Duration::from_millis(300)).await.is_none(), "no second signal to bob");

    let (s, r) =
        bus.call("POST", Some(&alice), "/v1/signals/recall", Some(json!({"fanout_id": first["fanout_id"]}))).await;
    assert_eq!(s, 200, "{r}");
    let mut outcomes: Vec<(String, String)> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["to"].as_str().unwrap().into(), e["outcome"].as_str().unwrap().into()))
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, [("bob".into(), "already_delivered".into()), ("carol".into(), "recalled".into())]);
    // Someone else's fan-out answers as if it did not exist.
    let (_, r) =
        bus.call("POST", Some(&bob), "/v1/signals/recall", Some(json!({"fanout_id": first["fanout_id"]}))).await;
    assert_eq!(r, json!({"results": []}));

    let (s, e) = bus.send(&alice, json!({"to": "@nope", "type": "StatusUpdate"})).await;
    assert_eq!((s, &e["error"]["code"]), (404, &json!("unknown_group")));
    let (s, e) = bus.send(&alice, json!({"to": "@Bad", "type": "StatusUpdate"})).await;
    assert_eq!(s, 400, "{e}");
    // Over the WebSocket, the same fan-out answer.
    let mut a = bus.connect(&alice).await;
    let r = a.request(json!({"op": "send", "to": "@reviewers", "type": "StatusUpdate"})).await;
    assert_eq!(r["result"]["results"].as_array().map(Vec::len), Some(2), "{r}");
}

#[tokio::test]
async fn membership_rules_and_a_removed_agent_leaves_every_group() {
    let bus = Bus::start().await;
    let alice = bus.register("alice").await;
    let bob = bus.register("bob").await;
    assert_eq!(put(&bus, ADMIN, "/v1/groups/closed", Some(json!({}))).await.0, 201);
    assert_eq!(put(&bus, ADMIN, "/v1/groups/open", Some(json!({"self_join": true}))).await.0, 201);
    let (s, e) = bus.call("POST", Some(&alice), "/v1/groups/closed/join", None).await;
    assert_eq!((s, &e["error"]["code"]), (403, &json!("forbidden")));
    assert_eq!(put(&bus, &alice, "/v1/groups/x", Some(json!({}))).await.0, 403, "only the admin creates groups");
    assert_eq!(put(&bus, ADMIN, "/v1/groups/closed/members/dave", None).await.0, 404, "unregistered");
    assert_eq!(put(&bus, ADMIN, "/v1/groups/nope/members/bob", None).await.0, 404);
    assert_eq!(put(&bus, ADMIN, "/v1/groups/Bad!", Some(json!({}))).await.0, 400);
    assert_eq!(put(&bus, ADMIN, "/v1/groups/closed/members/bob", None).await.0, 200);
    assert_eq!(bus.call("POST", Some(&alice), "/v1/groups/open/join", None).await.0, 200);
    assert_eq!(bus.call("POST", Some(&bob), "/v1/groups/open/join", None).await.0, 200);

    let (_, list) = bus.call("GET", Some(&alice), "/v1/groups", None).await;
    let members = |list: &Value, g: &str| -> Value {
        list["groups"].as_array().unwrap().iter().find(|x| x["group"] == g).map(|x| x["members"].clone()).unwrap()
    };
    assert_eq!(members(&list, "@open"), json!(["alice", "bob"]));
    let (_, one) = bus.call("GET", Some(&alice), "/v1/groups/open", None).await;
    assert_eq!(one["members"][0]["recipient_state"], "not_available_offline", "{one}");

    let (s, _) = bus.call("DELETE", Some(ADMIN), "/v1/agents/bob", None).await;
    assert_eq!(s, 200);
    let (_, list) = bus.call("GET", Some(&alice), "/v1/groups", None).await;
    assert_eq!((members(&list, "@open"), members(&list, "@closed")), (json!(["alice"]), json!([])), "{list}");
    let (_, inbox) = bus.call("GET", Some(&alice), "/v1/inbox", None).await;
    let left: Vec<&Value> = inbox["signals"].as_array().unwrap().iter().filter(|s| s["type"] == "PeerLeft").collect();
    assert_eq!(left.len(), 1, "alice hears bob left @open: {inbox}");

    let (s, d) = bus.call("DELETE", Some(ADMIN), "/v1/groups/open", None).await;
    assert_eq!((s, &d["deleted"]), (200, &json!(true)));
    assert_eq!(bus.call("DELETE", Some(ADMIN), "/v1/groups/open", None).await.0, 404);
}
