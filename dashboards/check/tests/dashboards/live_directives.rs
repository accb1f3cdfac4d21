//! The directive and group part of the live workload (CONTRACT §14 and §15), through the same
//! HTTP and WebSocket API as the rest: an admin-made group `@reviewers` (bob and carol), two
//! directives alice hands bob that he completes at once (one over WebSocket, one over HTTP), one
//! directive to the group that bob claims and leaves open, and a send to the group. Then what
//! the Directives and Groups panels must show for it, and what `/metrics` must have served.
//!
//! Deliberately touches only identities the signal workload already has (so the daemon panels
//! keep their numbers) and leaves every lifecycle signal delivered (so the pending panels do):
//! the delivery counts it adds are returned for `live_workload` to add to its own.

use serde_json::{json, Value};

use dashboards_check::exposition::Exposition;

use crate::live_bus::{LiveBus, Session, ADMIN};
use crate::panels::{find, int, text, Ran};

/// Deliveries this workload adds, all `ws_push`: a `PeerJoined` to bob when carol joins, a
/// `DirectiveRequested` and a `DirectiveCompleted` for each of the two completed directives, two
/// `DirectiveRequested` and a `DirectiveStarted` for the group one, and the group send's two.
pub const DELIVERIES: i64 = 1 + 2 * 2 + 3 + 2;

/// The deadline of the directive left open.
const OPEN_DEADLINE_SECONDS: i64 = 3600;

