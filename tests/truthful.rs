//! CONTRACT §13, black-box: what the bus answers stays true when NATS stops answering, when a
//! gateway is killed with -9, and when a role is stopped with SIGTERM or SIGINT.
//!
//! Deliberately uses only the binary, HTTP, WebSocket and a read of the stream itself: the
//! faults are real (SIGSTOP of nats-server, kill -9 of a bus process).

mod roles;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use bus::event::EventBody;
use bus::log::EventLog;
use roles::*;
use serde_json::{json, Value};

/// Every send that counts on the stream (voided ones do not; alone or gathered), by correlation id.
async fn sent_on_stream(nats_url: &str) -> HashMap<String, uuid::Uuid> {
    let log = bus::log::jetstream::JetStreamLog::connect(nats_url, Default::default()).await.unwrap();
    let events = log.read(1, 1_000_000).await.unwrap();
    events
        .iter()
        .flat_map(|s| s.event.body.sent_signals())
        .filter_map(|sent| Some((sent.correlation_id.clone()?, sent.signal_id)))
        .collect()
}

/// The signals the stream records delivered to `session`.
async fn delivered_to_session(nats_url: &str, session: &str) -> Vec<uuid::Uuid> {
    let log = bus::log::jetstream::JetStreamLog::connect(nats_url, Default::default()).await.unwrap();
    let session: uuid::Uuid = session.parse().unwrap();
    let events = log.read(1, 1_000_000).await.unwrap();
    events
        .iter()
        .flat_map(|s| {
            let delivered = match &s.event.body {
                EventBody::SignalDelivered(d) if d.session_id == Some(session) => Some(d.signal_id),
                _ => None,
            };
            let pushed = s.event.body.sent_signals().filter(|sent| sent.pushed_to == Some(session));
            delivered.into_iter().chain(pushed.map(|sent| sent.signal_id)).collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_answered_503_never_appears_and_every_accepted_one_is_delivered_once() {
    let mut nats = testkit::NatsServer::start().await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let services = ["--nats-url", &nats.url(), "--database-url", db.url()];
    let mut bus = spawn("serve", &services, dir.path());
    wait_ready(&mut bus).await;
    let alice = register(&bus.base, "alice").await;
    let bob = register(&bus.base, "bob").await;

    // Bob listens the whole time and records every signal id he is handed.
    let (mut ws, welcome) = connect(&bus.ws_url(&bob)).await;
    let bob_session = welcome["session_id"].as_str().unwrap().to_string();
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok(frame) = next_frame(&mut ws).await {
            if frame["op"] == "signal" {
                let _ = got_tx.send(frame["signal"]["correlation_id"].as_str().unwrap_or_default().to_string());
            }
        }
    });

    // Sends every 100 ms, before, during and after a 12 s pause of nats-server (longer than
    // an append's acceptance window, so some sends cannot be resolved in time).
    let base = bus.base.clone();
    let alice_token = alice.clone();
    let sender = tokio::spawn(async move {
        let mut answers = Vec::new();
        for n in 0..160 {
            let (base, alice) = (base.clone(), alice.clone());
            answers.push(tokio::spawn(async move {
                let corr = format!("c{n}");
                let body = json!({"to": "bob", "type": "StatusUpdate", "payload": {"n": n}, "correlation_id": corr});
                let (status, body) = post(&base, &alice, "/v1/signals", body).await;
                (corr, status, body)
            }));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut out = Vec::new();
        for a in answers {
            out.push(a.await.unwrap());
        }
        out
    });
    // The same over WebSocket: sends pipelined on one session, results matched by `ref`.
    let (alice_ws, _) = connect(&bus.ws_url(&alice_token)).await;
    let ws_sender = tokio::spawn(async move {
        use futures::SinkExt;
        use tokio_tungstenite::tungstenite::Message;
        let (mut tx, mut rx) = futures::StreamExt::split(alice_ws);
        let writer = tokio::spawn(async move {
            for n in 0..80 {
                let frame = json!({"op": "send", "ref": format!("w{n}"), "to": "bob", "type": "StatusUpdate",
                    "payload": {"n": n}, "correlation_id": format!("w{n}")});
                tx.send(Message::Text(frame.to_string().into())).await.unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tx
        });
        let mut results = Vec::new();
        while results.len() < 80 {
            match tokio::time::timeout(Duration::from_secs(30), futures::StreamExt::next(&mut rx)).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["op"] == "result" {
                        let status = if v["ok"] == true {
                            200
                        } else if v["error"]["code"] == "unavailable" {
                            503
                        } else {
                            0
                        };
                        results.push((v["ref"].as_str().unwrap().to_string(), status, v));
                    }
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("alice's socket ended before every result came: {other:?}"),
            }
        }
        let _ = writer.await;
        results
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    nats.pause();
    tokio::time::sleep(Duration::from_secs(12)).await;
    nats.resume();
    let mut answers = sender.await.unwrap();
    answers.extend(ws_sender.await.unwrap());

    let refused: HashSet<&str> = answers.iter().filter(|a| a.1 == 503).map(|a| a.0.as_str()).collect();
    let accepted: HashSet<&str> = answers.iter().filter(|a| a.1 == 200).map(|a| a.0.as_str()).collect();
    for (corr, status, body) in &answers {
        assert!(*status == 200 || *status == 503, "{corr}: {status} {body}");
        if *status == 503 {
            assert_eq!(body["error"]["code"], "unavailable", "{body}");
        }
    }
    eprintln!("nats paused 12 s: {} sends accepted, {} refused with 503", accepted.len(), refused.len());
    assert!(!refused.is_empty(), "the pause must have refused some sends: {answers:?}");
    assert!(accepted.len() > 150, "most sends are accepted: {}", accepted.len());
    assert!(
        refused.iter().any(|c| c.starts_with('c')) && refused.iter().any(|c| c.starts_with('w')),
        "sends over both HTTP and WebSocket were refused during the pause: {refused:?}"
    );

    // Let everything stored late surface, then compare with what was answered.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stream = sent_on_stream(&nats.url()).await;
    for corr in &refused {
        assert!(!stream.contains_key(*corr), "{corr} was answered 503 but counts on the stream");
    }
    for corr in &accepted {
        assert!(stream.contains_key(*corr), "{corr} was answered 200 but is not on the stream");
    }
    let mut received: HashMap<String, usize> = HashMap::new();
    let all_in = eventually(Duration::from_secs(15), || {
        while let Ok(c) = got_rx.try_recv() {
            *received.entry(c).or_default() += 1;
        }
        let done = accepted.iter().all(|c| received.contains_key(*c));
        async move { done }
    })
    .await;
    let missing: Vec<_> = accepted.iter().filter(|c| !received.contains_key(**c)).collect();
    assert!(all_in.is_some(), "accepted sends never reached bob: {missing:?}");
    for corr in &refused {
        assert!(!received.contains_key(*corr), "{corr} was answered 503 but bob received it");
    }
    let twice: Vec<_> = received.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once to one live session: {twice:?}");

    // Every delivery the stream records for bob's session (which stayed open) reached him.
    let by_id: HashMap<uuid::Uuid, String> = stream.iter().map(|(c, id)| (*id, c.clone())).collect();
    for id in delivered_to_session(&nats.url(), &bob_session).await {
        let corr = by_id.get(&id).expect("a delivery of a signal that counts");
        assert!(received.contains_key(corr), "{corr} is recorded delivered to bob's open session but never reached it");
    }

    // And the read models agree: none of the refused sends is a row.
    let (status, listed) = get(&bus.base, &alice_token, "/v1/signals?role=sent&limit=1000").await;
    assert_eq!(status, 200, "{listed}");
    let rows: Vec<&Value> = listed["signals"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    assert_eq!(rows.len(), accepted.len(), "one row per accepted send: {listed}");
    for row in rows {
        let corr = row["correlation_id"].as_str().unwrap_or_default();
        assert!(!refused.contains(corr), "{corr} was answered 503 but is a row");
    }
    drop(bus);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_with_sigkill_loses_its_sessions_within_15_seconds() {
    let nats = testkit::NatsServer::start().await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let services = ["--nats-url", &nats.url(), "--database-url", db.url()];
    let mut projector = spawn("projector", &services, dir.path());
    let mut gw_a = spawn("gateway", &services, dir.path());
    let mut gw_b = spawn("gateway", &services, dir.path());
    for p in [&mut projector, &mut gw_a, &mut gw_b] {
        wait_ready(p).await;
    }
    let alice = register(&gw_b.base, "alice").await;
    let bob = register(&gw_b.base, "bob").await;
    let (_ws, _) = connect(&gw_a.ws_url(&bob)).await;
    let seen =
        eventually(Duration::from_secs(10), || async { state_of(&gw_b.base, &alice, "bob").await == "available" })
            .await;
    assert!(seen.is_some(), "gateway b never saw bob's session");

    gw_a.signal("KILL");
    let gone = eventually(Duration::from_secs(20), || async {
        state_of(&gw_b.base, &alice, "bob").await == "not_available_offline"
    })
    .await;
    let took = gone.expect("bob's session on the killed gateway was never closed");
    eprintln!("a killed gateway's session was closed by the survivor after {took:?}");
    assert!(took <= Duration::from_secs(15), "closing a dead gateway's sessions took {took:?}");

    // The read model agrees (the projector follows the recorded close).
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let offline = eventually(Duration::from_secs(10), || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT state FROM recipient_state WHERE tenant = 'default' AND identity = 'bob'",
            )
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
            .is_some_and(|s| s == "not_available_offline")
        }
    })
    .await;
    assert!(offline.is_some(), "recipient_state still shows bob's session after the gateway died");

    // A sync send no longer claims a push to nobody.
    let (status, body) = post(&gw_b.base, &alice, "/v1/signals", json!({"to": "bob", "type": "Question"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "recipient_unavailable", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_every_role_in_order_and_restart_resumes() {
    let nats = testkit::NatsServer::start().await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let services = ["--nats-url", &nats.url(), "--database-url", db.url()];
    let mut projector = spawn("projector", &services, dir.path());
    let mut sweeper = spawn("sweeper", &services, dir.path());
    let mut gateway = spawn("gateway", &services, dir.path());
    for p in [&mut projector, &mut sweeper, &mut gateway] {
        wait_ready(p).await;
    }
    let alice = register(&gateway.base, "alice").await;
    let bob = register(&gateway.base, "bob").await;
    let (mut ws, welcome) = connect(&gateway.ws_url(&bob)).await;
    let session_id = welcome["session_id"].as_str().unwrap().to_string();

    gateway.signal("TERM");
    let close = tokio::time::timeout(Duration::from_secs(10), next_frame(&mut ws)).await.expect("no close in time");
    assert_eq!(close, Err(Some(1001)), "the client is told the server is going away");
    let status = gateway.exited_within(Duration::from_secs(10)).await.expect("gateway did not exit within 10 s");
    assert!(status.success(), "gateway exit: {status}");

    // The close reached the stream: the projector records the session released.
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let released = eventually(Duration::from_secs(10), || {
        let pool = pool.clone();
        let id = session_id.clone();
        async move {
            sqlx::query_scalar::<_, bool>(
                "SELECT released_at IS NOT NULL FROM agent_sessions WHERE session_id = $1::uuid",
            )
            .bind(id)
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
        }
    })
    .await;
    assert!(released.is_some(), "agent_sessions.released_at stayed NULL after SIGTERM");

    for (name, p) in [("projector", &mut projector), ("sweeper", &mut sweeper)] {
        p.signal("TERM");
        let status = p.exited_within(Duration::from_secs(10)).await;
        let status = status.unwrap_or_else(|| panic!("{name} did not exit within 10 s of SIGTERM"));
        assert!(status.success(), "{name} exit: {status}");
    }

    // A restarted gateway knows bob is gone and still knows everyone.
    let mut again = spawn("gateway", &services, dir.path());
    wait_ready(&mut again).await;
    assert_eq!(state_of(&again.base, &alice, "bob").await, "not_available_offline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_after_ctrl_c_and_restart_no_session_is_available() {
    let dir = tempfile::tempdir().unwrap();
    let mut bus = spawn("serve", &[], dir.path());
    wait_ready(&mut bus).await;
    let alice = register(&bus.base, "alice").await;
    let bob = register(&bus.base, "bob").await;
    let (mut ws, _) = connect(&bus.ws_url(&bob)).await;
    assert_eq!(state_of(&bus.base, &alice, "bob").await, "available");

    bus.signal("INT");
    let close = tokio::time::timeout(Duration::from_secs(10), next_frame(&mut ws)).await.expect("no close in time");
    assert_eq!(close, Err(Some(1001)));
    let status = bus.exited_within(Duration::from_secs(10)).await.expect("serve did not exit within 10 s");
    assert!(status.success(), "serve exit: {status}");

    let mut bus = spawn_on("serve", &[], dir.path(), port_of(&bus));
    wait_ready(&mut bus).await;
    assert_eq!(state_of(&bus.base, &alice, "bob").await, "not_available_offline");
    let (status, body) = post(&bus.base, &alice, "/v1/signals", json!({"to": "bob", "type": "Question"})).await;
    assert_eq!(status, 409, "{body}");

    // A process killed with -9 leaves its session open on the stream; the next start closes it.
    let (_ws, _) = connect(&bus.ws_url(&bob)).await;
    bus.signal("KILL");
    let _ = bus.exited_within(Duration::from_secs(5)).await;
    let mut bus = spawn_on("serve", &[], dir.path(), port_of(&bus));
    wait_ready(&mut bus).await;
    let closed = eventually(Duration::from_secs(5), || async {
        state_of(&bus.base, &alice, "bob").await == "not_available_offline"
    })
    .await;
    assert!(closed.is_some(), "the killed process's session still looks available after a restart");
}

/// The embedded log answers a send once its commit is in the file (the kernel's cache), and
/// fsyncs within a second by default (`[embedded] sync`): killing the process right after the
/// answers must lose none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_killed_with_sigkill_keeps_every_send_it_answered() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let mut bus = spawn("serve", &[], dir.path());
    wait_ready(&mut bus).await;
    let alice = register(&bus.base, "alice").await;
    let bob = register(&bus.base, "bob").await;
    // Bob is offline: every send is queued, and each answer is the only record of it.
    let sends = (0..200).map(|n| {
        let (base, alice) = (bus.base.clone(), alice.clone());
        async move {
            let body = json!({"to": "bob", "type": "StatusUpdate", "payload": {"n": n}});
            post(&base, &alice, "/v1/signals", body).await
        }
    });
    let answered: Vec<String> = futures::stream::iter(sends)
        .buffer_unordered(16)
        .filter_map(|(status, body)| async move {
            (status == 200).then(|| body["signal_id"].as_str().expect("an accepted send names its id").to_string())
        })
        .collect()
        .await;
    assert_eq!(answered.len(), 200, "every send to an offline agent is queued");
    bus.signal("KILL");
    let _ = bus.exited_within(Duration::from_secs(5)).await;

    let mut bus = spawn_on("serve", &[], dir.path(), port_of(&bus));
    wait_ready(&mut bus).await;
    for id in &answered {
        let found = eventually(Duration::from_secs(10), || async {
            get(&bus.base, &bob, &format!("/v1/signals/{id}")).await.0 == 200
        })
        .await;
        assert!(found.is_some(), "signal {id} was answered before the kill and is gone after it");
    }
}
