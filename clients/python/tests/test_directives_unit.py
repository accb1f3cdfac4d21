"""The pure parts of directives and groups (no bus): typed answers, error mapping, patterns."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from signalbus_client import (
    AlreadyClaimed,
    Directive,
    DirectiveCanceled,
    DirectiveEnded,
    DirectiveExpired,
    DirectiveFailed,
    DirectiveRejected,
    FanoutResult,
    Group,
    IdempotencyConflict,
    InvalidTransition,
    RecipientUnavailable,
    SignalbusError,
    UnknownGroup,
)
from signalbus_client.directives import Directives, outcome_of, result_object
from signalbus_client.errors import error_from_body


def directive(**fields: Any) -> Dict[str, Any]:
    base: Dict[str, Any] = {
        "directive_id": "7a1d4c3e-0000-4000-8000-000000000001",
        "type": "package.install",
        "issuer": "alice",
        "assignee": "bob",
        "claimed_by": None,
        "params": {"name": "jq"},
        "status": "requested",
        "created_at": "2026-05-03T12:00:00.123456789Z",
        "deadline": "2026-05-04T12:00:00Z",
        "started_at": None,
        "finished_at": None,
        "progress": None,
        "result": None,
        "failure": None,
        "reason": None,
        "declined_by": [],
        "correlation_id": None,
        "idempotency_key": "k-1",
        "redacted": [],
    }
    base.update(fields)
    return base


def test_directive_object_is_typed() -> None:
    d = Directive.from_json(
        directive(
            status="failed",
            claimed_by="bob",
            progress={"message": "half", "percent": 50, "at": "2026-05-03T12:00:01Z"},
            failure={"code": "ValueError", "message": "no"},
        ),
        created=True,
    )
    assert d.created and d.terminal and d.id == d.directive_id
    assert d.progress is not None and (d.progress.percent, d.progress.message) == (50, "half")
    assert d.failure is not None and (d.failure.code, d.failure.message) == ("ValueError", "no")
    assert d.created_at.tzinfo is not None and d.created_at.microsecond == 123456
    assert not Directive.from_json(directive()).terminal


def test_a_run_answers_the_result_or_the_ended_error() -> None:
    assert outcome_of(Directive.from_json(directive(status="completed", result={"ok": True}))) == {"ok": True}
    for status, cls in (
        ("failed", DirectiveFailed),
        ("rejected", DirectiveRejected),
        ("expired", DirectiveExpired),
        ("canceled", DirectiveCanceled),
    ):
        ended = Directive.from_json(directive(status=status, reason="r"))
        with pytest.raises(cls) as raised:
            outcome_of(ended)
        assert isinstance(raised.value, DirectiveEnded) and isinstance(raised.value, SignalbusError)
        assert raised.value.directive is ended and raised.value.directive_id == ended.directive_id
        assert raised.value.code == f"directive_{status}"
    with pytest.raises(ValueError):
        outcome_of(Directive.from_json(directive(status="started")))


def test_a_handlers_value_becomes_a_result_object() -> None:
    assert result_object({"a": 1}) == {"a": 1}
    assert result_object(7) == {"value": 7}
    assert result_object([1, 2]) == {"value": [1, 2]}
    assert result_object("done") == {"value": "done"}
    assert result_object(None) == {}


def test_directive_and_group_errors_come_from_their_codes() -> None:
    invalid = error_from_body({"error": {"code": "invalid_transition", "message": "m", "directive": directive(status="completed")}}, 409)
    assert isinstance(invalid, InvalidTransition) and invalid.directive is not None and invalid.directive.status == "completed"
    claimed = error_from_body({"code": "already_claimed", "message": "m", "claimed_by": "m1"})
    assert isinstance(claimed, AlreadyClaimed) and claimed.claimed_by == "m1" and claimed.status == 409
    conflict = error_from_body({"code": "idempotency_conflict", "message": "m", "directive_id": "x"})
    assert isinstance(conflict, IdempotencyConflict) and conflict.directive_id == "x" and conflict.status == 409
    group = error_from_body({"code": "unknown_group", "message": "m"})
    assert isinstance(group, UnknownGroup) and group.status == 404


def test_fanout_answer_is_typed() -> None:
    out = FanoutResult.from_json(
        {
            "fanout_id": "f",
            "to": "@reviewers",
            "results": [
                {"to": "bob", "signal_id": "s1", "delivered": True, "queued": False, "recipient_state": "available", "publish_path": "pushed_to_ws"},
                {"to": "carol", "error": {"code": "recipient_unavailable", "recipient_state": "not_available_offline", "signal_id": "s2"}},
                {"to": "dave", "error": {"code": "unavailable"}},
            ],
        },
        "key",
        error_of=error_from_body,
    )
    assert out.signal_ids == ["s1"] and out.signal_id is None and not out.spooled and out.dedupe_key == "key"
    bob, carol, dave = out.results
    assert bob.ok and bob.delivered and bob.publish_path == "pushed_to_ws"
    assert isinstance(carol.error, RecipientUnavailable) and carol.error.signal_id == "s2" and not carol.ok
    assert carol.error.recipient_state == "not_available_offline" and "carol" in carol.error.message
    assert dave.error is not None and dave.error.code == "unavailable" and out.result_for("dave") is dave


def test_group_listing_and_detail_share_one_type() -> None:
    listed = Group.from_json({"group": "@r", "members": ["bob", "carol"], "self_join": True, "announce": False})
    assert (listed.name, listed.identities, listed.self_join, listed.announce) == ("@r", ["bob", "carol"], True, False)
    detail = Group.from_json(
        {
            "group": "@r",
            "self_join": False,
            "announce": True,
            "created_at": "2026-05-03T12:00:00Z",
            "members": [{"identity": "bob", "recipient_state": "available", "added_at": "2026-05-03T12:00:00Z", "added_by": "admin"}],
        }
    )
    assert detail.members[0].recipient_state == "available" and detail.members[0].added_by == "admin"


def test_the_most_specific_pattern_serves_a_type() -> None:
    registry = Directives.__new__(Directives)
    registry._workers = {}  # type: ignore[attr-defined]

    def a(d: Directive, p: Any) -> None: ...
    def b(d: Directive, p: Any) -> None: ...
    def c(d: Directive, p: Any) -> None: ...

    registry._workers.update({"*": a, "package.*": b, "package.install": c})  # type: ignore[attr-defined]
    assert registry.handler_for("package.install") is c
    assert registry.handler_for("package.remove") is b
    assert registry.handler_for("deploy.run") is a
    registry._workers.pop("*")  # type: ignore[attr-defined]
    assert registry.handler_for("deploy.run") is None
