//! Sends gathered into one `sends.recorded` (the gateway's send batcher) on a real stream, on
//! JetStream (Debian's release and the current one) and embedded SQLite: each is found from its
//! id alone (its send window's subject), its subject stays empty until its next event, and the
//! per-signal compare-and-set decides from there exactly as for a send stored on its subject —
//! a recall and an expiry racing leave one, a delivery decided on the stale "subject empty"
//! hint after either loses and is told why, and the events after the send are all read back.
//!
//! Deliberately mocks nothing.

mod support;

use bus::catalog::{Category, DeliveryClass};
use bus::event::{send_window, Entity, Event, EventBody, PublishPath, RecipientState, SendsRecorded, SignalSent};
use bus::signal::{Hint, SignalCommand, Status};
use bus::store::{Known, SignalStore};
use bus::{DomainError, Error};
use chrono::{Duration, Utc};
use support::{Backend, Current, Debian, Embedded, JetStream, TENANT};
use uuid::Uuid;

fn sent(signal_id: Uuid, to: &str, pushed_to: Option<Uuid>) -> SignalSent {
    let now = Utc::now();
    SignalSent {
        signal_id,
        from: "alice".into(),
        to: to.into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Task,
        priority: 1,
        payload: "{\"n\":1}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now + Duration::hours(1),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: Some(format!("c-{signal_id}")),
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to,
        fanout_id: None,
        deliver_at: None,
    }
}

/// Ids made in one send window (consecutive v7 ids of one millisecond share it).
fn ids_in_one_window(n: usize) -> Vec<Uuid> {
    loop {
        let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
        if ids.iter().all(|id| send_window(*id) == send_window(ids[0])) {
            return ids;
        }
    }
}

async fn gather(store: &SignalStore, sends: Vec<SignalSent>) -> u64 {
    let window = send_window(sends[0].signal_id).unwrap();
    let event = Event::new(TENANT, None, Utc::now(), EventBody::SendsRecorded(SendsRecorded { window, sends }));
    store.record(&event).await.unwrap().seq
}

async fn each_is_found_from_its_id<B: Backend>() {
    let backend = B::open().await;
    let store = SignalStore::new(backend.log());
    let ids = ids_in_one_window(4);
    let session = Uuid::now_v7();
    let seq = gather(
        &store,
        vec![sent(ids[0], "bob", None), sent(ids[1], "carol", Some(session)), sent(ids[2], "bob", None)],
    )
    .await;
    let subject = store.log().subjects().of(TENANT, Entity::Sends(send_window(ids[0]).unwrap()));
    assert_eq!(store.log().read_subject(&subject).await.unwrap().len(), 1, "one stream message for three sends");
    assert!(seq > 0);

    let (bob, last) = store.load(TENANT, ids[0]).await.unwrap();
    assert_eq!((bob.status, last), (Status::Pending, 0), "pending, its own subject empty");
    assert_eq!(bob.sent.as_ref().map(|s| s.to.as_str()), Some("bob"));
    let (carol, _) = store.load(TENANT, ids[1]).await.unwrap();
    assert_eq!(carol.status, Status::Delivered { acked: false }, "a gathered push is delivered by its send");
    let (absent, last) = store.load(TENANT, ids[3]).await.unwrap();
    assert_eq!((absent.status, absent.sent.is_none(), last), (Status::Absent, true, 0), "never sent: not found");
}

async fn the_compare_and_set_starts_from_the_empty_subject<B: Backend>() {
    let backend = B::open().await;
    let store = SignalStore::new(backend.log());
    let ids = ids_in_one_window(2);
    let sends = vec![sent(ids[0], "bob", None), sent(ids[1], "bob", None)];
    let hints = sends.clone();
    gather(&store, sends).await;
    let later = Utc::now() + Duration::hours(2);

    // A recall and an expiry at once: one lands, the other is refused by what landed.
    let by_alice = SignalCommand::Recall { by: "alice".into() };
    let recall = store.execute(TENANT, ids[0], &by_alice, "alice", later);
    let expire = store.execute(TENANT, ids[0], &SignalCommand::Expire, "signalbus/sweeper", later);
    let (recalled, expired) = tokio::join!(recall, expire);
    let landed = [&recalled, &expired].map(|r| r.as_ref().is_ok_and(|done| !done.appended.is_empty()));
    assert_eq!(landed.iter().filter(|ok| **ok).count(), 1, "exactly one terminal outcome: {landed:?}");
    let (state, last) = store.load(TENANT, ids[0]).await.unwrap();
    assert!(matches!(state.status, Status::Recalled | Status::Expired), "{:?}", state.status);
    assert!(last > 0, "the outcome is on the signal's own subject");

    // A delivery decided on the tail's view (the send, subject empty) after a recall: it loses
    // the compare-and-set, reads the signal, and is refused.
    let now = Utc::now();
    store.execute(TENANT, ids[1], &SignalCommand::Recall { by: "alice".into() }, "alice", now).await.unwrap();
    let known = Known { hint: Hint::Sent(&hints[1]), last_seq: 0, correlation_id: None };
    let deliver = |_: &bus::signal::SignalState| SignalCommand::Deliver {
        to: "bob".into(),
        via: bus::event::DeliveredVia::WsPush,
        session_id: Some(Uuid::now_v7()),
        redeliver: false,
    };
    let late = store.execute_hinted(TENANT, ids[1], deliver, "bob", now, Some(known)).await;
    assert!(matches!(late, Err(Error::Domain(DomainError::Refused(_)))), "{late:?}");
    let (state, _) = store.load(TENANT, ids[1]).await.unwrap();
    assert_eq!(state.status, Status::Recalled);
}

async fn a_delivery_on_the_fresh_hint_lands_without_a_read<B: Backend>() {
    let backend = B::open().await;
    let store = SignalStore::new(backend.log());
    let ids = ids_in_one_window(1);
    let sends = vec![sent(ids[0], "bob", None)];
    let hint = sends[0].clone();
    gather(&store, sends).await;
    let session = Uuid::now_v7();
    let known = Known { hint: Hint::Sent(&hint), last_seq: 0, correlation_id: None };
    let deliver = |_: &bus::signal::SignalState| SignalCommand::Deliver {
        to: "bob".into(),
        via: bus::event::DeliveredVia::WsPush,
        session_id: Some(session),
        redeliver: false,
    };
    let done = store.execute_hinted(TENANT, ids[0], deliver, "bob", Utc::now(), Some(known)).await.unwrap();
    assert!(done.appended.is_some() && done.state.is_none(), "decided on the hint, appended without a read");
    let (state, last) = store.load(TENANT, ids[0]).await.unwrap();
    assert_eq!(state.status, Status::Delivered { acked: false });
    assert_eq!(Some(last), done.appended.map(|(seq, _)| seq));
}

macro_rules! gathered {
    ($backend:ident, $ty:ty) => {
        mod $backend {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn each_is_found_from_its_id() {
                super::each_is_found_from_its_id::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn the_compare_and_set_starts_from_the_empty_subject() {
                super::the_compare_and_set_starts_from_the_empty_subject::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_delivery_on_the_fresh_hint_lands_without_a_read() {
                super::a_delivery_on_the_fresh_hint_lands_without_a_read::<$ty>().await
            }
        }
    };
}

gathered!(jetstream, JetStream<Debian>);
gathered!(jetstream_current, JetStream<Current>);
gathered!(embedded, Embedded);
