"""Directives (CONTRACT §14): the calls on them (over HTTP), ``run_directive``'s wait on the
lifecycle signals, and the ``on_directive`` worker.

How the waiting works: the bus tells each party of the other's actions with ordinary signals
(``DirectiveStarted``, ``DirectiveCompleted``, ... with the directive object as payload and
``correlation_id`` = the directive's id). A ``run_directive`` claims those of its directive
through a ``Route`` on the session's ``Delivery`` — installed *before* the create, matching the
payload's ``issuer`` and ``idempotency_key``, so a signal that outruns the create's answer is
not missed — and acks each one it consumes. A worker claims the ``DirectiveRequested`` signals
of the types it serves the same way and acks each once it is done with it.

Deliberately below the facade: it never imports ``client.py``, shapes no send and knows no
spool. It takes the HTTP API and the session (its identity, whether it is open, its delivery).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Protocol, TypeVar, Union
from urllib.parse import quote

from .delivery import Route
from .errors import (
    NOTHING_SENT,
    AlreadyClaimed,
    DirectiveCanceled,
    DirectiveEnded,
    DirectiveExpired,
    DirectiveFailed,
    DirectiveRejected,
    DirectiveTimeout,
    ClientClosed,
    Forbidden,
    InternalError,
    InvalidTransition,
    NotFound,
    RateLimited,
    SignalbusError,
    TransportError,
    Unavailable,
    UsageError,
)
from .http import HttpApi, clean
from .session import Session, cancel_all
from .types import Directive, DirectivePage, Signal

log = logging.getLogger("signalbus_client")

T = TypeVar("T")

# The lifecycle signals an issuer receives about its directive (CONTRACT §14). An issuer that is
# also the assignee receives DirectiveCanceled / DirectiveExpired too: a run_directive takes them.
ISSUER_SIGNALS = frozenset(
    {"DirectiveStarted", "DirectiveCompleted", "DirectiveFailed", "DirectiveRejected", "DirectiveCanceled", "DirectiveExpired"}
)
REQUESTED = "DirectiveRequested"
# What a worker is told of a directive it was handed that ended without it: taken and acked by
# the worker (its bookkeeping), never left to pile up unacked in a client that only serves.
WORKER_ENDINGS = frozenset({"DirectiveCanceled", "DirectiveExpired"})

# Answers after which a worker's call is worth repeating (a few times, backing off): the bus
# could not take it now. A repeat of a call that did land is harmless (``start`` answers
# ``InvalidTransition`` with the directive started by this identity: resumed).
TRANSIENT = (TransportError, Unavailable, RateLimited, InternalError)
RETRY_DELAYS = (0.5, 1.0, 2.0)

# How long past a directive's deadline a run_directive without a timeout waits for the bus's
# DirectiveExpired before it looks at the directive itself (the sweeper expires it within seconds).
EXPIRY_GRACE_SECONDS = 30.0

# CONTRACT §14 bounds of a failure (on_directive fails with the exception's class and text).
MAX_FAILURE_CODE_CHARS = 64
MAX_TEXT_CHARS = 1000

_ENDED: Dict[str, type[DirectiveEnded]] = {
    "failed": DirectiveFailed,
    "rejected": DirectiveRejected,
    "expired": DirectiveExpired,
    "canceled": DirectiveCanceled,
}


class ProgressReporter(Protocol):
    """What a directive handler is given to report progress: ``progress(message=None,
    percent=None)``. The report goes out at once; the returned task resolves to the directive
    after it (an ``async`` handler may ``await`` it to see the bus's answer or error; a plain one
    may ignore it). The handler's result is sent only after its progress reports."""

    def __call__(self, message: Optional[str] = None, percent: Optional[int] = None) -> "asyncio.Task[Directive]": ...


# A directive handler: ``(directive, progress) -> result`` (plain or ``async``). A dict result is
# the directive's ``result``; any other value ``v`` is sent as ``{"value": v}``, ``None`` as ``{}``.
# An exception fails the directive with ``code`` = the exception's class name, ``message`` = str(e).
DirectiveHandler = Callable[[Directive, ProgressReporter], Any]

