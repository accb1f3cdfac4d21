"""Typed answers of the bus (CONTRACT §4, §5, §6, §8, §10, §14, §15, §16)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Mapping, Optional, Union

# Only the leaf error_base: errors.py sits above this module and builds the typed errors.
from .error_base import ProtocolError, SignalbusError

DeliveryClass = Literal["sync", "async"]
RecipientState = Literal["available", "not_available_stale", "not_available_offline"]
PublishPath = Literal["pushed_to_ws", "buffered_for_piggyback", "queued_offline", "scheduled"]
# CONTRACT §16: why a signal expired — its TTL ran out (the sweeper), or an admin forced it.
ExpiredReason = Literal["ttl", "forced"]
RecallOutcome = Literal["recalled", "already_delivered", "already_expired", "not_found"]
SessionKind = Literal["daemon", "shim", "interactive"]
DirectiveStatus = Literal["requested", "started", "completed", "failed", "rejected", "canceled", "expired"]

# CONTRACT §14: the states a directive never leaves.
TERMINAL_STATUSES = frozenset({"completed", "failed", "rejected", "canceled", "expired"})

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(value: Any) -> Optional[datetime]:
    """RFC 3339 → aware datetime (any number of fraction digits, ``Z`` or an offset)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"expected an RFC 3339 string, got {value!r}")
    text = value.strip().replace("z", "Z")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def format_time(value: datetime) -> str:
    """An aware datetime → RFC 3339 in UTC, milliseconds, ``Z`` (as the bus writes them)."""
    utc = value.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _req(obj: Mapping[str, Any], key: str) -> Any:
    if key not in obj:
        raise ProtocolError(f"the bus's answer lacks {key!r}: {dict(obj)!r}")
    return obj[key]


@dataclass(frozen=True)
class Welcome:
    session_id: str
    tenant: str
    identity: str
    heartbeat_interval_ms: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Welcome":
        return cls(
            session_id=_req(obj, "session_id"),
            tenant=_req(obj, "tenant"),
            identity=_req(obj, "identity"),
            heartbeat_interval_ms=int(obj.get("heartbeat_interval_ms") or 15000),
        )


