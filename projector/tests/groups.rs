//! Groups and fan-out in the read models (CONTRACT §15), against PostgreSQL and SQLite: groups
//! created, changed, deleted and created again, members added, removed and added again, applied
//! one event per batch, answer the group queries and equal a rebuild (one batch); the signals of
//! one group send, and of one correlation id, are found by their sender only, also archived; a
//! conversation (one correlation id) lists the caller's sent and received signals, oldest first.

mod support;

use bus::catalog::Category;
use bus::event::*;
use chrono::{DateTime, Duration, Utc};
use projector::queries::{Conversation, Queries, Role, StatusFilter};
use support::*;
use uuid::Uuid;

both_backends!(
    groups_and_fanouts_land_alike_live_and_rebuilt,
    a_batch_over_rows_of_earlier_batches_nets_out_alike,
    a_conversation_is_both_roles_oldest_first_archived_too
);

fn created(group: &str, self_join: bool, at: DateTime<Utc>) -> Event {
    ev(at, EventBody::GroupCreated(GroupCreated { group: group.into(), self_join, announce: true }))
}

fn added(group: &str, identity: &str, at: DateTime<Utc>) -> Event {
    let by = "admin".into();
    ev(
        at,
        EventBody::GroupMemberAdded(GroupMemberAdded { group: group.into(), identity: identity.into(), added_by: by }),
    )
}

fn left(group: &str, identity: &str, at: DateTime<Utc>) -> Event {
    let by = identity.into();
    ev(at, EventBody::GroupMemberRemoved(GroupMemberRemoved { group: group.into(), identity: identity.into(), by }))
}

/// A send from `from` to `to`, one member's part of group send `fanout` when given.
fn member_sent(id: Uuid, from: &str, to: &str, fanout: Option<Uuid>, at: DateTime<Utc>) -> Event {
    let mut event = sent(id, from, to, Category::Info, at, Duration::hours(1));
    if let EventBody::SignalSent(s) = &mut event.body {
        (s.fanout_id, s.correlation_id) = (fanout, Some("review-7".into()));
    }
    event
}

async fn groups_and_fanouts_land_alike_live_and_rebuilt(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let fanout = Uuid::new_v4();
    let (s_bob, s_dave, s_plain, s_other) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let events = vec![
        created("@rev", false, at(0)),
        added("@rev", "bob", at(1)),
        added("@rev", "carol", at(2)),
        added("@rev", "dave", at(3)),
        ev(at(4), EventBody::GroupUpdated(GroupUpdated { group: "@rev".into(), self_join: true, announce: false })),
        left("@rev", "carol", at(5)),
        created("@old", false, at(6)),
        added("@old", "bob", at(7)),
        ev(at(8), EventBody::GroupDeleted(GroupDeleted { group: "@old".into() })),
        created("@old", true, at(9)),
        added("@old", "eve", at(10)),
        left("@rev", "dave", at(11)),
        added("@rev", "dave", at(12)),
        member_sent(s_bob, "alice", "bob", Some(fanout), at(13)),
        member_sent(s_dave, "alice", "dave", Some(fanout), at(14)),
        member_sent(s_plain, "alice", "bob", None, at(15)),
        member_sent(s_other, "mallory", "bob", Some(fanout), at(16)),
        recalled(s_dave, "alice", at(17)),
    ];
    let seqs = env.append_all(&events).await;
    for (i, event) in events.iter().enumerate() {
        assert!(m.apply_stored(&stored(seqs[i], vec![event.clone()]), seqs[i] - 1).await.unwrap());
    }

    let groups = m.groups(TENANT).await.unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, ["@old", "@rev"]);
    let rev = m.group(TENANT, "@rev").await.unwrap().expect("@rev");
    assert_eq!((rev.self_join, rev.announce), (true, false), "the update holds");
    let members: Vec<(&str, i64)> = rev.members.iter().map(|x| (x.identity.as_str(), x.added_at.timestamp())).collect();
    assert_eq!(members, [("bob", at(1).timestamp()), ("dave", at(12).timestamp())], "carol left; dave came back");
    assert_eq!(rev.created_at.timestamp(), at(0).timestamp());
    let old = &groups[0];
    assert_eq!((old.self_join, old.created_at.timestamp()), (true, at(9).timestamp()), "created again");
    let old_members: Vec<&str> = old.members.iter().map(|x| x.identity.as_str()).collect();
    assert_eq!(old_members, ["eve"], "the delete took bob with it");
    assert_eq!(old.members[0].added_by, "admin");
    assert_eq!(m.group(TENANT, "@nope").await.unwrap(), None);
    assert_eq!(m.group("other-tenant", "@rev").await.unwrap(), None);
    assert_eq!(m.groups_of(TENANT, "bob").await.unwrap(), ["@rev"]);
    assert_eq!(m.groups_of(TENANT, "eve").await.unwrap(), ["@old"]);
    assert!(m.groups_of(TENANT, "carol").await.unwrap().is_empty());

    // Dave's recalled signal moves to the history and is still found with its fanout_id.
    assert_eq!(m.archive(Utc::now(), 10).await.unwrap(), 1);
    let by_fanout = m.signals_by_fanout(TENANT, "alice", fanout).await.unwrap();
    let found: Vec<(Uuid, &str, Option<Uuid>)> =
        by_fanout.iter().map(|r| (r.id, r.to_identity.as_str(), r.fanout_id)).collect();
    assert_eq!(found, [(s_bob, "bob", Some(fanout)), (s_dave, "dave", Some(fanout))], "alice's part only");
    assert!(by_fanout[1].recalled_at.is_some());
    assert!(m.signals_by_fanout(TENANT, "bob", fanout).await.unwrap().is_empty(), "only the sender finds them");
    let by_corr = m.signals_by_correlation(TENANT, "alice", "review-7").await.unwrap();
    let mut ids: Vec<Uuid> = by_corr.iter().map(|r| r.id).collect();
    ids.sort();
    let mut want = vec![s_bob, s_dave, s_plain];
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(m.signal(TENANT, s_plain).await.unwrap().unwrap().fanout_id, None);

    let live = m.snapshot().await.unwrap();
    assert_eq!(live.tables["group_members"].len(), 3, "{:?}", live.tables["group_members"]);
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
    assert_eq!(m.groups(TENANT).await.unwrap(), groups, "the rebuilt groups answer alike");
}

