//! Scenarios S34 and S35 of clients/SCENARIOS.md: a conversation (the signals under one
//! correlation id, oldest first, paged, and never anyone else's), and the admin's force-expire
//! (a dry run, then the real one, with `expired_reason: forced` on the rows) — each against its
//! own real `signalbus serve`.
//!
//! Deliberately over HTTP for the offline recipients (dave, erin, carol never connect), so
//! their signals stay queued.

mod support;

use std::collections::BTreeSet;

use serde_json::json;
use signalbus_client::{Client, Error, ExpireFilter, ExpireOutcome, ExpireResult, SendRequest, SignalPage, SignalRow};
use support::{eventually, Bus};

fn ids(page: &SignalPage) -> Vec<&str> {
    page.signals.iter().map(|r| r.id.as_str()).collect()
}

/// Sends a `StatusUpdate` from `from` to `to` (under `correlation_id`) and answers its id.
async fn send(from: &Client, to: &str, correlation_id: Option<&str>) -> String {
    let mut req = SendRequest::new(to, "StatusUpdate").payload(json!({"to": to}));
    req.correlation_id = correlation_id.map(str::to_string);
    from.send(req).await.unwrap().signal_id().unwrap().to_string()
}

/// `signal_id`'s row once `ready` says so (the read models follow the stream).
async fn row_of(client: &Client, signal_id: &str, ready: fn(&SignalRow) -> bool) -> SignalRow {
    eventually(&format!("the row of {signal_id}"), 10, || async move {
        let r = client.get(signal_id).await?;
        Ok(ready(&r).then_some(r))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s34_conversations() {
    let bus = Bus::start_new().await;
    let (at, bt, ct) = (bus.token("alice").await, bus.token("bob").await, bus.token("carol").await);
    let alice = bus.connected(&at).await;
    let bob = Client::new(&bus.url, &bt).unwrap();
    let carol = Client::new(&bus.url, &ct).unwrap();
    let thread = [
        send(&alice, "bob", Some("t-1")).await,
        send(&bob, "alice", Some("t-1")).await,
        send(&alice, "bob", Some("t-1")).await,
    ];
    let other = send(&alice, "bob", Some("t-2")).await;

    for who in [&alice, &bob] {
        let page = eventually("the conversation t-1 complete", 10, || async move {
            let page = who.conversation("t-1").await?;
            Ok((page.signals.len() == 3).then_some(page))
        })
        .await;
        assert_eq!(ids(&page), thread.iter().map(String::as_str).collect::<Vec<_>>(), "oldest first");
        assert!(page.signals.iter().all(|r| r.correlation_id.as_deref() == Some("t-1")));
        let first = who.conversation_page("t-1", Some(2), None).await.unwrap();
        assert_eq!(ids(&first), vec![thread[0].as_str(), thread[1].as_str()]);
        let cursor = first.next_cursor.as_deref().expect("a next_cursor after a full page");
        let rest = who.conversation_page("t-1", Some(2), Some(cursor)).await.unwrap();
        assert_eq!(ids(&rest), vec![thread[2].as_str()]);
        assert_eq!(ids(&who.conversation("t-2").await.unwrap()), vec![other.as_str()]);
    }
    assert!(carol.conversation("t-1").await.unwrap().signals.is_empty(), "never anyone else's signals");
    assert!(matches!(alice.conversation("").await, Err(Error::Usage(_))));
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s35_force_expire() {
    let bus = Bus::start_new().await;
    let admin = bus.admin();
    let at = bus.token("alice").await;
    let (dt, et) = (bus.token("dave").await, bus.token("erin").await);
    let alice = bus.connected(&at).await;
    let (dave, erin) = (Client::new(&bus.url, &dt).unwrap(), Client::new(&bus.url, &et).unwrap());
    let to_dave: BTreeSet<String> = [send(&alice, "dave", None).await, send(&alice, "dave", None).await].into();
    let to_erin = send(&alice, "erin", None).await;
    for id in to_dave.iter().chain([&to_erin]) {
        row_of(&alice, id, |_| true).await;
    }

    let preview = admin.expire_signals(&ExpireFilter::new("default").to("dave").dry_run(true)).await.unwrap();
    let ExpireOutcome::DryRun(preview) = preview else { panic!("a dry run answers its list, got {preview:?}") };
    assert_eq!(preview.count, 2);
    let listed: BTreeSet<String> = preview.signal_ids().into_iter().map(str::to_string).collect();
    assert_eq!(listed, to_dave);
    for c in &preview.would_expire {
        assert_eq!((c.to.as_str(), c.from.as_str(), c.signal_type.as_str()), ("dave", "alice", "StatusUpdate"));
    }
    assert_eq!(dave.inbox(None).await.unwrap().len(), 2, "a dry run expires nothing");

    let filter = ExpireFilter { tenant: "default".into(), to: Some("dave".into()), ..Default::default() };
    let done = admin.expire_signals(&filter).await.unwrap();
    assert_eq!(done, ExpireOutcome::Expired(ExpireResult { expired: 2, skipped: 0 }));
    for id in &to_dave {
        let row = row_of(&alice, id, |r| r.expired_at.is_some()).await;
        assert_eq!((row.status(), row.expired_reason.as_deref()), ("expired", Some("forced")));
    }
    assert!(dave.inbox(None).await.unwrap().is_empty());
    let again = admin.expire_signals(&filter).await.unwrap();
    assert_eq!(again.expired().map(|r| r.expired), Some(0), "{again:?}");

    let untouched = alice.get(&to_erin).await.unwrap();
    assert_eq!((untouched.status(), untouched.expired_reason.as_deref()), ("pending", None));
    assert_eq!(erin.inbox(None).await.unwrap().iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![to_erin]);

    let nowhere = signalbus_client::AdminClient::new("http://127.0.0.1:9", "nope").unwrap();
    for a in [&admin, &nowhere] {
        assert!(matches!(a.expire_signals(&ExpireFilter::new("default")).await, Err(Error::Usage(_))));
    }
    alice.close().await;
}
