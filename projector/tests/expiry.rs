//! Expiries in the read models (CONTRACT §16), against PostgreSQL and SQLite: each row's
//! `expired_reason` is folded from its `signal.expired` (an event without a reason, as older
//! releases wrote it, reads as `ttl`), the same whether applied one event per batch, archived,
//! or rebuilt; and `pending_signals` finds exactly the pending signals `bus::force_expire`'s
//! rule matches, page after page.

mod support;

use std::collections::BTreeSet;

use bus::catalog::Category;
use bus::event::{DeliveredVia, EventBody, ExpiryReason};
use bus::force_expire::ExpireFilter;
use chrono::{Duration, SubsecRound, Utc};
use projector::queries::{PendingSignals, Queries};
use support::*;
use uuid::Uuid;

both_backends!(expiry_reasons_land_alike_in_any_batch_split, pending_signals_are_what_the_bus_rule_matches);

async fn expiry_reasons_land_alike_in_any_batch_split(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    let mut events = vec![registered("bob", at(0))];
    for (i, id) in ids.iter().enumerate() {
        events.push(sent(*id, "alice", "bob", Category::Task, at(1 + i as i64), Duration::seconds(60)));
    }
    let due = |i: usize| at(61 + i as i64);
    events.extend([
        expired(ids[0], due(0), at(70)),
        expired_for(ids[1], due(1), at(71), ExpiryReason::Ttl),
        expired_for(ids[2], due(2), at(20), ExpiryReason::Forced),
        expired_for(ids[3], due(3), at(21), ExpiryReason::Removed),
        expired_for(ids[4], due(4), at(22), ExpiryReason::Undeliverable),
        // A second expiry cannot be on the stream; if one were, the first would stand.
        expired_for(ids[2], due(2), at(80), ExpiryReason::Ttl),
    ]);
    let seqs = env.append_all(&events).await;
    for (i, event) in events.iter().enumerate() {
        assert!(m.apply_stored(&stored(seqs[i], vec![event.clone()]), seqs[i] - 1).await.unwrap());
    }
    let reasons = || async {
        let mut out = Vec::new();
        for id in &ids {
            out.push(m.signal(TENANT, *id).await.unwrap().expect("row").expired_reason);
        }
        out
    };
    let want: Vec<Option<String>> =
        ["ttl", "ttl", "forced", "removed", "undeliverable"].iter().map(|r| Some(r.to_string())).collect();
    assert_eq!(reasons().await, want);
    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
    // Archived rows keep their reason.
    assert_eq!(m.archive(Utc::now(), 2).await.unwrap(), 5);
    assert_eq!(reasons().await, want);
    assert_eq!(m.snapshot().await.unwrap(), live, "archiving only moves rows");
}

async fn pending_signals_are_what_the_bus_rule_matches(env: Env) {
    let m = &env.models;
    // Whole microseconds, as both backends store them, so the rows compare equal to the events.
    let now = Utc::now().trunc_subsecs(6);
    let t0 = now - Duration::hours(3);
    let mut events = Vec::new();
    let mut sends = Vec::new();
    let people = ["alice", "bob", "carol"];
    for i in 0..36i64 {
        let id = Uuid::new_v4();
        let (from, to) = (people[(i % 3) as usize], people[((i / 3) % 3) as usize]);
        // Two types, sent over three hours, some expiring in the same instant (keyset ties).
        let mut e = sent(id, from, to, Category::Task, t0 + Duration::minutes(5 * i), Duration::days(1));
        if let EventBody::SignalSent(s) = &mut e.body {
            s.signal_type = if i % 4 == 0 { "Question".into() } else { "StatusUpdate".into() };
            s.expires_at = t0 + Duration::days(1) + Duration::minutes(i / 5);
            sends.push((**s).clone());
        }
        events.push(e);
    }
    // Settled signals are never pending: one delivered, one recalled, one expired.
    events.push(delivered(sends[1].signal_id, &sends[1].to, DeliveredVia::Inbox, None, false, now));
    events.push(recalled(sends[2].signal_id, &sends[2].from, now));
    events.push(expired_for(sends[3].signal_id, sends[3].expires_at, now, ExpiryReason::Forced));
    let seqs = env.append_all(&events).await;
    assert!(m.apply_stored(&stored(seqs[0], events), 0).await.unwrap());
    let settled = [sends[1].signal_id, sends[2].signal_id, sends[3].signal_id];

    let f = |to: Option<&str>, from: Option<&str>, t: Option<&str>, older: Option<u64>, ids: Vec<Uuid>| ExpireFilter {
        tenant: TENANT.into(),
        to: to.map(str::to_string),
        from: from.map(str::to_string),
        signal_type: t.map(str::to_string),
        older_than_seconds: older,
        signal_ids: ids,
    };
    let some_ids: Vec<Uuid> = sends.iter().step_by(5).map(|s| s.signal_id).chain([Uuid::new_v4()]).collect();
    let filters = [
        f(Some("bob"), None, None, None, vec![]),
        f(None, Some("alice"), None, None, vec![]),
        f(None, None, Some("Question"), None, vec![]),
        f(None, None, None, Some(3600), vec![]),
        f(Some("carol"), Some("bob"), Some("StatusUpdate"), Some(1800), vec![]),
        f(None, None, None, None, some_ids.clone()),
        f(Some("alice"), None, None, None, some_ids),
        f(Some("nobody"), None, None, None, vec![]),
        ExpireFilter { tenant: "other".into(), ..f(Some("bob"), None, None, None, vec![]) },
    ];
    for filter in filters {
        let want: BTreeSet<Uuid> = sends
            .iter()
            .filter(|s| !settled.contains(&s.signal_id) && filter.matches(TENANT, s, now))
            .map(|s| s.signal_id)
            .collect();
        let mut got = BTreeSet::new();
        let mut q =
            PendingSignals { filter: filter.clone(), created_until: filter.created_until(now), after: None, limit: 4 };
        loop {
            let page = m.pending_signals(&q).await.unwrap();
            let keys: Vec<_> = page.iter().map(PendingSignals::next_after).collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{filter:?}: pages are in (expires_at, id) order");
            for row in &page {
                assert!(got.insert(row.id), "{filter:?}: {} read twice", row.id);
                let s = sends.iter().find(|s| s.signal_id == row.id).unwrap();
                assert_eq!((row.to_identity.as_str(), row.from_identity.as_str()), (s.to.as_str(), s.from.as_str()));
                assert_eq!((row.signal_type.as_str(), row.expires_at), (s.signal_type.as_str(), s.expires_at));
                assert_eq!(row.correlation_id, s.correlation_id);
                assert!(row.last_event_seq > 0);
            }
            match page.last() {
                Some(last) if page.len() == q.limit as usize => q.after = Some(PendingSignals::next_after(last)),
                _ => break,
            }
        }
        assert_eq!(got, want, "{filter:?}");
    }
}
