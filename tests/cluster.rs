//! The supported production shape, black-box: a 3-node JetStream cluster (current nats-server)
//! with the stream at `--replicas 3`, two gateways, two projectors and two sweepers on one
//! PostgreSQL, under steady send load through both gateways to a live WebSocket recipient. The
//! faults: kill -9 of the stream's leader node and its restart (`LEADER_KILLS` times in a row),
//! then of a follower and its restart, then kill -9 of the leading projector and of the leading
//! sweeper.
//!
//! What must hold: every send answered 200 counts on the stream and is delivered or pending,
//! every 503 never counts, `delivered: true` is on the stream and reached the recipient, no
//! signal has two terminal outcomes, the standby projector and sweeper take over, and the read
//! models equal a rebuild from the stream. Times to recover are measured and printed (per gateway
//! for a leader kill), never asserted: `bench failover` prints their distribution over more kills.
//!
//! Deliberately uses only the binary, HTTP, WebSocket, the stream and the database, as an
//! operator's deployment would; the faults are real signals to real processes.

mod roles;

#[path = "cluster/audit.rs"]
mod audit;
#[path = "cluster/load.rs"]
mod load;

use std::time::{Duration, Instant};

use bus::signal::Status;
use roles::*;
use serde_json::json;
use testkit::{NatsCluster, NatsVersion};

/// Generous bounds on a takeover, to fail a broken one rather than to time a working one (the
/// measured times are printed).
const TAKEOVER_WITHIN: Duration = Duration::from_secs(20);

