//! The dashboards against a real bus: a workload through the HTTP and WebSocket API (sync and
//! async sends to live, stale and offline recipients, bounces, an unknown recipient, live pushes,
//! a piggyback session, an inbox drain, a startup drain, acks, every recall outcome, an expiry by the sweeper, daemon and interactive
//! sessions opening, going stale and closing; directives and a group send, `live_directives`) fills PostgreSQL through JetStream and the
//! projector; then every PostgreSQL panel query runs against that database, and every PromQL
//! expression is checked against what `/metrics` actually served after the workload.
//!
//! Deliberately exact only where the workload makes the number certain; the hand-written rows
//! of `fixture_rows` pin down what a short live run cannot produce (history, NULL paths, tenants).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use dashboards_check::exposition::{self, Exposition};
use dashboards_check::promql::{self, Kind};
use dashboards_check::scraped;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::Row;

use crate::live_bus::{LiveBus, WAIT};
use crate::live_directives::{self, DELIVERIES};
use crate::panels::{check_shapes, column, find, int, run_all, single, text};
use crate::static_checks::promql_expressions;

/// The bus's `--stale-after`: short, so a silent session is stale within the test and the
/// dashboard's `$stale_after` can be set to the same value, as its description asks.
const STALE_AFTER: Duration = Duration::from_secs(2);