@dataclass(frozen=True)
class Signal:
    """A signal as pushed or drained (CONTRACT §5 push frame)."""

    id: str
    from_: str
    to: str
    type: str
    category: str
    priority: int
    payload: Any
    delivery_class: DeliveryClass
    created_at: datetime
    expires_at: datetime
    correlation_id: Optional[str] = None
    redelivered: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Signal":
        return cls(
            id=_req(obj, "id"),
            from_=_req(obj, "from"),
            to=_req(obj, "to"),
            type=_req(obj, "type"),
            category=obj.get("category", ""),
            priority=int(obj.get("priority", 0)),
            payload=obj.get("payload"),
            delivery_class=obj.get("delivery_class", "async"),
            created_at=parse_time(_req(obj, "created_at")),  # type: ignore[arg-type]
            expires_at=parse_time(_req(obj, "expires_at")),  # type: ignore[arg-type]
            correlation_id=obj.get("correlation_id"),
            redelivered=bool(obj.get("redelivered", False)),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class SendResult:
    """The bus accepted the send (CONTRACT §4). ``dedupe_key`` is the key the send carried
    (the caller's, or one the client generated). A scheduled send (CONTRACT §16) is answered
    ``queued``, ``publish_path`` ``"scheduled"``, with ``deliver_at``: when the bus hands it over
    (``None`` for a send that was not scheduled)."""

    signal_id: str
    delivered: bool
    queued: bool
    recipient_state: RecipientState
    delivery_class: DeliveryClass
    created_at: datetime
    expires_at: datetime
    resolved_to_session: Optional[str]
    publish_path: PublishPath
    redacted: list[str] = field(default_factory=list)
    dedupe_key: Optional[str] = None
    deliver_at: Optional[datetime] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    spooled = False

    @property
    def scheduled(self) -> bool:
        """The bus holds it until ``deliver_at`` (``publish_path == "scheduled"``)."""
        return self.publish_path == "scheduled"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], dedupe_key: Optional[str] = None) -> "SendResult":
        return cls(
            signal_id=_req(obj, "signal_id"),
            delivered=bool(obj.get("delivered", False)),
            queued=bool(obj.get("queued", False)),
            recipient_state=_req(obj, "recipient_state"),
            delivery_class=_req(obj, "delivery_class"),
            created_at=parse_time(_req(obj, "created_at")),  # type: ignore[arg-type]
            expires_at=parse_time(_req(obj, "expires_at")),  # type: ignore[arg-type]
            resolved_to_session=obj.get("resolved_to_session"),
            publish_path=_req(obj, "publish_path"),
            redacted=list(obj.get("redacted") or []),
            dedupe_key=dedupe_key,
            deliver_at=parse_time(obj.get("deliver_at")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class Spooled:
    """The bus was unreachable or answered 503: the send waits in the local spool and is
    replayed (with ``dedupe_key``, so it can never create a second signal) when the bus is back.
    ``reason`` says why it was spooled; ``entry`` is the spool file's name."""

    dedupe_key: str
    entry: str
    reason: str
    spooled_at: datetime
    ttl_seconds: int

    spooled = True

    @property
    def signal_id(self) -> None:
        """No signal yet: the bus gives it an id when the replay is accepted (``on_replay``).
        Like TypeScript's ``signalId: null`` and Rust's ``SendOutcome::signal_id() == None``."""
        return None


# Builds the typed error of a bus error object (``errors.error_from_body``).
ErrorParser = Callable[[dict[str, Any]], SignalbusError]


@dataclass(frozen=True)
class MemberResult:
    """One member's part of a send to a group (CONTRACT §15): accepted (``signal_id``, and the
    §4 answer's ``delivered``, ``queued``, ...) or not (``error``: the typed error of that
    member alone — ``RecipientUnavailable`` with the bounce's ``.signal_id``,
    ``UnknownRecipient``, ``Unavailable``: not accepted, ...)."""

    to: str
    signal_id: Optional[str] = None
    delivered: bool = False
    queued: bool = False
    recipient_state: Optional[str] = None
    publish_path: Optional[str] = None
    deliver_at: Optional[datetime] = None
    error: Optional[SignalbusError] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The bus accepted this member's signal."""
        return self.error is None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, error_of: ErrorParser) -> "MemberResult":
        """``error_of`` builds a member's typed error from its error object (``errors.py``'s
        ``error_from_body``: this module is below ``errors`` and does not import it)."""
        err = obj.get("error")
        if isinstance(err, Mapping):
            to = _req(obj, "to")
            body = dict(err)
            body.setdefault("message", f"the signal to {to} was not accepted ({body.get('code', 'error')})")
            return cls(to=to, error=error_of(body), raw=dict(obj))
        return cls(
            to=_req(obj, "to"),
            signal_id=_req(obj, "signal_id"),
            delivered=bool(obj.get("delivered", False)),
            queued=bool(obj.get("queued", False)),
            recipient_state=obj.get("recipient_state"),
            publish_path=obj.get("publish_path"),
            deliver_at=parse_time(obj.get("deliver_at")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class FanoutResult:
    """The answer to a send to a group (``to="@name"``, CONTRACT §15): one ``MemberResult`` per
    member other than the sender, sorted by identity, all under one ``fanout_id`` (recall them
    together with ``recall_many(fanout_id=...)``). Each entry is true on its own: some members may
    be accepted while others bounced. Repeating the send with its ``dedupe_key`` answers the same
    signals and sends to nobody twice."""

    fanout_id: str
    to: str
    results: list[MemberResult]
    dedupe_key: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    spooled = False

    @property
    def signal_id(self) -> None:
        """No single signal: one per member (``results[i].signal_id``). Like ``Spooled``'s."""
        return None

    @property
    def signal_ids(self) -> list[str]:
        """The accepted members' signal ids."""
        return [r.signal_id for r in self.results if r.signal_id is not None]

    def result_for(self, identity: str) -> Optional[MemberResult]:
        """The entry of ``identity``, if it was a member."""
        return next((r for r in self.results if r.to == identity), None)

    @classmethod
    def from_json(
        cls, obj: Mapping[str, Any], dedupe_key: Optional[str] = None, *, error_of: ErrorParser
    ) -> "FanoutResult":
        """``error_of``: as ``MemberResult.from_json``'s (``errors.error_from_body``)."""
        return cls(
            fanout_id=_req(obj, "fanout_id"),
            to=_req(obj, "to"),
            results=[MemberResult.from_json(r, error_of=error_of) for r in obj.get("results") or []],
            dedupe_key=dedupe_key,
            raw=dict(obj),
        )


# What ``send`` answers: ``SendResult`` (an identity), ``Spooled`` (kept for later) or
# ``FanoutResult`` (a group). Each has ``.spooled``, ``.dedupe_key`` and ``.signal_id`` (``None``
# unless a single signal was accepted).
SendOutcome = Union[SendResult, Spooled, FanoutResult]


@dataclass(frozen=True)
class RecallResult:
    outcome: RecallOutcome

    @property
    def recalled(self) -> bool:
        return self.outcome == "recalled"


@dataclass(frozen=True)
class RecallEntry:
    """One signal of a ``recall_many``: what became of it (CONTRACT §6 outcomes)."""

    signal_id: str
    to: str
    outcome: RecallOutcome

    @property
    def recalled(self) -> bool:
        return self.outcome == "recalled"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "RecallEntry":
        return cls(signal_id=_req(obj, "signal_id"), to=obj.get("to", ""), outcome=_req(obj, "outcome"))


@dataclass(frozen=True)
class SignalRow:
    """A signal's row (CONTRACT §10 columns), from ``get``, ``list`` and ``conversation``.
    ``deliver_at`` is set for a scheduled signal (CONTRACT §16); ``expired_reason`` says why an
    expired one expired: ``"ttl"`` (its TTL ran out) or ``"forced"`` (an admin's
    ``expire_signals``), ``None`` while it has not."""

    id: str
    tenant: str
    from_identity: str
    to_identity: str
    signal_type: str
    category: str
    priority: int
    payload: Any
    delivery_class: DeliveryClass
    recipient_state: Optional[str]
    publish_path: Optional[str]
    correlation_id: Optional[str]
    created_at: datetime
    expires_at: datetime
    delivered_at: Optional[datetime] = None
    expired_at: Optional[datetime] = None
    recalled_at: Optional[datetime] = None
    delivered_via: Optional[str] = None
    resolved_to_session: Optional[str] = None
    acked_at: Optional[datetime] = None
    deliver_at: Optional[datetime] = None
    expired_reason: Optional[ExpiredReason] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def status(self) -> str:
        """``pending``, ``delivered``, ``expired`` or ``recalled``."""
        if self.delivered_at is not None:
            return "delivered"
        if self.recalled_at is not None:
            return "recalled"
        if self.expired_at is not None:
            return "expired"
        return "pending"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "SignalRow":
        return cls(
            id=_req(obj, "id"),
            tenant=obj.get("tenant", ""),
            from_identity=_req(obj, "from_identity"),
            to_identity=_req(obj, "to_identity"),
            signal_type=_req(obj, "signal_type"),
            category=obj.get("category", ""),
            priority=int(obj.get("priority", 0)),
            payload=obj.get("payload"),
            delivery_class=obj.get("delivery_class", "async"),
            recipient_state=obj.get("recipient_state"),
            publish_path=obj.get("publish_path"),
            correlation_id=obj.get("correlation_id"),
            created_at=parse_time(_req(obj, "created_at")),  # type: ignore[arg-type]
            expires_at=parse_time(_req(obj, "expires_at")),  # type: ignore[arg-type]
            delivered_at=parse_time(obj.get("delivered_at")),
            expired_at=parse_time(obj.get("expired_at")),
            recalled_at=parse_time(obj.get("recalled_at")),
            delivered_via=obj.get("delivered_via"),
            resolved_to_session=obj.get("resolved_to_session"),
            acked_at=parse_time(obj.get("acked_at")),
            deliver_at=parse_time(obj.get("deliver_at")),
            expired_reason=obj.get("expired_reason"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class SignalPage:
    """One page of ``list`` (newest first) or ``conversation`` (oldest first); pass
    ``cursor=next_cursor`` for the next (``None``: the last page)."""

    signals: list[SignalRow]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class DirectiveProgress:
    """The claimer's latest progress report."""

    message: Optional[str]
    percent: Optional[int]
    at: Optional[datetime]


@dataclass(frozen=True)
class DirectiveFailure:
    """Why the worker failed the directive (``on_directive``: ``code`` is the exception's class)."""

    code: str
    message: str


@dataclass(frozen=True)
class Directive:
    """A directive (CONTRACT §14): work asked of an assignee — an identity, or any one member of
    a ``@group`` — with its lifecycle. The answer of every directive call, and the payload of
    every lifecycle signal (``Directive.from_json(sig.payload)``).

    ``created`` is ``True`` when ``create_directive`` made it (201) and ``False`` for an
    idempotent repeat (200: the existing directive, as it is now) or any other answer.
    """

    directive_id: str
    type: str
    issuer: str
    assignee: str
    status: DirectiveStatus
    params: Mapping[str, Any]
    created_at: datetime
    deadline: datetime
    idempotency_key: str
    claimed_by: Optional[str] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    progress: Optional[DirectiveProgress] = None
    result: Optional[Mapping[str, Any]] = None
    failure: Optional[DirectiveFailure] = None
    reason: Optional[str] = None
    declined_by: list[str] = field(default_factory=list)
    correlation_id: Optional[str] = None
    redacted: list[str] = field(default_factory=list)
    created: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.directive_id

    @property
    def terminal(self) -> bool:
        """It ended (completed, failed, rejected, canceled or expired): final."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], created: bool = False) -> "Directive":
        progress = obj.get("progress")
        failure = obj.get("failure")
        result = obj.get("result")
        return cls(
            directive_id=_req(obj, "directive_id"),
            type=_req(obj, "type"),
            issuer=_req(obj, "issuer"),
            assignee=_req(obj, "assignee"),
            status=_req(obj, "status"),
            params=dict(obj.get("params") or {}),
            created_at=parse_time(_req(obj, "created_at")),  # type: ignore[arg-type]
            deadline=parse_time(_req(obj, "deadline")),  # type: ignore[arg-type]
            idempotency_key=obj.get("idempotency_key") or "",
            claimed_by=obj.get("claimed_by"),
            started_at=parse_time(obj.get("started_at")),
            finished_at=parse_time(obj.get("finished_at")),
            progress=(
                DirectiveProgress(
                    message=progress.get("message"), percent=progress.get("percent"), at=parse_time(progress.get("at"))
                )
                if isinstance(progress, Mapping)
                else None
            ),
            result=dict(result) if isinstance(result, Mapping) else None,
            failure=(
                DirectiveFailure(code=str(failure.get("code", "")), message=str(failure.get("message", "")))
                if isinstance(failure, Mapping)
                else None
            ),
            reason=obj.get("reason"),
            declined_by=list(obj.get("declined_by") or []),
            correlation_id=obj.get("correlation_id"),
            redacted=list(obj.get("redacted") or []),
            created=created,
            raw=dict(obj),
        )


@dataclass(frozen=True)
class DirectivePage:
    """One page of ``list_directives``, newest first; pass ``before=next_before`` for the next."""

    directives: list[Directive]
    next_before: Optional[str]


@dataclass(frozen=True)
class GroupMember:
    identity: str
    recipient_state: Optional[str] = None
    added_at: Optional[datetime] = None
    added_by: Optional[str] = None


@dataclass(frozen=True)
class Group:
    """A group (CONTRACT §15) with its members and their recipient state. ``name`` carries the
    ``@`` (``"@reviewers"``)."""

    name: str
    self_join: bool
    announce: bool
    members: list[GroupMember]
    created_at: Optional[datetime] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def identities(self) -> list[str]:
        return [m.identity for m in self.members]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Group":
        members = []
        for m in obj.get("members") or []:
            if isinstance(m, str):  # a listing's member is a bare name
                members.append(GroupMember(identity=m))
            else:
                members.append(
                    GroupMember(
                        identity=_req(m, "identity"),
                        recipient_state=m.get("recipient_state"),
                        added_at=parse_time(m.get("added_at")),
                        added_by=m.get("added_by"),
                    )
                )
        return cls(
            name=_req(obj, "group"),
            self_join=bool(obj.get("self_join", False)),
            announce=bool(obj.get("announce", True)),
            members=members,
            created_at=parse_time(obj.get("created_at")),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class Agent:
    identity: str
    tenant: str
    kind: str
    state: RecipientState
    live_sessions: int
    last_heartbeat: Optional[datetime]
    registered_at: Optional[datetime]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], tenant: str = "") -> "Agent":
        return cls(
            identity=_req(obj, "identity"),
            tenant=obj.get("tenant", tenant),
            kind=obj.get("kind", ""),
            state=obj.get("state", "not_available_offline"),
            live_sessions=int(obj.get("live_sessions", 0)),
            last_heartbeat=parse_time(obj.get("last_heartbeat")),
            registered_at=parse_time(obj.get("registered_at")),
        )


@dataclass(frozen=True)
class Registration:
    """``register``/``rotate`` answer: the agent's token (shown once)."""

    tenant: str
    identity: str
    token: str


@dataclass(frozen=True)
class Removal:
    """``remove`` answer: what the bus did. ``signals_expired`` counts the pending signals to the
    agent that expired with it."""

    tenant: str
    identity: str
    removed_at: datetime
    signals_expired: int

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Removal":
        return cls(
            tenant=obj.get("tenant", ""),
            identity=obj.get("identity", ""),
            removed_at=parse_time(_req(obj, "removed_at")),  # type: ignore[arg-type]
            signals_expired=int(obj.get("signals_expired", 0)),
        )


@dataclass(frozen=True)
class ExpireResult:
    """``AdminClient.expire_signals`` answer (CONTRACT §16): ``expired`` pending signals were
    expired (``expired_reason: "forced"``); ``skipped`` matched but were delivered, recalled or
    expired first (each signal has one outcome)."""

    expired: int
    skipped: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    dry_run = False

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ExpireResult":
        return cls(expired=int(_req(obj, "expired")), skipped=int(obj.get("skipped", 0)), raw=dict(obj))


@dataclass(frozen=True)
class ExpireCandidate:
    """A pending signal an ``expire_signals(dry_run=True)`` matched."""

    signal_id: str
    to: str
    from_: str
    type: str
    created_at: datetime

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ExpireCandidate":
        return cls(
            signal_id=_req(obj, "signal_id"),
            to=_req(obj, "to"),
            from_=_req(obj, "from"),
            type=_req(obj, "type"),
            created_at=parse_time(_req(obj, "created_at")),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class ExpirePreview:
    """``AdminClient.expire_signals(dry_run=True)`` answer: what the call would expire
    (``would_expire``, ``count`` of them); nothing was expired."""

    would_expire: list[ExpireCandidate]
    count: int
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    dry_run = True

    @property
    def signal_ids(self) -> list[str]:
        return [c.signal_id for c in self.would_expire]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ExpirePreview":
        would = [ExpireCandidate.from_json(c) for c in obj.get("would_expire") or []]
        return cls(would_expire=would, count=int(obj.get("count", len(would))), raw=dict(obj))


@dataclass(frozen=True)
class PluginState:
    plugin: str
    state: Any
    seq: int
    updated_at: Optional[datetime]


@dataclass(frozen=True)
class Fact:
    seq: int
    fact_type: str
    state: Any
    recorded_by: str
    created_at: Optional[datetime]


@dataclass(frozen=True)
class FactPage:
    facts: list[Fact]
    next_before_seq: Optional[int]


# CONTRACT §3: the type's default TTL, used to compute a spooled send's remaining TTL when the
# caller gave none. A deployment that overrides type defaults should pass ttl_seconds explicitly.
DEFAULT_TTL_SECONDS: dict[str, int] = {
    "Blocker": 4 * 3600,
    "Question": 3600,
    "ReviewRequested": 24 * 3600,
    "TaskAssigned": 7 * 24 * 3600,
    "TaskCompleted": 24 * 3600,
    "StatusUpdate": 24 * 3600,
    "Acknowledgment": 3600,
    "MasterPreempted": 120,
    "PeerJoined": 300,
    "PeerLeft": 300,
}
FALLBACK_TTL_SECONDS = 24 * 3600


# CONTRACT §3: the types whose default delivery class is sync (every other type is async).
SYNC_BY_DEFAULT = frozenset({"Blocker", "Question"})


def default_class(signal_type: str) -> str:
    """The delivery class the bus gives a send of ``signal_type`` that names none."""
    return "sync" if signal_type in SYNC_BY_DEFAULT else "async"


def default_ttl(signal_type: str) -> int:
    return DEFAULT_TTL_SECONDS.get(signal_type, FALLBACK_TTL_SECONDS)
