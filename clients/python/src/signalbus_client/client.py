"""The agent's ``Client``, a thin facade: it shapes each call (send, ask, recall, ack, inbox,
facts, directives, groups, ...) and hands it to the engine below — the session (``session.py``:
transport, supervisor; ``delivery.py``: dedupe, dispatch, acks), the HTTP API (``http.py``),
the spool replay (``replay.py``) and the directive waits and workers (``directives.py``).

Deliberately no protocol here: the engine modules never import this one, so each layer is read
and tested alone. The admin calls are ``admin.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Union
from urllib.parse import quote

import httpx

from .admin import AdminClient
from .errors import (
    NOTHING_SENT,
    AskTimeout,
    ClientClosed,
    SignalbusError,
    TransportError,
    Unavailable,
    UsageError,
    error_from_body,
    for_send,
)
from .directives import DirectiveHandler, Directives
from .http import HttpApi, clean, group_path
from .replay import Replayer, ReplayCallback, ReplayOutcome, ReplayReport, SpoolExpired
from .delivery import Handler
from .session import Session
from .spool import DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES, Spool
from .types import (
    Agent,
    Directive,
    DirectivePage,
    Fact,
    FactPage,
    FanoutResult,
    Group,
    PluginState,
    RecallEntry,
    RecallResult,
    SendOutcome,
    SendResult,
    Signal,
    SignalPage,
    SignalRow,
    Welcome,
    default_class,
    format_time,
    parse_time,
)

log = logging.getLogger("signalbus_client")

# A connection event callback: called with no argument; may be a coroutine function.
ConnectionCallback = Callable[[], Union[None, Awaitable[None]]]


def _log_callback_failure(task: "asyncio.Future[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a connection event callback failed: %r", task.exception())


# CONTRACT §16: the longest an inbox call may wait, in seconds.
MAX_INBOX_WAIT = 60


def seconds_of(value: Union[float, timedelta], what: str) -> float:
    """A duration given as seconds or a ``timedelta``, as seconds (``UsageError`` otherwise)."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise UsageError(f"{what} is seconds (a number) or a timedelta, got {value!r}")


def schedule_fields(
    signal_type: str,
    delivery_class: Optional[str],
    deliver_after: Union[float, timedelta, None],
    deliver_at: Optional[datetime],
) -> Dict[str, Any]:
    """The wire fields of a scheduled send (CONTRACT §16), checked before anything is sent: at
    most one of the two, on an async send only, a positive delay (rounded up to whole seconds),
    an aware ``datetime``. Whether ``deliver_at`` lies in the future is the bus's to say (its
    clock decides: ``InvalidRequest``)."""
    if deliver_after is None and deliver_at is None:
        return {}
    if deliver_after is not None and deliver_at is not None:
        raise UsageError("a send takes deliver_after= or deliver_at=, not both")
    if (delivery_class or default_class(signal_type)) == "sync":
        raise UsageError(
            f"only an async send can be scheduled: {signal_type} is sent sync "
            "(pass delivery_class='async', or send it without deliver_after/deliver_at)"
        )
    if deliver_after is not None:
        seconds = seconds_of(deliver_after, "deliver_after")
        if not seconds > 0:
            raise UsageError(f"deliver_after must be a positive delay, got {deliver_after!r}")
        return {"deliver_after_seconds": math.ceil(seconds)}
    if not isinstance(deliver_at, datetime) or deliver_at.tzinfo is None or deliver_at.utcoffset() is None:
        raise UsageError(f"deliver_at must be a timezone-aware datetime (datetime.now(timezone.utc) + ...), got {deliver_at!r}")
    return {"deliver_at": format_time(deliver_at)}


# Names this module gave before the engine moved below it; ``signalbus_client`` exports them.
__all__ = ["AdminClient", "Client", "Handler", "ReplayCallback", "ReplayOutcome", "ReplayReport", "SpoolExpired"]


