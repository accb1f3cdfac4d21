//! Scenarios S20–S22 of clients/SCENARIOS.md: a mistake in the calling code is `Error::Usage`,
//! each error's hint fits its operation, and `status()` does not depend on the transport — each
//! against its own real `signalbus serve`.

mod support;

use std::time::Duration;

use serde_json::json;
use signalbus_client::{Client, Error, SendRequest};
use support::Bus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s20_usage_errors_are_the_languages_own() {
    let bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    let handled = Client::builder(&bus.url, &at).on_signal(|_, _| async { Ok(()) }).build().unwrap();
    handled.connect().await.unwrap();
    match handled.receive(Duration::from_secs(1)).await {
        Err(e @ Error::Usage(_)) => {
            assert_eq!(e.code(), "usage");
            assert!(e.to_string().contains("on_signal"), "{e}");
        }
        other => panic!("expected Error::Usage, got {other:?}"),
    }
    handled.close().await;
    let alice = bus.connected(&at).await;
    assert!(matches!(alice.ask("alice", "Question", json!({}), Duration::ZERO).await, Err(Error::Usage(_))));
    assert!(matches!(Client::builder(&bus.url, &at).replay_rate(0.0).build(), Err(Error::Usage(_))));
    alice.close().await;
    // the never-connected ask stays a transport error (S19), not a usage error
    let never = Client::new(&bus.url, &at).unwrap();
    assert!(matches!(
        never.ask("alice", "Question", json!({}), Duration::from_secs(1)).await,
        Err(Error::Unreachable { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s21_hints_fit_the_operation() {
    let mut bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    bus.token("bob").await;
    let alice = bus.connected(&at).await;
    match alice.receive(Duration::from_millis(200)).await {
        Err(e @ Error::Timeout { .. }) => assert!(!e.to_string().contains("dedupe_key"), "{e}"),
        other => panic!("expected Error::Timeout, got {other:?}"),
    }
    alice.close().await;
    let dead =
        Client::builder(&bus.url, &at).identity("alice").connect_timeout(Duration::from_millis(500)).build().unwrap();
    bus.kill();
    match dead.connect().await {
        Err(e @ Error::Timeout { .. }) => assert!(!e.to_string().contains("dedupe_key"), "{e}"),
        other => panic!("expected Error::Timeout, got {other:?}"),
    }
    match dead.recall("00000000-0000-4000-8000-000000000000").await {
        Err(e @ (Error::Unreachable { .. } | Error::Transport { .. })) => {
            assert!(!e.to_string().contains("dedupe_key"), "{e}")
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    match dead
        .send_opts(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 1})).dedupe_key("k-21"), false)
        .await
    {
        Err(e @ Error::Unreachable { .. }) => {
            assert_eq!(e.dedupe_key(), Some("k-21"));
            assert!(e.to_string().contains("nothing was sent"), "{e}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    dead.close().await;
    bus.start().await;
    // a send whose outcome is unknown says to retry with its dedupe_key; other calls do not
    let dropped = |key: Option<&str>| Error::Transport {
        message: "dropped".into(),
        cause: None,
        dedupe_key: key.map(str::to_string),
    };
    assert!(dropped(Some("k")).to_string().contains("same dedupe_key"));
    assert!(!dropped(None).to_string().contains("dedupe_key"));
    let slow = |key: Option<&str>| Error::Timeout { message: "slow".into(), dedupe_key: key.map(str::to_string) };
    assert!(slow(Some("k")).to_string().contains("same dedupe_key"));
    assert!(!slow(None).to_string().contains("dedupe_key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s22_status_is_the_same_over_either_transport() {
    let bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    bus.token("bob").await; // never connected: offline
    let over_ws = bus.connected(&at).await;
    let http = Client::new(&bus.url, &at).unwrap();
    for c in [&over_ws, &http] {
        let bounce = c.send(SendRequest::new("bob", "Blocker").payload(json!({"b": 1}))).await.unwrap_err();
        assert!(matches!(bounce, Error::RecipientUnavailable { .. }) && bounce.status() == Some(409), "{bounce:?}");
        let unknown = c.send(SendRequest::new("nobody", "StatusUpdate")).await.unwrap_err();
        assert!(matches!(unknown, Error::UnknownRecipient(_)) && unknown.status() == Some(404), "{unknown:?}");
        let invalid = c.send(SendRequest::new("bob", "StatusUpdate").ttl_seconds(0)).await.unwrap_err();
        assert!(matches!(invalid, Error::InvalidRequest(_)) && invalid.status() == Some(400), "{invalid:?}");
        let forbidden = c.record_fact("bob", "seen", json!({})).await.unwrap_err();
        assert_eq!((forbidden.code(), forbidden.status()), ("forbidden", Some(403)));
    }
    over_ws.close().await;
}
