//! Scenarios S28 and S29 of clients/SCENARIOS.md: a directive to an agent (create, idempotency,
//! the lifecycle signals, who may do what), and `run_directive` with `on_directive` (every way a
//! directive ends; the lifecycle signals consumed, not handed on) — each against its own real
//! `signalbus serve`. A directive to a group (S30) is in `groups.rs`.
//!
//! Deliberately through the public API only, as a caller would: signals are read with
//! `receive` / `inbox`, the directive with `get_directive`.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use signalbus_client::{
    Client, Directive, DirectiveQuery, DirectiveRequest, DirectiveStatus, Error, Failure, ListQuery, Progress, Signal,
    HANDLER_ERROR_CODE,
};
use support::{eventually, Bus};

const WAIT: Duration = Duration::from_secs(15);

fn directive_of(sig: &Signal) -> Directive {
    serde_json::from_value(sig.payload.clone()).expect("a lifecycle signal's payload is the directive")
}

/// The next signal `client` receives, acked, checked to be `signal_type` about `directive_id`
/// from `from`.
async fn lifecycle(client: &Client, signal_type: &str, directive_id: &str, from: &str) -> Directive {
    let sig = client.receive(WAIT).await.unwrap_or_else(|e| panic!("no {signal_type}: {e}"));
    client.ack([&sig]).await.unwrap();
    assert_eq!(
        (sig.signal_type.as_str(), sig.correlation_id.as_deref(), sig.from.as_str()),
        (signal_type, Some(directive_id), from),
        "{sig:?}"
    );
    let d = directive_of(&sig);
    assert_eq!(d.directive_id, directive_id);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s28_directive_to_an_agent() {
    let bus = Bus::start_new().await;
    let (at, bt, ct) = (bus.token("alice").await, bus.token("bob").await, bus.token("carol").await);
    let (alice, bob) = (bus.connected(&at).await, bus.connected(&bt).await);
    let carol = Client::new(&bus.url, &ct).unwrap();
    let req = DirectiveRequest::new("bob", "package.install").params(json!({"name": "jq"})).idempotency_key("jq-1");
    let d = alice.create_directive(req.clone()).await.unwrap();
    assert_eq!(
        (d.status, d.created, d.issuer.as_str(), d.assignee.as_str(), d.claimed_by.as_deref()),
        (DirectiveStatus::Requested, true, "alice", "bob", None)
    );
    assert_eq!((d.params.clone(), d.idempotency_key.as_str()), (json!({"name": "jq"}), "jq-1"));
    let id = d.directive_id.clone();
    let again = alice.create_directive(req.clone()).await.unwrap();
    assert_eq!((again.directive_id.as_str(), again.created), (id.as_str(), false));
    match alice.create_directive(req.clone().params(json!({"name": "yq"}))).await {
        Err(Error::IdempotencyConflict { directive_id, error }) => {
            assert_eq!((directive_id.as_str(), error.status), (id.as_str(), Some(409)))
        }
        other => panic!("expected IdempotencyConflict, got {other:?}"),
    }
    let secret = DirectiveRequest::new("bob", "package.remove").params(json!({"db": {"password": "hunter2"}}));
    let generated = alice.create_directive(secret).await.unwrap();
    assert!(generated.idempotency_key.starts_with("sbd-"), "{}", generated.idempotency_key);
    assert_eq!(generated.redacted, vec!["params.db.password"]);
    assert_eq!(generated.params, json!({"db": {"password": "[REDACTED]"}}));

    let requested = lifecycle(&bob, "DirectiveRequested", &id, "alice").await;
    assert_eq!((requested.status, requested.issuer.as_str()), (DirectiveStatus::Requested, "alice"));
    let (a, waited_id) = (alice.clone(), id.clone());
    let waiting = tokio::spawn(async move { a.get_directive(&waited_id, Some(Duration::from_secs(30))).await });
    let started = bob.start_directive(&id).await.unwrap();
    assert_eq!((started.status, started.claimed_by.as_deref()), (DirectiveStatus::Started, Some("bob")));
    let progressed = bob.progress_directive(&id, Some("downloading"), Some(40)).await.unwrap();
    let p = progressed.progress.expect("progress recorded");
    assert_eq!((p.message.as_deref(), p.percent), (Some("downloading"), Some(40)));
    let done = bob.complete_directive(&id, json!({"ok": true})).await.unwrap();
    assert_eq!((done.status, done.result.clone()), (DirectiveStatus::Completed, Some(json!({"ok": true}))));

    let waited = tokio::time::timeout(WAIT, waiting).await.expect("the wait answers at the end").unwrap().unwrap();
    assert_eq!(waited.status, DirectiveStatus::Completed);
    let s = lifecycle(&alice, "DirectiveStarted", &id, "bob").await;
    assert_eq!((s.status, s.claimed_by.as_deref()), (DirectiveStatus::Started, Some("bob")));
    let c = lifecycle(&alice, "DirectiveCompleted", &id, "bob").await;
    assert_eq!(c.result, Some(json!({"ok": true})));
    let got = alice.get_directive(&id, Some(Duration::from_secs(5))).await.unwrap(); // ended: at once
    assert_eq!((got.status, got.progress.and_then(|p| p.percent)), (DirectiveStatus::Completed, Some(40)));
    let issued = DirectiveQuery { role: Some("issued".into()), ..Default::default() };
    let page = alice.list_directives(&issued).await.unwrap();
    let newest: Vec<&str> = page.directives.iter().map(|d| d.directive_id.as_str()).collect();
    assert_eq!(newest, vec![generated.directive_id.as_str(), id.as_str()]);
    let first = alice.list_directives(&DirectiveQuery { limit: Some(1), ..issued.clone() }).await.unwrap();
    assert_eq!(first.directives[0].directive_id, generated.directive_id);
    let before = first.next_before.clone();
    assert!(before.is_some(), "{first:?}");
    let rest = alice.list_directives(&DirectiveQuery { limit: Some(1), before, ..issued.clone() }).await.unwrap();
    assert_eq!(rest.directives.iter().map(|d| d.directive_id.as_str()).collect::<Vec<_>>(), vec![id.as_str()]);
    let assigned =
        DirectiveQuery { role: Some("assigned".into()), status: Some("completed".into()), ..Default::default() };
    let mine: Vec<String> =
        bob.list_directives(&assigned).await.unwrap().directives.into_iter().map(|d| d.directive_id).collect();
    assert_eq!(mine, vec![id.clone()]);

    assert!(matches!(bob.cancel_directive(&id, None).await, Err(Error::Forbidden { .. })));
    assert!(matches!(alice.complete_directive(&id, json!({})).await, Err(Error::Forbidden { .. })));
    match bob.complete_directive(&id, json!({"ok": false})).await {
        Err(e @ Error::InvalidTransition { .. }) => {
            assert_eq!(e.directive().map(|d| d.status), Some(DirectiveStatus::Completed));
            assert_eq!(e.status(), Some(409));
        }
        other => panic!("expected InvalidTransition, got {other:?}"),
    }
    assert!(matches!(carol.get_directive(&id, None).await, Err(Error::NotFound(_))));
    assert!(matches!(carol.start_directive(&id).await, Err(Error::NotFound(_))));
    match alice.create_directive(DirectiveRequest::new("@nope", "package.install")).await {
        Err(e @ Error::UnknownGroup(_)) => assert_eq!(e.status(), Some(404)),
        other => panic!("expected UnknownGroup, got {other:?}"),
    }
    assert!(matches!(
        alice.create_directive(DirectiveRequest::new("nobody", "package.install")).await,
        Err(Error::UnknownRecipient(_))
    ));
    alice.close().await;
    bob.close().await;
}

/// What bob's worker saw: each run's directive id and the progress its report recorded.
#[derive(Default)]
struct Seen {
    runs: Mutex<Vec<String>>,
    progress: Mutex<Vec<(String, Option<u8>)>>,
    ended_while_running: Mutex<Vec<String>>,
}

async fn handler(d: Directive, p: Progress, seen: Arc<Seen>) -> Result<Value, signalbus_client::HandlerError> {
    seen.runs.lock().unwrap().push(d.directive_id.clone());
    match d.params["mode"].as_str() {
        Some("nothing") => Ok(Value::Null),
        Some("fail") => Err(Failure::new("InstallError", format!("no package {}", d.params["name"])).into()),
        Some("oops") => Err("the disk is full".into()),
        Some("hang") => loop {
            // Until the issuer cancels: the report is then refused.
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Err(e) = p.report(Some("waiting"), None).await {
                seen.ended_while_running.lock().unwrap().push(d.directive_id.clone());
                return Err(e.into());
            }
        },
        _ => {
            let after = p.report(Some("installing"), Some(50)).await?;
            seen.progress.lock().unwrap().push((after.directive_id, after.progress.and_then(|p| p.percent)));
            Ok(json!(format!("installed {}", d.params["name"].as_str().unwrap_or("?"))))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s29_run_directive_and_on_directive() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    bus.token("carol").await; // registered, never connected: no worker
    let seen = Arc::new(Seen::default());
    let bob = Client::builder(&bus.url, &bt).max_concurrent_handlers(4).build().unwrap();
    let s = seen.clone();
    bob.on_directive("package.*", move |d, p| handler(d, p, s.clone())).unwrap();
    bob.connect().await.unwrap();
    let alice = bus.connected(&at).await;

    let result = alice.run_directive("bob", "package.install", json!({"name": "jq"}), WAIT).await.unwrap();
    assert_eq!(result, json!({"value": "installed jq"})); // a non-object result is wrapped
    let (run_id, percent) = seen.progress.lock().unwrap()[0].clone();
    assert_eq!(percent, Some(50));
    let issued = DirectiveQuery { role: Some("issued".into()), ..Default::default() };
    let listed = alice.list_directives(&issued).await.unwrap().directives;
    let recorded = listed.into_iter().find(|d| d.directive_id == run_id).unwrap();
    assert_eq!(
        (recorded.status, recorded.claimed_by.as_deref(), recorded.progress.and_then(|p| p.message)),
        (DirectiveStatus::Completed, Some("bob"), Some("installing".to_string()))
    );
    // Consumed, not handed on: neither receive() sees a lifecycle signal, and alice's are acked.
    let quiet = Duration::from_millis(300);
    assert!(matches!(alice.receive(quiet).await, Err(Error::Timeout { .. })));
    assert!(matches!(bob.receive(quiet).await, Err(Error::Timeout { .. })));
    eventually("alice's lifecycle signals acked", 10, || async {
        let got = alice.list(&ListQuery { role: Some("received".into()), ..Default::default() }).await?.signals;
        Ok((got.len() == 2 && got.iter().all(|r| r.acked_at.is_some())).then_some(()))
    })
    .await;
    let nothing = alice.run_directive("bob", "package.install", json!({"mode": "nothing"}), Duration::MAX).await;
    assert_eq!(nothing.unwrap(), json!({}));

    match alice.run_directive("bob", "package.install", json!({"name": "zz", "mode": "fail"}), WAIT).await {
        Err(Error::DirectiveFailed { directive }) => {
            let f = directive.failure.expect("the failure");
            assert_eq!((f.code.as_str(), f.message.as_str()), ("InstallError", "no package \"zz\""));
        }
        other => panic!("expected DirectiveFailed, got {other:?}"),
    }
    match alice.run_directive("bob", "package.install", json!({"mode": "oops"}), WAIT).await {
        Err(e @ Error::DirectiveFailed { .. }) => {
            let f = e.directive().and_then(|d| d.failure.clone()).unwrap();
            assert_eq!((f.code.as_str(), f.message.as_str()), (HANDLER_ERROR_CODE, "the disk is full"));
        }
        other => panic!("expected DirectiveFailed, got {other:?}"),
    }

    // No worker for service.*: bob's requests come to receive(), and bob rejects by hand.
    let a = alice.clone();
    let run = tokio::spawn(async move { a.run_directive("bob", "service.restart", json!({"unit": "db"}), WAIT).await });
    let sig = bob.receive(WAIT).await.unwrap();
    bob.ack([&sig]).await.unwrap();
    assert_eq!(sig.signal_type, "DirectiveRequested");
    bob.reject_directive(&directive_of(&sig).directive_id, Some("not on this host")).await.unwrap();
    match run.await.unwrap() {
        Err(Error::DirectiveRejected { directive }) => {
            assert_eq!(directive.reason.as_deref(), Some("not on this host"))
        }
        other => panic!("expected DirectiveRejected, got {other:?}"),
    }

    let expiring = DirectiveRequest::new("carol", "package.install").params(json!({"name": "jq"})).deadline_seconds(2);
    match alice.run_directive_with(expiring, WAIT).await {
        Err(Error::DirectiveExpired { directive }) => assert_eq!(directive.status, DirectiveStatus::Expired),
        other => panic!("expected DirectiveExpired, got {other:?}"),
    }

    let hang =
        DirectiveRequest::new("bob", "package.install").params(json!({"mode": "hang"})).idempotency_key("hang-1");
    let (a, h) = (alice.clone(), hang.clone());
    let run = tokio::spawn(async move { a.run_directive_with(h, WAIT).await });
    let id = alice.create_directive(hang).await.unwrap().directive_id; // the same key: the same directive
    eventually("bob's worker started it", 10, || async {
        Ok((alice.get_directive(&id, None).await?.status == DirectiveStatus::Started).then_some(()))
    })
    .await;
    alice.cancel_directive(&id, Some("changed my mind")).await.unwrap();
    match run.await.unwrap() {
        Err(Error::DirectiveCanceled { directive }) => {
            assert_eq!(
                (directive.directive_id.as_str(), directive.reason.as_deref()),
                (id.as_str(), Some("changed my mind"))
            )
        }
        other => panic!("expected DirectiveCanceled, got {other:?}"),
    }
    let s = seen.clone();
    eventually("the hanging handler learns its directive ended", 10, || {
        let s = s.clone();
        let id = id.clone();
        async move { Ok(s.ended_while_running.lock().unwrap().contains(&id).then_some(())) }
    })
    .await;

    let short = alice.run_directive("carol", "package.install", json!({}), Duration::from_millis(300)).await;
    assert!(matches!(short, Err(Error::DirectiveTimeout { .. })), "{short:?}");
    let offline = Client::new(&bus.url, &at).unwrap(); // never connected: nothing created
    assert!(matches!(
        offline.run_directive("bob", "package.install", json!({}), WAIT).await,
        Err(Error::Unreachable { .. })
    ));
    let bad = bob.on_directive("pack*age", |_, _| async { Ok(json!({})) });
    assert!(matches!(bad, Err(Error::Usage(_))), "{bad:?}");
    let twice = bob.on_directive("package.*", |_, _| async { Ok(json!({})) });
    assert!(matches!(twice, Err(Error::Usage(_))), "{twice:?}");
    let a = alice.clone();
    let waiting = tokio::spawn(async move { a.run_directive("carol", "package.install", json!({}), WAIT).await });
    let issued = DirectiveQuery { role: Some("issued".into()), status: Some("open".into()), ..Default::default() };
    eventually("the waiting run's directive created", 10, || async {
        Ok((alice.list_directives(&issued).await?.directives.len() == 2).then_some(()))
        // with the short one
    })
    .await;
    alice.close().await;
    let closed = tokio::time::timeout(WAIT, waiting).await.expect("close() ends the wait").unwrap();
    assert!(matches!(closed, Err(Error::Closed)), "{closed:?}");
    bob.close().await;
    assert!(matches!(bob.on_directive("package.*", |_, _| async { Ok(json!({})) }), Err(Error::Closed)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s29_a_request_redelivered_after_its_end_is_skipped() {
    let bus = Bus::start_new().await;
    let (at, et) = (bus.token("alice").await, bus.token("erin").await);
    let alice = Client::new(&bus.url, &at).unwrap();
    let d = alice.create_directive(DirectiveRequest::new("erin", "package.install")).await.unwrap();
    let plain = bus.connected(&et).await; // receives the request, never acks it
    let sig = plain.receive(WAIT).await.unwrap();
    assert_eq!(
        (sig.signal_type.as_str(), sig.correlation_id.as_deref()),
        ("DirectiveRequested", Some(d.directive_id.as_str()))
    );
    plain.close().await;
    alice.cancel_directive(&d.directive_id, None).await.unwrap();

    let seen = Arc::new(Seen::default());
    let erin = Client::builder(&bus.url, &et).build().unwrap();
    let s = seen.clone();
    erin.on_directive("package.*", move |d, p| handler(d, p, s.clone())).unwrap();
    erin.connect().await.unwrap();
    eventually("the redelivered request acked", 10, || async { Ok(erin.get(&sig.id).await?.acked_at.map(|_| ())) })
        .await;
    assert!(
        matches!(erin.receive(Duration::from_millis(500)).await, Err(Error::Timeout { .. })),
        "nor the DirectiveCanceled"
    );
    assert!(seen.runs.lock().unwrap().is_empty(), "the handler never ran");
    let canceled = erin.list(&ListQuery { role: Some("received".into()), ..Default::default() }).await.unwrap();
    let row = canceled.signals.iter().find(|r| r.signal_type == "DirectiveCanceled").expect("the DirectiveCanceled");
    eventually("the DirectiveCanceled acked", 10, || async { Ok(erin.get(&row.id).await?.acked_at.map(|_| ())) }).await;
    erin.close().await;
}