class Client:
    """An agent's client.

    ``await client.connect()`` opens a WebSocket session and keeps it open: it reconnects with
    jittered exponential backoff, heartbeats on the welcome's interval, delivers each pushed
    signal once to ``on_signal`` (redeliveries are deduped by id in a bounded window) and acks
    it after the handler returns (``auto_ack``). Without ``on_signal``, read signals with
    ``await client.receive()`` and ack them yourself.

    Connection events: ``on_connected`` (the first session opened), ``on_disconnected`` (an
    open session was lost; the client reconnects by itself), ``on_reconnected`` (a session
    opened again after a loss) and ``on_closed`` (the client stopped for good: ``close()``, or
    the bus refused the token) are called in that order, with no argument (plain or ``async``
    functions; one that raises is logged, never fatal).

    ``max_concurrent_handlers`` (default 1) is how many handler calls may run at once. With 1,
    signals are handled one after the other in the order they arrived; with more, they are
    started in that order but may finish (and be acked) in any order — a slow handler no
    longer holds back the next signal.

    Calls (send, recall, ack, fact) go over the session when it is open and over HTTP otherwise.
    With ``spool_dir``, a send the bus cannot take (unreachable, timeout, 503) is written to the
    spool and replayed newest-first once the bus is back (see ``Spool``); ``send`` then returns
    ``Spooled`` instead of raising.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        kind: Optional[str] = None,
        on_signal: Optional[Handler] = None,
        auto_ack: bool = True,
        max_concurrent_handlers: int = 1,
        spool_dir: Optional[str] = None,
        spool_max_bytes: int = DEFAULT_MAX_BYTES,
        spool_max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        replay_rate: float = 20.0,
        replay_interval: float = 5.0,
        on_replay: Optional[ReplayCallback] = None,
        identity: Optional[str] = None,
        request_timeout: float = 15.0,
        connect_timeout: float = 10.0,
        reconnect_initial: float = 0.5,
        reconnect_max: float = 30.0,
        dedupe_window: int = 10_000,
        on_connected: Optional[ConnectionCallback] = None,
        on_disconnected: Optional[ConnectionCallback] = None,
        on_reconnected: Optional[ConnectionCallback] = None,
        on_closed: Optional[ConnectionCallback] = None,
        http: Optional[httpx.AsyncClient] = None,
    ) -> None:
        if replay_rate <= 0:
            raise ValueError("replay_rate must be positive (sends per second)")
        self._api = HttpApi(url, token, request_timeout, http)
        self.url = self._api.url
        self._session = Session(
            self._api,
            token,
            kind=kind,
            handler=on_signal,
            auto_ack=auto_ack,
            identity=identity,
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
            reconnect_initial=reconnect_initial,
            reconnect_max=reconnect_max,
            dedupe_window=dedupe_window,
            max_concurrent_handlers=max_concurrent_handlers,
        )
        self._delivery = self._session.delivery
        self.spool: Optional[Spool] = (
            Spool(spool_dir, max_bytes=spool_max_bytes, max_age_seconds=spool_max_age_seconds) if spool_dir else None
        )
        self._replayer = (
            Replayer(self.spool, self._session, rate=replay_rate, interval=replay_interval, on_replay=on_replay)
            if self.spool is not None
            else None
        )
        if self._replayer is not None:
            self._session.on_open = self._replayer.wake
        self._event_callbacks: Dict[str, ConnectionCallback] = {
            name: cb
            for name, cb in (
                ("connected", on_connected),
                ("disconnected", on_disconnected),
                ("reconnected", on_reconnected),
                ("closed", on_closed),
            )
            if cb is not None
        }
        self._session.on_event = self._on_event
        self._directives = Directives(self._api, self._session)

    def _on_event(self, event: str) -> None:
        callback = self._event_callbacks.get(event)
        if callback is None:
            return
        outcome = callback()
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            task.add_done_callback(_log_callback_failure)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def identity(self) -> Optional[str]:
        return self._session.identity

    @property
    def connected(self) -> bool:
        return self._session.connected

    @property
    def welcome(self) -> Optional[Welcome]:
        return self._session.welcome

    @property
    def sessions_opened(self) -> int:
        return self._session.sessions_opened

    @property
    def duplicates_dropped(self) -> int:
        return self._delivery.duplicates_dropped

    async def __aenter__(self) -> "Client":
        try:
            await self.connect()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def start(self) -> None:
        """Start the session supervisor, the handler and the spool replay in the background;
        do not wait for the bus."""
        if self._session.closing:
            raise ClientClosed("the client is closed")
        if self._session.started:
            return
        self._session.start()
        if self._replayer is not None:
            self._replayer.start()

    async def connect(self, timeout: Optional[float] = None) -> Welcome:
        """Start (see ``start``) and wait for the first session's welcome. Raises the fatal
        error (bad token, ...) if the bus refuses the session, ``RequestTimeout`` if no
        session opened within ``timeout`` (default: connect_timeout) — the client keeps trying
        in the background until ``close()``."""
        self.start()
        return await self.wait_connected(self._session.connect_timeout if timeout is None else timeout)

    async def wait_connected(self, timeout: Optional[float] = None) -> Welcome:
        return await self._session.wait_connected(timeout)

    async def wait_disconnected(self, timeout: Optional[float] = None) -> None:
        await self._session.wait_disconnected(timeout)

    async def close(self) -> None:
        """Flush pending acks, close the session (1000) and stop every background task."""
        if self._session.closing:
            return
        await self._session.begin_close()
        await self._directives.close()
        if self._replayer is not None:
            await self._replayer.stop()
        await self._session.finish_close()
        await self._api.aclose()

    async def drop_connection(self) -> None:
        """Abort the current WebSocket without a close handshake (as a network failure would);
        the client reconnects. Meant for tests and for callers who know the link is dead."""
        self._session.drop_connection()

    async def receive(self, timeout: Optional[float] = None) -> Signal:
        """The next pushed signal (when no ``on_signal`` handler is set). Ack it with ``ack``.
        ``RequestTimeout`` (a ``TimeoutError``) when none came within ``timeout`` seconds;
        ``UsageError`` (a ``ValueError``) on a client with an ``on_signal`` handler."""
        return await self._delivery.receive(timeout)

    async def signals(self) -> AsyncIterator[Signal]:
        """Every pushed signal, as they come: ``async for sig in client.signals(): ...`` (when no
        ``on_signal`` handler is set; ack each with ``ack``, as after ``receive``). Ends when the
        client closes. ``UsageError`` (a ``ValueError``) on a client with an ``on_signal`` handler."""
        while True:
            try:
                sig = await self._delivery.receive(None)
            except ClientClosed:
                return
            yield sig

    async def replay_spool(self) -> ReplayReport:
        """Replay the spool once (see ``Replayer.replay_spool``): newest first, at most
        ``replay_rate`` sends per second; an entry is deleted once the bus answered it for good."""
        if self._replayer is None:
            return ReplayReport()
        return await self._replayer.replay_spool()

    # -- calls -----------------------------------------------------------------------------

    async def send(
        self,
        to: str,
        type: str,
        payload: Any = None,
        *,
        delivery_class: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        correlation_id: Optional[str] = None,
        dedupe_key: Optional[str] = None,
        deliver_after: Union[float, timedelta, None] = None,
        deliver_at: Optional[datetime] = None,
        spool: bool = True,
    ) -> SendOutcome:
        """Send a signal (CONTRACT §4). Every send carries a ``dedupe_key`` (a fresh one when
        none is given) so that resending it can never create a second signal.

        Scheduled (CONTRACT §16): with ``deliver_after`` (seconds or a ``timedelta``, rounded up
        to whole seconds; 30 days at most) or ``deliver_at`` (an aware ``datetime``, in the
        future) an async send is held by the bus — invisible to its recipient — until then, and
        answered ``queued`` with ``publish_path == "scheduled"`` and ``.deliver_at``; it can be
        recalled until it is delivered, and its TTL counts from ``deliver_at``. Both at once, on
        a sync send, or a delay that is not positive: ``UsageError`` before anything is sent; a
        ``deliver_at`` in the past or too far ahead: the bus's ``InvalidRequest``. Spooled like
        any async send (with its ``deliver_at``: a replay after it sends it at once).

        Returns ``SendResult`` when the bus accepted it, or ``Spooled`` when the bus was
        unreachable or unavailable and the client has a spool (``spool=False`` raises instead).
        To a group (``to="@name"``, CONTRACT §15) it returns a ``FanoutResult``: one entry per
        member, each accepted or not on its own; ``UnknownGroup`` for no such group. A send to a
        group is never spooled (retry it with the same ``dedupe_key``: nobody gets a second signal).
        A sync send (``delivery_class`` ``sync``, or a type that is sync by default) is never
        spooled — its point is an available recipient now — so it raises ``TransportError`` /
        ``Unavailable`` at once (a bus that could not be reached: "nothing was sent").
        Raises the typed error otherwise: ``RecipientUnavailable`` for a bounced sync send
        (``.recipient_state``, ``.signal_id``), ``UnknownRecipient``, ``InvalidRequest``, ...
        """
        schedule = schedule_fields(type, delivery_class, deliver_after, deliver_at)
        key = dedupe_key or f"sbc-{uuid.uuid4()}"
        request = clean(
            {
                "to": to,
                "type": type,
                "payload": {} if payload is None else payload,
                "delivery_class": delivery_class,
                "ttl_seconds": ttl_seconds,
                "correlation_id": correlation_id,
                "dedupe_key": key,
                **schedule,
            }
        )
        try:
            answer = await self._session.transmit_send(request)
        except SignalbusError as exc:
            for_send(exc)  # the hint of a send: retry with the same dedupe_key
            sync = (delivery_class or default_class(type)) == "sync"
            group = to.startswith("@")
            if not isinstance(exc, (TransportError, Unavailable)) or self._replayer is None or not spool or sync or group:
                raise
            return self._replayer.spool_send(request, exc)
        if "fanout_id" in answer:
            return FanoutResult.from_json(answer, key, error_of=error_from_body)
        return SendResult.from_json(answer, key)

    async def reply(self, to_signal: Signal, type: str, payload: Any = None, **kwargs: Any) -> SendOutcome:
        """Answer ``to_signal``: send to its sender with its ``correlation_id`` (an ``ask``
        waiting on the other side gets it)."""
        return await self.send(to_signal.from_, type, payload, correlation_id=to_signal.correlation_id, **kwargs)

    async def ask(
        self,
        to: str,
        type: str,
        payload: Any = None,
        timeout: float = 30.0,
        **kwargs: Any,
    ) -> Signal:
        """Send with a fresh ``correlation_id`` and return the first signal that comes back
        carrying it (acked when ``auto_ack``). Needs an open session, for the reply: without
        one (never connected, or lost) it raises ``TransportError`` at once and sends nothing.
        Never spooled: the send's typed error is raised at once (``RecipientUnavailable``,
        ``TransportError``, ``Unavailable``, ...). ``AskTimeout`` (with ``signal_id``) when no
        reply comes within ``timeout`` seconds; ``UsageError`` (a ``ValueError``) for a
        ``timeout`` that is not positive."""
        if not timeout > 0:
            raise UsageError(f"ask timeout must be a positive number of seconds, got {timeout!r}")
        if not self._session.connected:
            raise TransportError(
                f"ask {type} to {to}: no open session with {self.url}, and the reply could only come over one "
                "(call connect() first; a lost session comes back by itself: wait_connected())",
                hint=NOTHING_SENT,
            )
        cid = uuid.uuid4().hex
        fut = self._delivery.expect_reply(cid)
        started = time.monotonic()
        try:
            sent = await self.send(to, type, payload, correlation_id=cid, **{**kwargs, "spool": False})
            remaining = max(0.0, timeout - (time.monotonic() - started))
            try:
                return await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError as exc:
                signal_id = sent.signal_id if isinstance(sent, SendResult) else None
                raise AskTimeout(
                    f"no reply to {type} sent to {to} within {timeout}s",
                    details={"signal_id": signal_id, "correlation_id": cid, "dedupe_key": sent.dedupe_key},
                ) from exc
        finally:
            self._delivery.forget_reply(cid)

    async def recall(self, signal_id: str) -> RecallResult:
        """Recall a signal you sent (CONTRACT §6): ``recalled``, ``already_delivered``,
        ``already_expired`` or ``not_found``."""
        async def via_http() -> RecallResult:
            data = await self._api.request("POST", f"/v1/signals/{quote(signal_id, safe='')}/recall", ok_statuses=(404,))
            if not isinstance(data, dict) or "outcome" not in data:
                raise error_from_body(data, 404)
            return RecallResult(outcome=data["outcome"])

        frame = {"op": "recall", "signal_id": signal_id}
        return await self._session.call(frame, via_http, lambda data: RecallResult(outcome=data["outcome"]))

    async def recall_many(self, *, fanout_id: Optional[str] = None, correlation_id: Optional[str] = None) -> List[RecallEntry]:
        """Recall every signal you sent under one ``fanout_id`` (a send to a group) or one
        ``correlation_id`` (CONTRACT §15): one ``RecallEntry`` per signal, each outcome decided
        on its own as in ``recall``. Someone else's or unknown: ``[]``. Exactly one of the two
        (``UsageError`` otherwise)."""
        if (fanout_id is None) == (correlation_id is None):
            raise UsageError("recall_many takes exactly one of fanout_id= and correlation_id=")
        body = clean({"fanout_id": fanout_id, "correlation_id": correlation_id})

        def entries(data: Mapping[str, Any]) -> List[RecallEntry]:
            return [RecallEntry.from_json(r) for r in data.get("results") or []]

        async def via_http() -> List[RecallEntry]:
            return entries(await self._api.request("POST", "/v1/signals/recall", body=body))

        return await self._session.call({"op": "recall", **body}, via_http, entries)

    async def ack(self, *signals: Union[Signal, str, Iterable[Union[Signal, str]]]) -> int:
        """Ack delivered signals (or ids). Returns how many the bus took (ids that are not
        yours, not delivered or already acked are skipped by the bus)."""
        ids: List[str] = []

        def one(item: Any) -> str:
            if isinstance(item, Signal):
                return item.id
            if isinstance(item, str):
                return item
            raise TypeError(f"ack takes signals or signal ids (str), got {type(item).__name__}")

        for item in signals:
            if isinstance(item, (Signal, str)):
                ids.append(one(item))
            elif isinstance(item, Iterable):
                ids.extend(one(s) for s in item)
            else:
                ids.append(one(item))
        return await self._delivery.ack(ids)

    async def inbox(self, *, limit: Optional[int] = None, wait: Optional[float] = None) -> List[Signal]:
        """Pending signals for you, in drain order; delivers nothing. With ``wait`` (seconds,
        0 … 60, rounded up to whole seconds) the bus answers as soon as something is pending, or
        after ``wait`` with ``[]`` — a long poll, over HTTP, with or without a session.
        ``UsageError`` for a ``wait`` outside 0 … 60."""
        return await self._inbox(drain=False, limit=limit, wait=wait)

    async def drain(self, *, limit: Optional[int] = None, wait: Optional[float] = None) -> List[Signal]:
        """Take pending signals (``GET /v1/inbox?drain=true``): they are delivered to you
        (``delivered_via: inbox``) and never pushed to a session later. ``wait`` as ``inbox``'s:
        the signals it answers with are delivered too."""
        return await self._inbox(drain=True, limit=limit, wait=wait)

    async def _inbox(self, *, drain: bool, limit: Optional[int], wait: Optional[float]) -> List[Signal]:
        params: Dict[str, Any] = {"drain": "true" if drain else None, "limit": limit}
        timeout: Optional[float] = None
        if wait is not None:
            seconds = seconds_of(wait, "wait")
            if not 0 <= seconds <= MAX_INBOX_WAIT:
                raise UsageError(f"{'drain' if drain else 'inbox'} wait is 0 … {MAX_INBOX_WAIT} seconds, got {wait!r}")
            if seconds > 0:
                params["wait"] = math.ceil(seconds)  # the bus takes whole seconds
                timeout = params["wait"] + self._session.request_timeout  # the bus holds the answer up to `wait`
        data = await self._api.request("GET", "/v1/inbox", params=params, timeout=timeout)
        return [Signal.from_json(s) for s in data.get("signals", [])]

    async def conversation(
        self, correlation_id: str, *, limit: Optional[int] = None, cursor: Optional[str] = None
    ) -> SignalPage:
        """A conversation (CONTRACT §16): the signals you sent and received with
        ``correlation_id``, **oldest first** (never anyone else's); ``cursor=page.next_cursor``
        continues. ``UsageError`` for an empty ``correlation_id`` (the bus takes 1 … 64 chars)."""
        if not isinstance(correlation_id, str) or not correlation_id:
            raise UsageError(f"conversation takes a correlation id (a non-empty str), got {correlation_id!r}")
        data = await self._api.request(
            "GET", "/v1/signals", params={"correlation_id": correlation_id, "limit": limit, "cursor": cursor}
        )
        return SignalPage(signals=[SignalRow.from_json(r) for r in data.get("signals", [])], next_cursor=data.get("next_cursor"))

    async def get(self, signal_id: str) -> SignalRow:
        """A signal's row (you sent or received it); ``NotFound`` otherwise."""
        return SignalRow.from_json(await self._api.request("GET", f"/v1/signals/{quote(signal_id, safe='')}"))

    async def agents(self) -> List[Agent]:
        """Your tenant's roster with each agent's recipient state."""
        data = await self._api.request("GET", "/v1/agents")
        return [Agent.from_json(a, data.get("tenant", "")) for a in data.get("agents", [])]

    async def record_fact(self, plugin: str, fact_type: str, state: Mapping[str, Any]) -> int:
        """Append a plugin fact; returns its ``seq``."""
        async def via_http() -> int:
            data = await self._api.request(
                "POST", f"/v1/plugins/{quote(plugin, safe='')}/facts", body={"fact_type": fact_type, "state": state}
            )
            return int(data["seq"])

        frame = {"op": "fact", "plugin": plugin, "fact_type": fact_type, "state": state}
        return await self._session.call(frame, via_http, lambda data: int(data["seq"]))

    async def state(self, plugin: str) -> PluginState:
        """A plugin's current state (its newest fact's ``state``)."""
        data = await self._api.request("GET", f"/v1/plugins/{quote(plugin, safe='')}/state")
        return PluginState(plugin=data["plugin"], state=data.get("state"), seq=int(data.get("seq") or 0), updated_at=parse_time(data.get("updated_at")))

    async def facts(
        self, plugin: str, *, fact_type: Optional[str] = None, limit: Optional[int] = None, before_seq: Optional[int] = None
    ) -> FactPage:
        """A plugin's facts, newest first, one page (``next_before_seq`` continues)."""
        data = await self._api.request(
            "GET",
            f"/v1/plugins/{quote(plugin, safe='')}/facts",
            params={"fact_type": fact_type, "limit": limit, "before_seq": before_seq},
        )
        facts = [
            Fact(seq=int(f["seq"]), fact_type=f["fact_type"], state=f.get("state"), recorded_by=f.get("recorded_by", ""), created_at=parse_time(f.get("created_at")))
            for f in data.get("facts", [])
        ]
        return FactPage(facts=facts, next_before_seq=data.get("next_before_seq"))

    # -- directives (CONTRACT §14) ----------------------------------------------------------

    async def create_directive(
        self,
        to: str,
        type: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        idempotency_key: Optional[str] = None,
        deadline_seconds: Optional[int] = None,
        correlation_id: Optional[str] = None,
    ) -> Directive:
        """Ask ``to`` (an identity, or any one member of a ``@group``) to do ``type`` with
        ``params`` (a JSON object). Every create carries an ``idempotency_key`` (a generated
        ``sbd-<uuid>`` when none is given): repeating it answers the existing directive as it is
        now (``created`` is ``False``) and creates nothing; the same key with another ``to``,
        ``type`` or ``params`` is ``IdempotencyConflict`` (``.directive_id``). Also
        ``UnknownRecipient``, ``UnknownGroup``, ``Forbidden`` (the issuers policy),
        ``InvalidRequest``, ``PayloadTooLarge``. ``deadline_seconds`` defaults to the bus's (24 h)."""
        return await self._directives.create(
            to, type, params, idempotency_key=idempotency_key, deadline_seconds=deadline_seconds, correlation_id=correlation_id
        )

    async def get_directive(self, directive_id: str, wait: Optional[float] = None) -> Directive:
        """A directive you issued or were assigned (``NotFound`` otherwise). With ``wait`` (≤ 60
        seconds, rounded up to whole seconds) the bus answers once the directive has ended, or
        after ``wait`` as it is then."""
        return await self._directives.get(directive_id, wait)

    async def list_directives(
        self,
        *,
        role: Optional[str] = None,
        status: Optional[str] = None,
        type: Optional[str] = None,
        limit: Optional[int] = None,
        before: Optional[str] = None,
    ) -> DirectivePage:
        """Your directives, newest first: ``role`` ``issued``/``assigned`` (assigned includes
        your groups'), ``status`` ``open`` or a state; ``before=page.next_before`` continues."""
        return await self._directives.list(role=role, status=status, type=type, limit=limit, before=before)

    async def start_directive(self, directive_id: str) -> Directive:
        """Start (claim) a requested directive you are assigned: ``started``, ``claimed_by`` you.
        ``AlreadyClaimed`` (``.claimed_by``) when another member of the group has it;
        ``InvalidTransition`` (``.directive``) when it is no longer requested."""
        return await self._directives.act(directive_id, "start", {})

    async def progress_directive(
        self, directive_id: str, message: Optional[str] = None, percent: Optional[int] = None
    ) -> Directive:
        """Report progress on a directive you claimed (``message`` ≤ 1,000 chars, ``percent``
        0–100); it replaces the previous report and sends no signal."""
        return await self._directives.act(directive_id, "progress", clean({"message": message, "percent": percent}))

    async def complete_directive(self, directive_id: str, result: Optional[Mapping[str, Any]] = None) -> Directive:
        """Complete a directive with ``result`` (a JSON object, ≤ 64 KiB; default ``{}``): by
        its claimer, or by the assignee straight from ``requested`` (claims and completes)."""
        return await self._directives.act(directive_id, "complete", {"result": {} if result is None else result})

    async def fail_directive(self, directive_id: str, code: str, message: str = "") -> Directive:
        """Fail a directive (as ``complete_directive``) with a failure ``code`` (≤ 64 chars)
        and ``message``."""
        return await self._directives.act(directive_id, "fail", {"failure": {"code": code, "message": message}})

    async def reject_directive(self, directive_id: str, reason: Optional[str] = None) -> Directive:
        """Decline a requested directive you are assigned. For a group you decline for yourself;
        it is ``rejected`` once every member has declined."""
        return await self._directives.act(directive_id, "reject", clean({"reason": reason}))

    async def cancel_directive(self, directive_id: str, reason: Optional[str] = None) -> Directive:
        """Cancel an open directive you issued (``Forbidden`` for anyone else). A
        ``run_directive`` of this client waiting on it raises ``DirectiveCanceled``."""
        return await self._directives.act(directive_id, "cancel", clean({"reason": reason}))

    async def run_directive(
        self,
        to: str,
        type: str,
        params: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        *,
        idempotency_key: Optional[str] = None,
        deadline_seconds: Optional[int] = None,
        correlation_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Create a directive and wait for it to end; return its ``result``.

        The wait is on the lifecycle signals the bus sends the issuer over the session
        (``DirectiveCompleted`` and the others, ``correlation_id`` = the directive's id), not a
        poll; each one it consumes is acked and never reaches ``on_signal`` / ``receive()``.
        Raises ``DirectiveFailed`` (``.directive.failure``), ``DirectiveRejected``,
        ``DirectiveExpired`` or ``DirectiveCanceled`` (each a ``DirectiveEnded`` carrying
        ``.directive``); ``DirectiveTimeout`` (a ``TimeoutError``) when it has not ended within
        ``timeout`` seconds — the directive is left as it is. Without ``timeout`` it waits until
        the directive ends, which its deadline bounds. Needs an open session: without one it
        raises ``TransportError`` at once and creates nothing. The create's errors as
        ``create_directive``; ``UsageError`` for a ``timeout`` that is not positive."""
        return await self._directives.run(
            to,
            type,
            params,
            timeout,
            idempotency_key=idempotency_key,
            deadline_seconds=deadline_seconds,
            correlation_id=correlation_id,
        )

    def on_directive(self, type_pattern: str, handler: DirectiveHandler) -> None:
        """Serve directives whose type matches ``type_pattern`` (exact, or a prefix ending in
        ``*``: ``"package.*"``; the most specific registered pattern wins).

        On each ``DirectiveRequested`` signal of a matching type the client starts the directive
        — skipping it when another member claimed it or it already ended — and calls
        ``handler(directive, progress)`` (plain or ``async``; ``progress(message=None,
        percent=None)`` reports progress). A returned dict completes the directive with it as
        ``result`` (any other value ``v`` as ``{"value": v}``, ``None`` as ``{}``); an exception
        fails it with ``code`` = the exception's class name and ``message`` = ``str(e)``. The
        request signal is acked either way (and never reaches ``on_signal`` / ``receive()``).
        Handlers run like signal handlers, at most ``max_concurrent_handlers`` at once (a count
        of their own); one still running at ``close()`` is cancelled and its request comes back
        on the next session, where the directive this identity started is resumed (the handler
        runs again). Register before ``connect()`` so the requests of the startup drain reach it.
        ``UsageError`` for a bad or duplicate pattern."""
        self._directives.on_directive(type_pattern, handler)

    # -- groups (CONTRACT §15) --------------------------------------------------------------

    async def groups(self) -> List[Group]:
        """Your tenant's groups, sorted by name (each member by identity only)."""
        data = await self._api.request("GET", "/v1/groups")
        return [Group.from_json(g) for g in data.get("groups") or []]

    async def group(self, name: str) -> Group:
        """One group (``"@reviewers"`` or ``"reviewers"``) with each member's recipient state;
        ``UnknownGroup`` for no such group."""
        return Group.from_json(await self._api.request("GET", group_path(name)))

    async def join_group(self, name: str) -> Group:
        """Join a self-join group (``Forbidden`` for one that is not). With ``announce`` the
        other members receive ``PeerJoined``."""
        return Group.from_json(await self._api.request("POST", group_path(name) + "/join", body={}))

    async def leave_group(self, name: str) -> Group:
        """Leave a self-join group (``Forbidden`` for one that is not)."""
        return Group.from_json(await self._api.request("POST", group_path(name) + "/leave", body={}))

    # `list` last, so that the name does not shadow the builtin in the annotations above.
    async def list(
        self,
        *,
        role: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> SignalPage:
        """Your signals, newest first: ``role`` ``sent``/``received``, ``status``
        ``pending``/``delivered``/``expired``/``recalled``; ``next_cursor`` continues."""
        data = await self._api.request(
            "GET", "/v1/signals", params={"role": role, "status": status, "limit": limit, "cursor": cursor}
        )
        return SignalPage(signals=[SignalRow.from_json(r) for r in data.get("signals", [])], next_cursor=data.get("next_cursor"))

