//! Tests of what the event catalog decides beside the events' shapes: the subject each event is
//! stored on. Deliberately no codec round trips: `codec.rs` has those.

use chrono::Utc;

use super::*;

fn subject(body: EventBody) -> String {
    Subjects::new("sb").for_event(&Event::new("default", None, Utc::now(), body))
}

#[test]
fn every_event_of_a_directive_or_a_group_shares_its_entitys_subject() {
    let id = Uuid::from_u128(0x3333);
    let started = EventBody::DirectiveStarted(DirectiveStarted { directive_id: id, by: "bob".into(), at: Utc::now() });
    assert_eq!(subject(started), format!("sb.default.dir.{}", id.simple()));
    let added = EventBody::GroupMemberAdded(GroupMemberAdded {
        group: "@build.ci".into(),
        identity: "bob".into(),
        added_by: "admin".into(),
    });
    let updated = EventBody::GroupUpdated(GroupUpdated { group: "@build.ci".into(), self_join: true, announce: false });
    assert_eq!(subject(added), "sb.default.group.build~2Eci");
    assert_eq!(subject(updated), "sb.default.group.build~2Eci");
}
