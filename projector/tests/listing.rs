//! The listings of `signal_queue` read PostgreSQL's listing indexes, which are keyed by a hash
//! of (tenant, identity) (schema/postgres/0010_listing_keys.sql): a listing that stopped asking
//! for the hash would still answer right, by scanning the table, so this checks the indexes
//! are what answers, and that the rechecks keep other tenants' and identities' rows out. The
//! answers themselves, in both dialects, are projection.rs's.

mod support;

use projector::queries::{ListSignals, Queries, Role};
use support::*;

/// Rows planted behind the projector's back: 40 senders to 40 recipients in two tenants that
/// reuse the same identity names, 8,000 rows, so a scan of the table is the plan to avoid.
const PLANT: &str = "INSERT INTO signal_queue (id, tenant, from_identity, to_identity, signal_type, category, \
     priority, payload, recipient_state, created_at, last_event_seq) \
     SELECT gen_random_uuid(), 'tenant-' || ((g / 7) % 2), 'sender-' || (g % 40), 'agent-' || ((g / 40) % 40), \
       'task.update', 'info', 5, '{}'::jsonb, 'online', now() - g * interval '1 second', g \
     FROM generate_series(1, 8000) g";

fn listing(identity: &str, role: Role) -> ListSignals {
    ListSignals {
        tenant: "tenant-1".into(),
        identity: identity.into(),
        role: Some(role),
        status: None,
        limit: 20,
        cursor: None,
    }
}

/// Index scans of `index` so far, as the statistics have them once the readers' backends flushed.
async fn scans(env: &Env, index: &str) -> i64 {
    env.pg_i64(&format!("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = '{index}'")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_read_the_hashed_listing_indexes() {
    let env = Env::postgres().await;
    env.execute(PLANT).await;
    env.execute("ANALYZE signal_queue").await;
    let m = &env.models;
    let (from0, to0) = (scans(&env, "ix_signal_queue_from").await, scans(&env, "ix_signal_queue_to").await);

    let sent = m.list_signals(&listing("sender-7", Role::Sent)).await.unwrap();
    assert_eq!(sent.len(), 20);
    assert!(sent.iter().all(|r| r.tenant == "tenant-1" && r.from_identity == "sender-7"), "{sent:#?}");
    assert!(sent.windows(2).all(|w| (w[0].created_at, w[0].id) > (w[1].created_at, w[1].id)), "newest first");
    let received = m.list_signals(&listing("agent-3", Role::Received)).await.unwrap();
    assert_eq!(received.len(), 20);
    assert!(received.iter().all(|r| r.tenant == "tenant-1" && r.to_identity == "agent-3"), "{received:#?}");
    let nobody = m.list_signals(&listing("sender-70", Role::Sent)).await.unwrap();
    assert!(nobody.is_empty(), "{nobody:#?}");

    // Statistics reach the view when a backend goes idle, at most once a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (from, to) = (scans(&env, "ix_signal_queue_from").await, scans(&env, "ix_signal_queue_to").await);
        if from > from0 && to > to0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "listings did not use the listing indexes: {from} / {to}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