/// Stream leader kills in a row, each followed by the node's restart and 2 s of steady load:
/// about 8 s each on a 2-core machine (the cluster's election takes 4–9 s; docs/deploy.md,
/// "Failover times").
const LEADER_KILLS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_deployment_keeps_every_answer_through_node_and_role_kills() {
    let started = Instant::now();
    let mut nats = NatsCluster::start(NatsVersion::Current, 3).await;
    let db = testkit::TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let services = ["--nats-url", &urls, "--database-url", db.url(), "--replicas", "3"];
    let with_node = |node: &'static str| [&services[..], &["--node", node]].concat();

    // The first gateway creates the stream; the other roles then find it as they need it.
    let mut gw_a = spawn("gateway", &with_node("gw-a"), dir.path());
    wait_ready(&mut gw_a).await;
    let mut gw_b = spawn("gateway", &with_node("gw-b"), dir.path());
    let mut projectors = [spawn("projector", &services, dir.path()), spawn("projector", &services, dir.path())];
    let mut sweepers = [spawn("sweeper", &services, dir.path()), spawn("sweeper", &services, dir.path())];
    for p in [&mut gw_b].into_iter().chain(projectors.iter_mut()).chain(sweepers.iter_mut()) {
        wait_ready(p).await;
    }
    let alice = register(&gw_a.base, "alice").await;
    let carol = register(&gw_b.base, "carol").await;
    let bob = register(&gw_a.base, "bob").await;
    let dave = register(&gw_a.base, "dave").await;
    let leader = nats.stream_leader("SIGNALBUS", Duration::from_secs(30)).await;
    eprintln!("cluster up, roles ready in {:?}; stream leader {}", started.elapsed(), nats.name_of(leader));

    // Bob listens on gateway b and acks everything; alice sends through a, carol through b.
    let inbox = load::Inbox::listen(&gw_b.ws_url(&bob)).await;
    let seen =
        eventually(Duration::from_secs(10), || async { state_of(&gw_a.base, &alice, "bob").await == "available" })
            .await;
    assert!(seen.is_some(), "gateway a never saw bob's session");
    let load = load::Load::start(vec![(gw_a.base.clone(), alice.clone()), (gw_b.base.clone(), carol)]);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Directives to dave, which dave completes and alice cancels at once while the leader dies.
    let mut directives = Vec::new();
    for i in 0..10 {
        let body =
            json!({"to": "dave", "type": "job.run", "params": {"i": i}, "idempotency_key": format!("cluster-{i}")});
        let (status, d) = post(&gw_a.base, &alice, "/v1/directives", body).await;
        assert_eq!(status, 201, "{d}");
        directives.push(d["directive_id"].as_str().unwrap().to_string());
    }
    let racing: Vec<_> = directives
        .iter()
        .map(|id| {
            let (a, b, alice, dave, id) =
                (gw_a.base.clone(), gw_b.base.clone(), alice.clone(), dave.clone(), id.clone());
            tokio::spawn(async move {
                let (done_path, cancel_path) =
                    (format!("/v1/directives/{id}/complete"), format!("/v1/directives/{id}/cancel"));
                let complete = until_answered(&b, &dave, &done_path, json!({"result": {}}));
                let cancel = until_answered(&a, &alice, &cancel_path, json!({}));
                let (c, x) = tokio::join!(complete, cancel);
                assert!(c == 200 || x == 200, "{id}: one of complete and cancel wins ({c}, {x})");
            })
        })
        .collect();

    // 1. kill -9 the stream's leader node, then restart it; `LEADER_KILLS` times.
    let mut worst = Vec::new();
    for round in 1..=LEADER_KILLS {
        let leader = nats.stream_leader("SIGNALBUS", Duration::from_secs(30)).await;
        let (killed_at, wall) = (load.now(), std::time::SystemTime::now());
        nats.node(leader).kill().await;
        let new_leader = nats.stream_leader("SIGNALBUS", TAKEOVER_WITHIN).await;
        assert_ne!(new_leader, leader);
        let recovered = load.recovered_per_sender(killed_at, TAKEOVER_WITHIN).await;
        eprintln!(
            "leader kill {round}: {} elected {:?} after it; sends accepted again {:?} (gateway a) and {:?} \
             (gateway b) after the kill ({} answered 503 meanwhile)",
            nats.name_of(new_leader),
            nats.elected_after(new_leader, "SIGNALBUS", wall),
            recovered[0],
            recovered[1],
            load.refused_since(killed_at)
        );
        worst.push(recovered.into_iter().max().unwrap_or_default());
        nats.node(leader).restart().await;
        let back = Instant::now();
        nats.wait_stream_current("SIGNALBUS", Duration::from_secs(30)).await;
        eprintln!("restarted node {} current again in {:?}", nats.name_of(leader), back.elapsed());
        // Steady load again before the next fault.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    eprintln!("leader kills: every gateway accepted sends again {worst:?} after each kill");

    // 2. kill -9 a follower, then restart it.
    let leader = nats.stream_leader("SIGNALBUS", Duration::from_secs(30)).await;
    let follower = (leader + 1) % nats.len();
    let killed_at = load.now();
    nats.node(follower).kill().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let recovered = load.recovered_per_sender(killed_at, TAKEOVER_WITHIN).await;
    eprintln!(
        "follower kill: sends accepted {:?} (gateway a) and {:?} (gateway b) after it ({} answered 503)",
        recovered[0],
        recovered[1],
        load.refused_since(killed_at)
    );
    nats.node(follower).restart().await;
    nats.wait_stream_current("SIGNALBUS", Duration::from_secs(30)).await;

    // 3. kill -9 the projector that leads; the standby takes over and catches up.
    let models = projector::ReadModels::postgres(db.url()).await.unwrap();
    let lead = leader_of(&projectors, "signalbus_projector_leader").await;
    let killed = Instant::now();
    projectors[lead].signal("KILL");
    let standby = 1 - lead;
    let took_over = eventually(TAKEOVER_WITHIN, || async {
        metric(&projectors[standby].base, "signalbus_projector_leader").await == Some(1.0)
    })
    .await;
    assert!(took_over.is_some(), "the standby projector never took the lease");
    let target = load::stream_last_seq(&urls).await;
    let caught_up =
        eventually(TAKEOVER_WITHIN, || async { models.checkpoint().await.is_ok_and(|c| c >= target) }).await;
    assert!(caught_up.is_some(), "the standby projector never caught up with sequence {target}");
    eprintln!(
        "projector kill: standby leads after {took_over:?}, caught up with the stream {:?} after the kill",
        killed.elapsed()
    );

    // 4. kill -9 the sweeper that leads; a short-lived signal still expires, through the standby.
    let lead = leader_of(&sweepers, "signalbus_sweeper_leader").await;
    let killed = Instant::now();
    sweepers[lead].signal("KILL");
    let body = json!({"to": "dave", "type": "StatusUpdate", "ttl_seconds": 1});
    let (status, sent) = post(&gw_a.base, &alice, "/v1/signals", body).await;
    assert_eq!(status, 200, "{sent}");
    let id = sent["signal_id"].as_str().unwrap().to_string();
    let expired = eventually(Duration::from_secs(30), || async {
        get(&gw_a.base, &alice, &format!("/v1/signals/{id}")).await.1["expired_at"].is_string()
    })
    .await;
    assert!(expired.is_some(), "a 1 s signal never expired after the leading sweeper was killed");
    eprintln!("sweeper kill: a 1 s signal sent right after it expired {:?} after the kill", killed.elapsed());

    // The verdict: the answers against the stream and the recipient.
    let answers = load.stop().await;
    let audit = audit::Audit::read(&urls, 3).await;
    let on_stream = audit.by_correlation();
    let received = inbox.received(&answers, Duration::from_secs(15)).await;
    let (mut accepted, mut refused) = (0, 0);
    for a in &answers {
        match a.status {
            200 => {
                accepted += 1;
                let life = on_stream
                    .get(a.corr.as_str())
                    .unwrap_or_else(|| panic!("{} answered 200, not on the stream", a.corr));
                assert!(matches!(life.state, Some(Status::Pending | Status::Delivered { .. })), "{}: {life:?}", a.corr);
                if a.body["delivered"] == true {
                    assert!(life.terminals.contains(&"delivered"), "{} answered delivered: {life:?}", a.corr);
                    assert!(received.contains(&a.corr), "{} answered delivered, never reached bob", a.corr);
                }
            }
            503 => {
                refused += 1;
                assert_eq!(a.body["error"]["code"], "unavailable", "{}", a.body);
                assert!(!on_stream.contains_key(a.corr.as_str()), "{} answered 503 but counts on the stream", a.corr);
            }
            other => panic!("{}: unexpected answer {other} {}", a.corr, a.body),
        }
    }
    let violations = audit.violations();
    assert!(violations.is_empty(), "signals with two terminal outcomes: {violations:?}");
    for r in racing {
        r.await.unwrap();
    }
    for id in &directives {
        let ends = audit.directive_ends(id);
        assert_eq!(ends, 1, "directive {id}: exactly one terminal event on the stream");
    }
    eprintln!(
        "{accepted} sends accepted, {refused} refused, {} received by bob; {} signals on the stream, 0 double outcomes",
        received.len(),
        audit.signals.len()
    );
    assert!(accepted > answers.len() / 2, "most sends are accepted: {accepted} of {}", answers.len());

    // Quiesce (every session's close recorded), then the read models must equal a rebuild.
    drop(inbox);
    for p in [&mut gw_a, &mut gw_b].into_iter().chain(sweepers.iter_mut()) {
        stop(p).await;
    }
    let last = load::stream_last_seq(&urls).await;
    let applied =
        eventually(Duration::from_secs(15), || async { models.checkpoint().await.is_ok_and(|c| c >= last) }).await;
    assert!(applied.is_some(), "the projector never applied the stream's last sequence {last}");
    for p in projectors.iter_mut() {
        stop(p).await;
    }
    let live = models.snapshot().await.unwrap();
    let log: bus::log::SharedLog = std::sync::Arc::new(
        bus::log::jetstream::JetStreamLog::connect(
            &urls,
            bus::log::jetstream::JetStreamConfig { replicas: 3, ..Default::default() },
        )
        .await
        .unwrap(),
    );
    projector::rebuild(&log, &models).await.unwrap();
    assert!(live == models.snapshot().await.unwrap(), "the live read models differ from a rebuild of the stream");
    eprintln!("read models equal a rebuild; whole test {:?}", started.elapsed());
}

/// POSTs until the bus answers something other than 503/500 (the stream was failing over); the
/// status of that answer.
async fn until_answered(base: &str, token: &str, path: &str, body: serde_json::Value) -> u16 {
    for _ in 0..120 {
        let (status, _) = post(base, token, path, body.clone()).await;
        if status != 503 && status != 500 {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{path} was never answered through the fail-over")
}

/// Which of two processes reports `gauge 1` on `/metrics` (the lease holder).
async fn leader_of(procs: &[Proc; 2], gauge: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for (i, p) in procs.iter().enumerate() {
            if metric(&p.base, gauge).await == Some(1.0) {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no process reports {gauge} 1");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of an unlabelled series on a process's `/metrics`.
async fn metric(base: &str, name: &str) -> Option<f64> {
    let text = http().get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// SIGTERM and wait for a clean exit; a process killed earlier is left as it is.
async fn stop(p: &mut Proc) {
    if p.child.try_wait().is_ok_and(|s| s.is_some()) {
        return;
    }
    p.signal("TERM");
    let status = p.exited_within(Duration::from_secs(10)).await.expect("a role did not stop within 10 s of SIGTERM");
    assert!(status.success(), "{} exited with {status}", p.base);
}
