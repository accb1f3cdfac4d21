//! The `directives` read model on both backends: directives driven through the real store
//! (`SignalStore::execute_directive`) onto a real log, projected one event per batch (every
//! row patched by later batches) and then rebuilt from the stream (every row written at once):
//! the rows say what the directive object says, the queries find them by role, status, type
//! and deadline, the rebuild equals the live tables, and retention drops only ended rows.
//!
//! Deliberately mocks nothing.

mod support;

use bus::directive::{directive_id_for, CreateDirective, DirectiveCommand};
use bus::store::SignalStore;
use chrono::{DateTime, Duration, Utc};
use projector::queries::{DirectiveFilter, DirectiveRole, ListDirectives};
use projector::Queries;
use serde_json::json;
use support::{Env, TENANT};
use uuid::Uuid;

struct Run {
    store: SignalStore,
    now: DateTime<Utc>,
}

impl Run {
    async fn create(&mut self, issuer: &str, key: &str, to: &str, deadline_seconds: u64) -> Uuid {
        self.now += Duration::seconds(1);
        let id = directive_id_for(TENANT, issuer, key);
        let members = ["alice", "bob", "carol", "dave"].map(String::from).to_vec();
        let c = CreateDirective {
            directive_id: id,
            issuer: issuer.into(),
            to: to.into(),
            members,
            directive_type: if to.starts_with('@') { "fleet.sweep" } else { "package.install" }.into(),
            params: json!({"name": key, "db": {"password": "hunter2"}}),
            idempotency_key: key.into(),
            deadline_seconds,
            correlation_id: Some(format!("corr-{key}")),
        };
        self.run(id, DirectiveCommand::Create(Box::new(c)), issuer).await;
        id
    }

    async fn run(&self, id: Uuid, command: DirectiveCommand, actor: &str) {
        let done = self.store.execute_directive(TENANT, id, &command, actor, self.now).await.unwrap();
        assert!(done.appended.is_some(), "{command:?} appends");
    }
}

fn list(caller: &str, role: Option<DirectiveRole>, status: Option<DirectiveFilter>) -> ListDirectives {
    ListDirectives {
        tenant: TENANT.into(),
        caller: caller.into(),
        role,
        status,
        directive_type: None,
        limit: 100,
        before: None,
    }
}