/// A batch that removes and re-adds a member, updates a group and deletes and re-creates
/// another, all over rows an earlier batch wrote, leaves what one batch over everything leaves.
async fn a_batch_over_rows_of_earlier_batches_nets_out_alike(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let events = vec![
        created("@a", false, at(0)),
        added("@a", "bob", at(1)),
        created("@b", false, at(2)),
        added("@b", "carol", at(3)),
        // The second batch, over the rows of the first.
        left("@a", "bob", at(4)),
        added("@a", "bob", at(5)),
        ev(at(6), EventBody::GroupUpdated(GroupUpdated { group: "@a".into(), self_join: true, announce: true })),
        ev(at(7), EventBody::GroupDeleted(GroupDeleted { group: "@b".into() })),
        created("@b", true, at(8)),
        added("@b", "dave", at(9)),
    ];
    let seqs = env.append_all(&events).await;
    assert!(m.apply_stored(&stored(seqs[0], events[..4].to_vec()), seqs[0] - 1).await.unwrap());
    assert!(m.apply_stored(&stored(seqs[4], events[4..].to_vec()), seqs[3]).await.unwrap());

    let a = m.group(TENANT, "@a").await.unwrap().expect("@a");
    assert_eq!((a.self_join, a.members.len()), (true, 1));
    assert_eq!(a.members[0].added_at.timestamp(), at(5).timestamp(), "bob's second add is the row");
    let b = m.group(TENANT, "@b").await.unwrap().expect("@b");
    let members: Vec<&str> = b.members.iter().map(|x| x.identity.as_str()).collect();
    assert_eq!((b.self_join, b.created_at.timestamp(), members), (true, at(8).timestamp(), vec!["dave"]));
    assert!(m.groups_of(TENANT, "carol").await.unwrap().is_empty(), "the delete took carol with it");

    let live = m.snapshot().await.unwrap();
    projector::rebuild(&env.log, m).await.unwrap();
    let rebuilt = m.snapshot().await.unwrap();
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
}

/// One correlation id across two parties and a bystander: alice's conversation holds what she
/// sent and received with it (archived rows too), oldest first, paged strictly after a row.
async fn a_conversation_is_both_roles_oldest_first_archived_too(env: Env) {
    let m = &env.models;
    let t0 = Utc::now() - Duration::minutes(10);
    let at = |s: i64| t0 + Duration::seconds(s);
    let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    let events = vec![
        member_sent(ids[0], "alice", "bob", None, at(1)),
        member_sent(ids[1], "bob", "alice", None, at(2)),
        member_sent(ids[2], "bob", "carol", None, at(3)),
        sent(ids[3], "alice", "bob", Category::Info, at(4), Duration::hours(1)),
        member_sent(ids[4], "carol", "alice", None, at(5)),
        recalled(ids[0], "alice", at(6)),
    ];
    let seqs = env.append_all(&events).await;
    assert!(m.apply_stored(&stored(seqs[0], events.clone()), seqs[0] - 1).await.unwrap());
    assert_eq!(m.archive(Utc::now(), 10).await.unwrap(), 1, "the recalled one is history");

    let page = |identity: &str, role, status, limit, after| Conversation {
        tenant: TENANT.into(),
        identity: identity.into(),
        correlation_id: "review-7".into(),
        role,
        status,
        limit,
        after,
    };
    let ids_of = |rows: &[projector::queries::SignalRow]| rows.iter().map(|r| r.id).collect::<Vec<_>>();
    let all = m.conversation(&page("alice", None, None, 10, None)).await.unwrap();
    assert_eq!(ids_of(&all), [ids[0], ids[1], ids[4]], "both roles, oldest first, not bob's talk with carol");
    let first = m.conversation(&page("alice", None, None, 2, None)).await.unwrap();
    let after = first.last().map(|r| (r.created_at, r.id));
    let rest = m.conversation(&page("alice", None, None, 2, after)).await.unwrap();
    assert_eq!((ids_of(&first), ids_of(&rest)), (vec![ids[0], ids[1]], vec![ids[4]]));
    let got = m.conversation(&page("alice", Some(Role::Received), None, 10, None)).await.unwrap();
    assert_eq!(ids_of(&got), [ids[1], ids[4]]);
    let got = m.conversation(&page("alice", Some(Role::Sent), Some(StatusFilter::Recalled), 10, None)).await.unwrap();
    assert_eq!(ids_of(&got), [ids[0]]);
    let got = m.conversation(&page("bob", None, None, 10, None)).await.unwrap();
    assert_eq!(ids_of(&got), [ids[0], ids[1], ids[2]]);
    let mut other = page("alice", None, None, 10, None);
    other.tenant = "other".into();
    assert!(m.conversation(&other).await.unwrap().is_empty(), "tenants apart");
}