/// Every `delivered_via` of CONTRACT §5, each of which the workload produces once at least.
const VIAS: [&str; 4] = ["inbox", "piggyback", "startup_drain", "ws_push"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_bus_fills_every_panel_and_serves_every_series_the_dashboards_query() {
    let started = Instant::now();
    let bus = LiveBus::start(STALE_AFTER, Duration::from_millis(500)).await;
    println!("bus up after {:?}", started.elapsed());
    let alice = bus.register("alice", "interactive").await;
    let bob = bus.register("bob", "daemon").await;
    let carol = bus.register("carol", "interactive").await;
    bus.register("dave", "interactive").await;
    let erin = bus.register("erin", "daemon").await;
    let frank = bus.register("frank", "daemon").await;
    let hal = bus.register("hal", "shim").await;
    let ivan = bus.register("ivan", "interactive").await;
    let mut bob_ws = bus.connect(&bob, "daemon").await;
    let mut carol_ws = bus.connect(&carol, "interactive").await;
    let mut alice_ws = bus.connect(&alice, "interactive").await;

    // Live pushes: a sync send over HTTP, an async one over WebSocket.
    let (s, blocker) = bus.send(&alice, json!({"to": "bob", "type": "Blocker", "payload": {"n": 1}})).await;
    assert_eq!((s, blocker["publish_path"].as_str()), (200, Some("pushed_to_ws")), "{blocker}");
    assert_eq!(bob_ws.signal().await["id"], blocker["signal_id"]);
    bob_ws.ack(&[&blocker["signal_id"]]).await;
    let r = alice_ws.request(json!({"op": "send", "to": "carol", "type": "StatusUpdate"})).await;
    assert_eq!(r["result"]["publish_path"], "pushed_to_ws", "{r}");
    assert_eq!(carol_ws.signal().await["id"], r["result"]["signal_id"]);

    // Offline: sync bounces, async queues; one queued signal is recalled, one stays pending.
    let (s, v) = bus.send(&alice, json!({"to": "dave", "type": "Question"})).await;
    assert_eq!((s, v["error"]["recipient_state"].as_str()), (409, Some("not_available_offline")), "{v}");
    let (s, v) = bus.send(&alice, json!({"to": "dave", "type": "TaskAssigned"})).await;
    assert_eq!((s, v["publish_path"].as_str()), (200, Some("queued_offline")), "{v}");
    let (_, review) = bus.send(&alice, json!({"to": "dave", "type": "ReviewRequested"})).await;
    let (_, unknown) = bus.send(&alice, json!({"to": "nobody", "type": "StatusUpdate"})).await;
    assert_eq!(unknown["error"]["code"], "unknown_recipient", "{unknown}");

    // Recalls: pending, delivered, never existed.
    for (id, outcome) in [
        (review["signal_id"].as_str().expect("id").to_string(), "recalled"),
        (blocker["signal_id"].as_str().expect("id").to_string(), "already_delivered"),
        ("00000000-0000-4000-8000-000000000000".to_string(), "not_found"),
    ] {
        let (_, v) = bus.recall(&alice, &id).await;
        assert_eq!(v["outcome"], outcome, "{v}");
    }

    // A one-second TTL: the sweeper expires it; recalling it afterwards says so.
    let (_, short) = bus.send(&alice, json!({"to": "dave", "type": "PeerJoined", "ttl_seconds": 1})).await;
    let short_id = short["signal_id"].as_str().expect("id").to_string();
    bus.wait_for_row(&alice, &short_id, "expired_at").await;
    let (_, v) = bus.recall(&alice, &short_id).await;
    assert_eq!(v["outcome"], "already_expired", "{v}");
    println!("expired by the sweeper after {:?}", started.elapsed());

    // HTTP-only recipients: hal's piggyback session gets a sync send on its next call's answer;
    // ivan, with no session at all, drains his inbox.
    let (s, v) = bus.call("POST", &hal, "/v1/sessions", Some(json!({"kind": "shim"}))).await;
    assert_eq!(s, 200, "{v}");
    let hal_session = v["session_id"].as_str().expect("session id").to_string();
    let (_, question) = bus.send(&alice, json!({"to": "hal", "type": "Question"})).await;
    assert_eq!(question["publish_path"], "buffered_for_piggyback", "{question}");
    let (_, v) = bus.call_in(Some(&hal_session), "GET", &hal, "/v1/agents", None).await;
    assert_eq!(v["signals"][0]["id"], question["signal_id"], "{v}");
    let ack = json!({"signal_ids": [question["signal_id"]]});
    let (s, v) = bus.call_in(Some(&hal_session), "POST", &hal, "/v1/inbox/ack", Some(ack)).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = bus.call("DELETE", &hal, &format!("/v1/sessions/{hal_session}"), None).await;
    assert_eq!((s, &v["closed"]), (200, &json!(true)), "{v}");
    let (_, done) = bus.send(&alice, json!({"to": "ivan", "type": "TaskCompleted"})).await;
    let (s, v) = bus.call("GET", &ivan, "/v1/inbox?drain=true", None).await;
    assert_eq!(s, 200, "{v}");
    assert!(v.to_string().contains(done["signal_id"].as_str().expect("id")), "{v}");

    // Directives and groups (CONTRACT §14, §15), among identities already here.
    live_directives::run(&bus, (&alice, &bob), [&mut alice_ws, &mut bob_ws, &mut carol_ws]).await;
    println!("directives and groups done after {:?}", started.elapsed());

    // erin's daemon never reads: stale after STALE_AFTER, closed after twice that. Meanwhile
    // frank's daemon opens to a queued signal (startup drain), acks it and goes away.
    let erin_ws = bus.connect_silent(&erin, "daemon").await;
    let erin_opened = Instant::now();
    let (_, queued) = bus.send(&alice, json!({"to": "frank", "type": "TaskAssigned"})).await;
    let mut frank_ws = bus.connect(&frank, "daemon").await;
    assert_eq!(frank_ws.signal().await["id"], queued["signal_id"]);
    frank_ws.ack(&[&queued["signal_id"]]).await;
    frank_ws.close().await;
    bus.wait_for_state(&alice, "erin", "not_available_stale").await;
    let (s, v) = bus.send(&alice, json!({"to": "erin", "type": "Question"})).await;
    assert_eq!((s, v["error"]["recipient_state"].as_str()), (409, Some("not_available_stale")), "{v}");
    let (s, v) = bus.send(&alice, json!({"to": "erin", "type": "StatusUpdate"})).await;
    assert_eq!((s, v["recipient_state"].as_str()), (200, Some("not_available_stale")), "{v}");
    // Queued as for an offline recipient, yet the gateway pushes it to the stale session that
    // is still open (the frame waits in its socket; unacked, the next session gets it again).
    bus.wait_for_row(&alice, v["signal_id"].as_str().expect("id"), "delivered_at").await;
    alice_ws.close().await;

    bus.settle().await;
    let pool = PgPoolOptions::new().max_connections(2).connect(bus.db.url()).await.expect("connect");
    let ran = run_all(&pool, "'default'", STALE_AFTER.as_secs()).await;
    assert!(erin_opened.elapsed() < STALE_AFTER * 2, "erin's session must still be open (stale) when queried");
    println!("panels queried after {:?}", started.elapsed());
    check_shapes(&ran, "the live workload");

    // The state breakdowns: 6 deliveries (3 pushes, a startup drain, a piggyback, an inbox
    // drain) plus the directive and group workload's pushes, 1 expiry, 1 recall, 1 pending.
    assert_eq!(single(&ran, "available_now", "available_now"), 6 + DELIVERIES);
    assert_eq!(single(&ran, "pending_pickup (transient)", "pending_pickup"), 1);
    assert_eq!(single(&ran, "expired", "expired"), 1);
    assert_eq!(single(&ran, "recalled", "recalled"), 1);
    let flow: BTreeSet<String> = column(&ran, "Signal flow per interval", "metric").into_iter().collect();
    assert_eq!(flow, ["available_now", "expired", "recalled", "sent"].map(String::from).into_iter().collect());

    // The TTL clock: dave's TaskAssigned, a week to go.
    let ttl = find(&ran, "TTL countdown: pending rows");
    assert_eq!(column(&ran, "TTL countdown: pending rows", "to_identity"), ["dave"]);
    assert_eq!(column(&ran, "TTL countdown: pending rows", "publish_path"), ["queued_offline"]);
    let left = ttl.rows[0].try_get::<Option<i64>, _>("expires_in_seconds").expect("countdown");
    assert!(left.is_some_and(|s| s > 6 * 86_400 && s <= 7 * 86_400), "countdown {left:?}");
    assert_eq!(column(&ran, "pending by publish_path", "publish_path"), ["queued_offline"]);
    assert_eq!(column(&ran, "pending by recipient_state at send", "recipient_state"), ["not_available_offline"]);

    // Time to delivery from rows: every delivery path.
    let ttd = find(&ran, "Time to delivery per type and path (rows)");
    let vias: BTreeSet<String> = ttd.rows.iter().map(|row| text(row, "delivered_via")).collect();
    assert_eq!(vias, VIAS.map(String::from).into_iter().collect());
    assert_eq!(ttd.rows.iter().map(|row| int(row, "delivered")).sum::<i64>(), 6 + DELIVERIES);
    let p95: BTreeSet<String> =
        column(&ran, "Time to delivery p95 by delivered_via (rows)", "metric").into_iter().collect();
    assert_eq!(p95, VIAS.map(String::from).into_iter().collect());

    // The daemon cluster: bob attached, erin stale, frank released; carol has no daemon.
    assert_eq!(single(&ran, "daemon sessions", "live"), 1, "bob");
    assert_eq!(single(&ran, "daemon sessions", "stale"), 1, "erin");
    assert_eq!(single(&ran, "daemon sessions", "released"), 1, "frank");
    let attached: Vec<(String, String)> = find(&ran, "daemon attached per identity")
        .rows
        .iter()
        .map(|row| (text(row, "identity"), text(row, "daemon")))
        .collect();
    let expect = [
        ("erin", "stale"),
        ("carol", "daemon-less"),
        ("alice", "offline"),
        ("dave", "offline"),
        ("frank", "offline"),
        ("hal", "offline"),
        ("ivan", "offline"),
        ("bob", "attached"),
    ];
    assert_eq!(attached, expect.map(|(i, s)| (i.to_string(), s.to_string())).to_vec(), "problems sort first");
    let open: BTreeMap<(String, String), (i64, i64)> = find(&ran, "open sessions by kind and surface")
        .rows
        .iter()
        .map(|row| ((text(row, "kind"), text(row, "surface")), (int(row, "live"), int(row, "stale"))))
        .collect();
    let want = [(("daemon", "ws"), (1, 1)), (("interactive", "ws"), (1, 0))];
    assert_eq!(open, want.map(|((k, s), n)| ((k.to_string(), s.to_string()), n)).into());
    assert_eq!(column(&ran, "variable tenant", "tenant"), ["default"]);
    live_directives::check_panels(&ran);

    // A refused token (CONTRACT §17) fills the auth failures panel.
    let (status, _) = bus.call("GET", "sb_not_a_token", "/v1/agents", None).await;
    assert_eq!(status, 401);
    let exposed = scrape_with_every_contract_series(&bus).await;
    check_promql_against_the_scrape(&exposed);
    // The values the workload produced, which the panels' overrides and legends name.
    let has = |name: &str, label: &str, value: &str| exposed.has_value(name, label, value);
    for outcome in ["recalled", "already_delivered", "already_expired", "not_found"] {
        assert!(has("signalbus_signal_recalls_total", "outcome", outcome), "recall outcome {outcome}");
    }
    for state in ["available", "not_available_stale", "not_available_offline"] {
        assert!(has("signalbus_signals_sent_total", "recipient_state", state), "sent to {state}");
    }
    for state in ["not_available_stale", "not_available_offline"] {
        assert!(has("signalbus_signals_bounced_total", "recipient_state", state), "bounced at {state}");
    }
    for via in VIAS {
        assert!(has("signalbus_time_to_delivery_seconds_bucket", "via", via), "delivered via {via}");
        assert!(has("signalbus_signals_delivered_total", "via", via), "delivered via {via}");
    }
    for path in ["pushed_to_ws", "buffered_for_piggyback", "queued_offline"] {
        assert!(has("signalbus_signals_sent_total", "publish_path", path), "sent as {path}");
    }
    assert!(has("signalbus_unknown_recipient_rejections_total", "sender", "alice"));
    assert!(has("signalbus_signals_expired_total", "signal_type", "PeerJoined"));
    // The sweeper's expiry; `forced` and `removed` are registered at zero by the binary
    // (tests/metrics.rs), which this in-process bus does not install.
    assert!(has("signalbus_signals_expired_total", "reason", "ttl"), "expired by the sweeper");
    for (label, value) in [("kind", "daemon"), ("kind", "interactive"), ("kind", "shim"), ("surface", "piggyback")] {
        assert!(has("signalbus_sessions", label, value), "sessions {label}={value}");
    }
    assert!(has("signalbus_disconnects_total", "reason", "client_closed"));
    live_directives::check_scrape(&exposed);

    drop((bob_ws, carol_ws, erin_ws));
    bus.shutdown().await;
    println!("done after {:?}", started.elapsed());
}

/// Scrapes `/metrics` until every contract series is there (the sweeper's first run and the
/// projector's lag report are asynchronous), then checks each against the allow-list: the
/// series the dashboards may use are exactly what the binary's recorder serves, with the same
/// type and exactly the labels the contract lists.
async fn scrape_with_every_contract_series(bus: &LiveBus) -> Exposition {
    let deadline = Instant::now() + WAIT;
    let exposed = loop {
        let e = exposition::parse(&bus.scrape().await).expect("a scrape in the exposition format");
        let missing: Vec<&str> = promql::ALLOWED_SERIES
            .iter()
            .map(|(base, _, _)| *base)
            .filter(|base| !e.types.contains_key(*base))
            .collect();
        if missing.is_empty() {
            break e;
        }
        assert!(Instant::now() < deadline, "/metrics never exposed {missing:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (base, kind, labels) in promql::ALLOWED_SERIES {
        let want_type = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        assert_eq!(exposed.types[*base], want_type, "{base} is exposed as a {}", exposed.types[*base]);
        let names: Vec<String> = match kind {
            Kind::Histogram => ["_bucket", "_sum", "_count"].iter().map(|s| format!("{base}{s}")).collect(),
            _ => vec![base.to_string()],
        };
        for name in names {
            let mut want: BTreeSet<&str> = labels.iter().copied().collect();
            if name.ends_with("_bucket") {
                want.insert("le");
            }
            let got = exposed.labels(&name).unwrap_or_else(|| panic!("{name} is not on /metrics"));
            assert_eq!(got, want, "{name}: labels on /metrics versus the allow-list");
        }
    }
    exposed
}

/// Every PromQL expression of every dashboard references only series, labels and pinned values
/// the scrape served (their syntax is promtool's job, in `static_checks`).
fn check_promql_against_the_scrape(exposed: &Exposition) {
    for (what, expr) in promql_expressions() {
        scraped::check(&expr, exposed).unwrap_or_else(|e| panic!("{what}: {e}\n{expr}"));
    }
}