/// Runs the workload; alice, bob and carol are connected (`*_ws`) and available.
pub async fn run(bus: &LiveBus, (alice, bob): (&str, &str), ws: [&mut Session; 3]) {
    let [alice_ws, bob_ws, carol_ws] = ws;
    let (s, v) = bus.call("PUT", ADMIN, "/v1/groups/reviewers", Some(json!({"tenant": "default"}))).await;
    assert_eq!(s, 201, "{v}");
    for member in ["bob", "carol"] {
        let path = format!("/v1/groups/reviewers/members/{member}?tenant=default");
        let (s, v) = bus.call("PUT", ADMIN, &path, None).await;
        assert_eq!(s, 200, "{v}");
    }
    // The group announces: bob learns that carol joined.
    let joined = bob_ws.signal_of("PeerJoined").await;
    assert_eq!(joined["payload"], json!({"group": "@reviewers", "identity": "carol"}), "{joined}");
    bob_ws.ack(&[&joined["id"]]).await;

    // Two directives bob completes as soon as he is handed them.
    for (n, directive_type) in ["package.install", "db.migrate"].into_iter().enumerate() {
        let id = create(bus, alice, "bob", directive_type, &format!("done-{n}"), None).await;
        let requested = bob_ws.signal_of("DirectiveRequested").await;
        assert_eq!(requested["correlation_id"], id, "{requested}");
        let done = if n == 0 {
            let r = bob_ws
                .request(json!({"op": "directive", "action": "complete", "directive_id": id, "result": {"ok": true}}))
                .await;
            assert_eq!(r["ok"], true, "{r}");
            r["result"].clone()
        } else {
            let path = format!("/v1/directives/{}/complete", id.as_str().expect("id"));
            let (s, v) = bus.call("POST", bob, &path, Some(json!({"result": {"ok": true}}))).await;
            assert_eq!(s, 200, "{v}");
            v
        };
        assert_eq!(done["status"], "completed", "{done}");
        bob_ws.ack(&[&requested["id"]]).await;
        let completed = alice_ws.signal_of("DirectiveCompleted").await;
        assert_eq!(completed["correlation_id"], id, "{completed}");
        alice_ws.ack(&[&completed["id"]]).await;
    }

    // One to the group: both members are handed it, bob claims it and it stays open.
    let id = create(bus, alice, "@reviewers", "package.install", "open", Some(OPEN_DEADLINE_SECONDS)).await;
    let for_bob = bob_ws.signal_of("DirectiveRequested").await;
    let for_carol = carol_ws.signal_of("DirectiveRequested").await;
    assert_eq!((&for_bob["correlation_id"], &for_carol["correlation_id"]), (&id, &id));
    let r = bob_ws.request(json!({"op": "directive", "action": "start", "directive_id": id})).await;
    assert_eq!((&r["result"]["status"], &r["result"]["claimed_by"]), (&json!("started"), &json!("bob")), "{r}");
    bob_ws.ack(&[&for_bob["id"]]).await;
    carol_ws.ack(&[&for_carol["id"]]).await;
    let started = alice_ws.signal_of("DirectiveStarted").await;
    assert_eq!(started["correlation_id"], id, "completing from requested sends no DirectiveStarted: {started}");
    alice_ws.ack(&[&started["id"]]).await;

    // A send to the group: one signal per member, one fan-out.
    let (s, v) = bus.send(alice, json!({"to": "@reviewers", "type": "StatusUpdate"})).await;
    assert_eq!(s, 200, "{v}");
    let results = v["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.iter().map(|r| r["to"].clone()).collect::<Vec<_>>(), [json!("bob"), json!("carol")], "{v}");
    for (ws, r) in [(bob_ws, &results[0]), (carol_ws, &results[1])] {
        let got = ws.signal_of("StatusUpdate").await;
        assert_eq!(got["id"], r["signal_id"], "{v}");
        ws.ack(&[&got["id"]]).await;
    }
}

async fn create(
    bus: &LiveBus,
    issuer: &str,
    to: &str,
    directive_type: &str,
    key: &str,
    deadline: Option<i64>,
) -> Value {
    let mut body = json!({"to": to, "type": directive_type, "params": {"n": key}, "idempotency_key": key});
    if let Some(d) = deadline {
        body["deadline_seconds"] = json!(d);
    }
    let (s, v) = bus.call("POST", issuer, "/v1/directives", Some(body)).await;
    assert_eq!((s, &v["status"]), (201, &json!("requested")), "{v}");
    v["directive_id"].clone()
}

/// What the Directives and Groups panels show after the workload.
pub fn check_panels(ran: &[Ran]) {
    let by_status: Vec<(String, i64)> =
        find(ran, "open directives by status").rows.iter().map(|row| (text(row, "status"), int(row, "open"))).collect();
    assert_eq!(by_status, [("requested".to_string(), 0), ("started".to_string(), 1)]);
    let open = find(ran, "open directives: claimer and deadline countdown");
    assert_eq!(open.rows.len(), 1, "only the group directive is open");
    let row = &open.rows[0];
    let claimed: Option<String> = sqlx::Row::get(row, "claimed_by");
    assert_eq!(
        (text(row, "assignee"), text(row, "status"), claimed, text(row, "directive_type")),
        ("@reviewers".into(), "started".into(), Some("bob".into()), "package.install".into())
    );
    let left = int(row, "deadline_in_seconds");
    assert!(left > OPEN_DEADLINE_SECONDS - 120 && left <= OPEN_DEADLINE_SECONDS, "countdown {left}");

    let groups = find(ran, "groups and members' presence");
    assert_eq!(groups.rows.len(), 1);
    let g = &groups.rows[0];
    assert_eq!(
        (text(g, "group_name"), int(g, "members"), int(g, "available"), text(g, "presence")),
        ("@reviewers".into(), 2, 2, "bob: available, carol: available".into())
    );
}

/// The label values the workload made `/metrics` serve, which the panels group by.
pub fn check_scrape(exposed: &Exposition) {
    let has = |name: &str, label: &str, value: &str| exposed.has_value(name, label, value);
    for t in ["package.install", "db.migrate"] {
        assert!(has("signalbus_directives_created_total", "directive_type", t), "created {t}");
        assert!(has("signalbus_directives_finished_total", "directive_type", t), "finished {t}");
        assert!(has("signalbus_directive_duration_seconds_bucket", "directive_type", t), "duration {t}");
    }
    assert!(has("signalbus_directives_finished_total", "outcome", "completed"));
    assert!(has("signalbus_fanouts_total", "signal_type", "StatusUpdate"));
}
