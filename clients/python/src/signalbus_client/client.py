"""The agent's ``Client``, a thin facade: it shapes each call (send, ask, recall, ack, inbox,
facts, ...) and hands it to the engine below — the session (``session.py``: transport,
supervisor; ``delivery.py``: dedupe, dispatch, acks), the HTTP API (``http.py``) and the
spool replay (``replay.py``).

Deliberately no protocol here: the engine modules never import this one, so each layer is read
and tested alone. The admin calls are ``admin.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
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
from .http import HttpApi, clean
from .replay import Replayer, ReplayCallback, ReplayOutcome, ReplayReport, SpoolExpired
from .delivery import Handler
from .session import Session
from .spool import DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES, Spool
from .types import (
    Agent,
    Fact,
    FactPage,
    PluginState,
    RecallResult,
    SendOutcome,
    SendResult,
    Signal,
    SignalPage,
    SignalRow,
    Welcome,
    default_class,
    parse_time,
)

log = logging.getLogger("signalbus_client")

# A connection event callback: called with no argument; may be a coroutine function.
ConnectionCallback = Callable[[], Union[None, Awaitable[None]]]


def _log_callback_failure(task: "asyncio.Future[Any]") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a connection event callback failed: %r", task.exception())


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
        spool: bool = True,
    ) -> SendOutcome:
        """Send a signal (CONTRACT §4). Every send carries a ``dedupe_key`` (a fresh one when
        none is given) so that resending it can never create a second signal.

        Returns ``SendResult`` when the bus accepted it, or ``Spooled`` when the bus was
        unreachable or unavailable and the client has a spool (``spool=False`` raises instead).
        A sync send (``delivery_class`` ``sync``, or a type that is sync by default) is never
        spooled — its point is an available recipient now — so it raises ``TransportError`` /
        ``Unavailable`` at once (a bus that could not be reached: "nothing was sent").
        Raises the typed error otherwise: ``RecipientUnavailable`` for a bounced sync send
        (``.recipient_state``, ``.signal_id``), ``UnknownRecipient``, ``InvalidRequest``, ...
        """
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
            }
        )
        try:
            answer = await self._session.transmit_send(request)
        except SignalbusError as exc:
            for_send(exc)  # the hint of a send: retry with the same dedupe_key
            sync = (delivery_class or default_class(type)) == "sync"
            if not isinstance(exc, (TransportError, Unavailable)) or self._replayer is None or not spool or sync:
                raise
            return self._replayer.spool_send(request, exc)
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

    async def inbox(self, *, limit: Optional[int] = None) -> List[Signal]:
        """Pending signals for you, in drain order; delivers nothing."""
        data = await self._api.request("GET", "/v1/inbox", params={"limit": limit})
        return [Signal.from_json(s) for s in data.get("signals", [])]

    async def drain(self, *, limit: Optional[int] = None) -> List[Signal]:
        """Take pending signals (``GET /v1/inbox?drain=true``): they are delivered to you
        (``delivered_via: inbox``) and never pushed to a session later."""
        data = await self._api.request("GET", "/v1/inbox", params={"drain": "true", "limit": limit})
        return [Signal.from_json(s) for s in data.get("signals", [])]

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