# What a waiting run_directive is handed: news of its directive, or why to stop waiting.
Waited = Union[Directive, SignalbusError]


def new_idempotency_key() -> str:
    """The key a create without one carries (``sbd-<uuid>``): a retry of the same call object
    reuses it, so it can never create a second directive."""
    return f"sbd-{uuid.uuid4()}"


def result_object(value: Any) -> Dict[str, Any]:
    """A handler's return value as a directive ``result`` (always a JSON object)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


def outcome_of(directive: Directive) -> Dict[str, Any]:
    """A terminal directive as ``run_directive`` answers it: its result, or the typed error."""
    if directive.status == "completed":
        return dict(directive.result or {})
    error = _ENDED.get(directive.status)
    if error is None:  # not terminal: the caller's mistake, never the bus's
        raise ValueError(f"directive {directive.directive_id} has not ended ({directive.status})")
    what = {
        "failed": lambda d: f"failed: {d.failure.code}: {d.failure.message}" if d.failure else "failed",
        "rejected": lambda d: f"was rejected{': ' + d.reason if d.reason else ''} (declined by {', '.join(d.declined_by) or d.assignee})",
        "expired": lambda d: f"expired at its deadline {d.deadline.isoformat()}",
        "canceled": lambda d: f"was canceled{': ' + d.reason if d.reason else ''}",
    }[directive.status](directive)
    raise error(f"directive {directive.type} {directive.directive_id} to {directive.assignee} {what}", directive=directive)


def _pattern_ok(pattern: str) -> bool:
    return bool(pattern) and "*" not in pattern[:-1]


def _matches(pattern: str, directive_type: str) -> bool:
    return directive_type.startswith(pattern[:-1]) if pattern.endswith("*") else directive_type == pattern


def _path(directive_id: str, action: str = "") -> str:
    return f"/v1/directives/{quote(directive_id, safe='')}" + (f"/{action}" if action else "")


class Directives:
    """The directive calls of one ``Client``, its ``run_directive`` waits and its workers."""

    def __init__(self, api: HttpApi, session: Session) -> None:
        self._api = api
        self._session = session
        self._delivery = session.delivery
        # Directive id → the queues of the run_directive calls waiting on it (fed by signals and
        # by this client's own actions: an issuer is sent no DirectiveCanceled for its own cancel).
        self._waits: Dict[str, List["asyncio.Queue[Waited]"]] = {}
        self._runs: "set[asyncio.Queue[Waited]]" = set()  # every run waiting, for close()
        self._closed = False
        self._workers: Dict[str, DirectiveHandler] = {}
        self._worker_route: Optional[Route] = None
        self._slots: Optional[asyncio.Semaphore] = None
        self._tasks: "set[asyncio.Task[None]]" = set()

    # -- calls -----------------------------------------------------------------------------

    async def create(
        self,
        to: str,
        type: str,
        params: Optional[Mapping[str, Any]],
        *,
        idempotency_key: Optional[str],
        deadline_seconds: Optional[int],
        correlation_id: Optional[str],
    ) -> Directive:
        body = clean(
            {
                "to": to,
                "type": type,
                "params": {} if params is None else params,
                "idempotency_key": idempotency_key or new_idempotency_key(),
                "deadline_seconds": deadline_seconds,
                "correlation_id": correlation_id,
            }
        )
        status, data = await self._api.exchange("POST", "/v1/directives", body=body)
        return Directive.from_json(data, created=status == 201)

    async def get(self, directive_id: str, wait: Optional[float]) -> Directive:
        if wait is not None and not 0 <= wait <= 60:
            raise UsageError(f"get_directive wait is 0 … 60 seconds, got {wait!r}")
        params: Dict[str, Any] = {}
        timeout: Optional[float] = None
        if wait:
            params["wait"] = math.ceil(wait)  # the bus takes whole seconds
            timeout = params["wait"] + self._session.request_timeout  # the bus holds the answer up to `wait`
        data = await self._api.request("GET", _path(directive_id), params=params, timeout=timeout)
        return Directive.from_json(data)

    async def list(
        self,
        *,
        role: Optional[str],
        status: Optional[str],
        type: Optional[str],
        limit: Optional[int],
        before: Optional[str],
    ) -> DirectivePage:
        data = await self._api.request(
            "GET",
            "/v1/directives",
            params={"role": role, "status": status, "type": type, "limit": limit, "before": before},
        )
        return DirectivePage(
            directives=[Directive.from_json(d) for d in data.get("directives") or []],
            next_before=data.get("next_before"),
        )

    async def act(self, directive_id: str, action: str, body: Mapping[str, Any]) -> Directive:
        """``POST /v1/directives/{id}/{action}``: the directive after it."""
        directive = Directive.from_json(await self._api.request("POST", _path(directive_id, action), body=dict(body)))
        self._feed(directive)
        return directive

    def _feed(self, directive: Directive) -> None:
        for queue in self._waits.get(directive.directive_id, []):
            queue.put_nowait(directive)

    # -- run_directive ---------------------------------------------------------------------

    async def run(
        self,
        to: str,
        type: str,
        params: Optional[Mapping[str, Any]],
        timeout: Optional[float],
        *,
        idempotency_key: Optional[str],
        deadline_seconds: Optional[int],
        correlation_id: Optional[str],
    ) -> Dict[str, Any]:
        if timeout is not None and not timeout > 0:
            raise UsageError(f"run_directive timeout must be a positive number of seconds (or None), got {timeout!r}")
        if not self._session.connected:
            raise TransportError(
                f"run_directive {type} to {to}: no open session with {self._session.url}, and the directive's "
                "outcome could only come over one (call connect() first; a lost session comes back by itself: "
                "wait_connected())",
                hint=NOTHING_SENT,
            )
        key = idempotency_key or new_idempotency_key()
        issuer = self._session.identity
        if self._closed:
            raise ClientClosed("the client is closed")
        queue: "asyncio.Queue[Waited]" = asyncio.Queue()
        known_id: List[str] = []

        def match(sig: Signal) -> bool:
            if sig.type not in ISSUER_SIGNALS:
                return False
            if known_id and sig.correlation_id == known_id[0]:
                return True
            p = sig.payload
            return isinstance(p, Mapping) and p.get("idempotency_key") == key and p.get("issuer") == issuer

        def take(sig: Signal) -> None:
            self._delivery.settle(sig.id)  # consumed here: acked
            try:
                queue.put_nowait(Directive.from_json(sig.payload))
            except SignalbusError as exc:
                log.error("a %s signal whose payload is not a directive, ignored: %s", sig.type, exc)

        route = self._delivery.add_route(Route(match, take))
        self._runs.add(queue)
        started = time.monotonic()
        try:
            current = await self.create(
                to, type, params, idempotency_key=key, deadline_seconds=deadline_seconds, correlation_id=correlation_id
            )
            directive_id = current.directive_id
            known_id.append(directive_id)
            self._waits.setdefault(directive_id, []).append(queue)
            while not current.terminal:
                if timeout is None:  # bounded by the deadline: the bus expires it then
                    remaining = (current.deadline - datetime.now(timezone.utc)).total_seconds() + EXPIRY_GRACE_SECONDS
                else:
                    remaining = timeout - (time.monotonic() - started)
                if remaining <= 0:
                    current = await self._last_look(current)
                    if current.terminal:
                        break
                    raise DirectiveTimeout(
                        f"directive {type} {directive_id} to {to} had not ended "
                        + (f"within {timeout}s" if timeout is not None else "by its deadline")
                        + f" (status {current.status})",
                        directive=current,
                    )
                try:
                    got = await asyncio.wait_for(queue.get(), remaining)
                except asyncio.TimeoutError:
                    continue  # the next turn takes the last look
                if isinstance(got, SignalbusError):
                    raise got
                if got.directive_id == directive_id:
                    current = got
            return outcome_of(current)
        finally:
            self._runs.discard(queue)
            self._delivery.remove_route(route)
            if known_id:
                waits = self._waits.get(known_id[0], [])
                if queue in waits:
                    waits.remove(queue)
                if not waits:
                    self._waits.pop(known_id[0], None)

    async def _last_look(self, current: Directive) -> Directive:
        """One read of the directive before a wait gives up: it may have ended in a way no signal
        told this client (canceled by another client of the issuer)."""
        try:
            return await self.get(current.directive_id, None)
        except SignalbusError as exc:
            log.debug("could not read directive %s before giving up: %s", current.directive_id, exc)
            return current

    # -- on_directive ----------------------------------------------------------------------

    def on_directive(self, pattern: str, handler: DirectiveHandler) -> None:
        if not isinstance(pattern, str) or not _pattern_ok(pattern):
            raise UsageError(f"a directive type pattern is a type, or a prefix ending in '*' (package.*), got {pattern!r}")
        if not callable(handler):
            raise TypeError("on_directive handler must be callable: (directive, progress) -> result")
        if pattern in self._workers:
            raise UsageError(f"a handler for directive type pattern {pattern!r} is already registered")
        self._workers[pattern] = handler
        if self._worker_route is None:
            self._worker_route = self._delivery.add_route(Route(self._is_request, self._take_request))

    def handler_for(self, directive_type: str) -> Optional[DirectiveHandler]:
        """The most specific pattern's handler: the exact type, else the longest prefix."""
        exact = self._workers.get(directive_type)
        if exact is not None:
            return exact
        best: Optional[str] = None
        for pattern in self._workers:
            if pattern.endswith("*") and _matches(pattern, directive_type) and (best is None or len(pattern) > len(best)):
                best = pattern
        return self._workers[best] if best is not None else None

    def _is_request(self, sig: Signal) -> bool:
        """A request of a type served here, or the end of one handed to this identity (not one
        it issued: those are a run_directive's, or the caller's)."""
        if (sig.type != REQUESTED and sig.type not in WORKER_ENDINGS) or not isinstance(sig.payload, Mapping):
            return False
        if sig.type in WORKER_ENDINGS and sig.payload.get("issuer") == self._session.identity:
            return False
        directive_type = sig.payload.get("type")
        return isinstance(directive_type, str) and self.handler_for(directive_type) is not None

    def _take_request(self, sig: Signal) -> None:
        if sig.type != REQUESTED:  # canceled or expired: a handler still at it learns it from its
            self._delivery.settle(sig.id)  # next progress report or its result (InvalidTransition)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._delivery.max_concurrent_handlers)
        task = asyncio.get_running_loop().create_task(self._work(sig, self._slots), name=f"signalbus-directive-{sig.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _work(self, sig: Signal, slots: asyncio.Semaphore) -> None:
        """One request: start it (skipping one another member has, or that ended), run the
        handler, complete or fail it; ack the request either way. Cancelled (the client closes):
        not acked, so it comes back on the next session — where a directive this identity had
        started is resumed, not skipped."""
        async with slots:
            try:
                await self._serve(sig)
            except asyncio.CancelledError:
                self._delivery.release(sig.id)
                raise
            except TRANSIENT as exc:  # the bus could not take it, even after retries: for the next session
                log.warning("directive request %s left for the next session: %s", sig.id, exc)
                self._delivery.release(sig.id)
                return
            except Exception:  # noqa: BLE001 - reported; the request is settled anyway
                log.exception("the directive worker failed on request %s", sig.id)
            self._delivery.settle(sig.id)

    async def _serve(self, sig: Signal) -> None:
        requested = Directive.from_json(sig.payload)
        handler = self.handler_for(requested.type)
        if handler is None:  # unregistered meanwhile (cannot happen today): leave it settled
            return
        me = self._session.identity
        try:
            directive = await self._retrying(lambda: self.act(requested.directive_id, "start", {}))
        except AlreadyClaimed as exc:
            log.debug("directive %s is claimed by %s: skipped", requested.directive_id, exc.claimed_by)
            return
        except InvalidTransition as exc:
            now = exc.directive
            if now is None or now.status != "started" or now.claimed_by != me:
                log.debug("directive %s is %s: skipped", requested.directive_id, now.status if now else "over")
                return
            directive = now  # this identity started it before (a session ago): resume the work
        except (NotFound, Forbidden) as exc:  # no longer ours (declined, removed from the group)
            log.debug("directive %s is not for this worker any more: %s", requested.directive_id, exc)
            return
        reports: List["asyncio.Task[Directive]"] = []

        def progress(message: Optional[str] = None, percent: Optional[int] = None) -> "asyncio.Task[Directive]":
            task = asyncio.ensure_future(
                self.act(directive.directive_id, "progress", clean({"message": message, "percent": percent}))
            )
            task.add_done_callback(_note_progress_failure)
            reports.append(task)
            return task

        try:
            value = handler(directive, progress)
            if inspect.isawaitable(value):
                value = await value
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the handler's failure is the directive's
            await _settled(reports)
            await self._fail(directive, type(exc).__name__, str(exc))
            return
        await _settled(reports)
        try:
            body = {"result": result_object(value)}
            await self._retrying(lambda: self.act(directive.directive_id, "complete", body))
        except (InvalidTransition, NotFound, Forbidden) as exc:  # canceled or expired meanwhile
            self._too_late(directive, "result", exc)
        except TRANSIENT:
            raise
        except (SignalbusError, TypeError, ValueError) as exc:  # a result the bus refuses (too large, not JSON)
            await self._fail(directive, type(exc).__name__, f"the handler's result was refused: {exc}")

    async def _fail(self, directive: Directive, code: str, message: str) -> None:
        failure = {
            "code": code.replace("\x00", "")[:MAX_FAILURE_CODE_CHARS],
            "message": message.replace("\x00", "")[:MAX_TEXT_CHARS],
        }
        try:
            await self._retrying(lambda: self.act(directive.directive_id, "fail", {"failure": failure}))
        except (InvalidTransition, NotFound, Forbidden) as exc:
            self._too_late(directive, "failure", exc)

    def _too_late(self, directive: Directive, what: str, exc: SignalbusError) -> None:
        now = exc.directive if isinstance(exc, InvalidTransition) else None
        if now is not None and now.claimed_by == self._session.identity and now.status in ("completed", "failed"):
            log.debug("directive %s was already %s (a repeated call)", directive.directive_id, now.status)
        else:
            log.info("directive %s ended before its %s could be sent: %s", directive.directive_id, what, exc)

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, repeated after a short pause while the bus cannot take it (``TRANSIENT``)."""
        for delay in RETRY_DELAYS:
            try:
                return await call()
            except TRANSIENT as exc:
                if self._closed:
                    raise
                log.debug("a directive call failed (%s): retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
        return await call()

    async def close(self) -> None:
        """Cancel the handlers still running (their requests are not acked: they come back) and
        end every waiting ``run_directive`` with ``ClientClosed``."""
        self._closed = True
        for queue in list(self._runs):
            queue.put_nowait(ClientClosed("the client was closed while run_directive waited; the directive is left as it is"))
        await cancel_all(list(self._tasks))


def _note_progress_failure(task: "asyncio.Future[Directive]") -> None:
    if not task.cancelled() and task.exception() is not None:  # retrieved: an awaiting handler also gets it
        log.debug("a directive progress report failed: %s", task.exception())


async def _settled(tasks: List["asyncio.Task[Directive]"]) -> None:
    """Wait for the progress reports still in flight (their failures are the handler's business)."""
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = [
    "DirectiveHandler",
    "Directives",
    "ProgressReporter",
    "new_idempotency_key",
    "outcome_of",
    "result_object",
]