async fn a_directives_life_lands_as_rows_and_a_rebuild_equals_live(env: Env) {
    let m = &env.models;
    let mut r = Run { store: SignalStore::new(env.log.clone()), now: Utc::now() - Duration::minutes(10) };
    let by = |who: &str| who.to_string();
    let done = r.create("alice", "d1", "bob", 3600).await;
    r.run(done, DirectiveCommand::Start { by: by("bob") }, "bob").await;
    let progress = DirectiveCommand::Progress { by: by("bob"), message: Some("half".into()), percent: Some(40) };
    r.run(done, progress, "bob").await;
    r.run(done, DirectiveCommand::Complete { by: by("bob"), result: json!({"ok": true}) }, "bob").await;
    let rejected = r.create("alice", "d2", "@crew", 3600).await;
    for who in ["carol", "dave", "bob"] {
        let reason = (who == "bob").then(|| "busy".to_string());
        r.run(rejected, DirectiveCommand::Reject { by: by(who), reason }, who).await;
    }
    let canceled = r.create("alice", "d3", "@crew", 3600).await;
    r.run(canceled, DirectiveCommand::Cancel { by: by("alice"), reason: Some("nope".into()) }, "alice").await;
    let expired = r.create("bob", "d4", "carol", 1).await;
    let failed = r.create("alice", "d5", "@crew", 3600).await;
    let fail = DirectiveCommand::Fail { by: by("carol"), code: "E1".into(), message: "disk full".into() };
    r.run(failed, fail, "carol").await;
    let open = r.create("alice", "d6", "bob", 3600).await;
    r.now += Duration::seconds(5);
    r.run(expired, DirectiveCommand::Expire, "signalbus").await;

    // One event per batch: every transition is a patch of a row an earlier batch wrote.
    let events = env.log.read(1, 1000).await.unwrap();
    assert_eq!(events.len(), 15);
    for (i, e) in events.iter().enumerate() {
        assert!(m.apply_stored(std::slice::from_ref(e), i as u64).await.unwrap(), "batch {i}");
    }

    let d1 = m.directive(TENANT, done).await.unwrap().unwrap();
    assert_eq!((d1.status.as_str(), d1.claimed_by.as_deref()), ("completed", Some("bob")));
    assert_eq!(d1.params, json!({"name": "d1", "db": {"password": "[REDACTED]"}}), "params as stored, redacted");
    assert_eq!(d1.result, Some(json!({"ok": true})));
    assert_eq!(d1.progress.as_ref().map(|p| p["percent"].clone()), Some(json!(40)));
    assert!(d1.started_at.is_some() && d1.finished_at.is_some());
    assert_eq!((d1.candidates.clone(), d1.correlation_id.as_deref()), (vec![by("bob")], Some("corr-d1")));
    assert_eq!(d1.last_event_seq, 4);

    let d2 = m.directive(TENANT, rejected).await.unwrap().unwrap();
    assert_eq!(d2.status, "rejected");
    assert_eq!(d2.declined_by, ["carol", "dave", "bob"], "declines in the order they were made");
    assert_eq!((d2.reason.as_deref(), d2.claimed_by.as_deref()), (Some("busy"), None));
    assert_eq!(d2.candidates, ["bob", "carol", "dave"], "the group's members less the issuer");
    let d3 = m.directive(TENANT, canceled).await.unwrap().unwrap();
    assert_eq!((d3.status.as_str(), d3.reason.as_deref()), ("canceled", Some("nope")));
    let d4 = m.directive(TENANT, expired).await.unwrap().unwrap();
    assert_eq!((d4.status.as_str(), d4.issuer.as_str()), ("expired", "bob"));
    let d5 = m.directive(TENANT, failed).await.unwrap().unwrap();
    assert_eq!((d5.status.as_str(), d5.claimed_by.as_deref()), ("failed", Some("carol")), "failing claims it");
    assert_eq!(d5.failure, Some(json!({"code": "E1", "message": "disk full"})));
    assert_eq!(m.directive(TENANT, open).await.unwrap().unwrap().status, "requested");
    assert!(m.directive("other", open).await.unwrap().is_none(), "tenants apart");
    assert!(m.directive(TENANT, Uuid::new_v4()).await.unwrap().is_none());

    let ids =
        |rows: Vec<projector::queries::DirectiveRow>| rows.into_iter().map(|r| r.directive_id).collect::<Vec<_>>();
    let carol = ids(m.list_directives(&list("carol", Some(DirectiveRole::Assigned), None)).await.unwrap());
    assert_eq!(carol, [failed, expired, canceled, rejected], "assigned includes group candidates, newest first");
    let alice = ids(m.list_directives(&list("alice", Some(DirectiveRole::Issued), None)).await.unwrap());
    assert_eq!(alice, [open, failed, canceled, rejected, done]);
    let alice_open = list("alice", Some(DirectiveRole::Issued), Some(DirectiveFilter::Open));
    assert_eq!(ids(m.list_directives(&alice_open).await.unwrap()), [open]);
    let bob_all = ids(m.list_directives(&list("bob", None, None)).await.unwrap());
    assert_eq!(bob_all, [open, failed, expired, canceled, rejected, done], "issued or assigned");
    let status = DirectiveFilter::parse("completed");
    assert_eq!(ids(m.list_directives(&list("bob", Some(DirectiveRole::Assigned), status)).await.unwrap()), [done]);
    let mut typed = list("bob", None, None);
    typed.directive_type = Some("fleet.sweep".into());
    assert_eq!(ids(m.list_directives(&typed).await.unwrap()), [failed, canceled, rejected]);
    let mut page = list("alice", Some(DirectiveRole::Issued), None);
    page.limit = 2;
    let first = m.list_directives(&page).await.unwrap();
    page.before = first.last().map(|r| (r.created_at, r.directive_id));
    let second = ids(m.list_directives(&page).await.unwrap());
    assert_eq!((ids(first), second), (vec![open, failed], vec![canceled, rejected]), "pages by (created_at, id)");
    assert!(m.list_directives(&list("mallory", None, None)).await.unwrap().is_empty());

    let far = Utc::now() + Duration::days(2);
    let overdue = m.overdue_directives(far, None, 10).await.unwrap();
    assert_eq!(overdue.iter().map(|o| o.directive_id).collect::<Vec<_>>(), [open], "only open ones are overdue");
    assert!(m.overdue_directives(Utc::now(), None, 10).await.unwrap().is_empty(), "not before the deadline");
    let after = overdue.first().map(|o| (o.deadline, o.directive_id));
    assert!(m.overdue_directives(far, after, 10).await.unwrap().is_empty(), "the keyset moves past it");

    let live = m.snapshot().await.unwrap();
    assert_eq!(live.tables["directives"].len(), 6);
    assert_eq!(live.tables["directive_candidates"].len(), 12);
    let rebuilt = projector::rebuild(&env.log, m).await.unwrap();
    assert_eq!(rebuilt.last_seq, 15);
    let after_rebuild = m.snapshot().await.unwrap();
    assert!(live == after_rebuild, "a rebuild equals the live tables:\n{}", live.diff(&after_rebuild));

    // Retention: ended rows age out with the stream; the open one stays.
    let purged = m.purge_history(far, 2).await.unwrap();
    assert_eq!(purged, 5);
    let left = m.snapshot().await.unwrap();
    assert_eq!(left.tables["directives"].len(), 1);
    assert_eq!(left.tables["directive_candidates"].len(), 1);
    assert!(m.directive(TENANT, open).await.unwrap().is_some());
}

both_backends!(a_directives_life_lands_as_rows_and_a_rebuild_equals_live);
