"""The session engine: one WebSocket session kept open (jittered exponential backoff,
heartbeats, a silent bus dropped), calls over it with their ``result`` frames (or over HTTP
when there is no session), and each pushed signal handed to its ``Delivery`` (dedupe, the
handler, acks).

Deliberately below the facade: it never imports ``client.py`` nor knows the spool. It shapes
no call (the ``Client`` does) and decides nothing about spooling; the facade hears of a new
session through ``on_open``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .errors import (
    NOTHING_SENT,
    ClientClosed,
    InvalidRequest,
    ProtocolError,
    RequestTimeout,
    SignalbusError,
    TransportError,
    Unauthorized,
    error_from_body,
)
from .delivery import Delivery, Handler
from .http import HttpApi
from .types import Welcome

log = logging.getLogger("signalbus_client")

T = TypeVar("T")


def ws_url_of(base: str, kind: Optional[str]) -> str:
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/") + "/v1/ws"
    return urlunsplit((scheme, parts.netloc, path, "", "")) + (f"?kind={quote(kind)}" if kind else "")


class Session:
    """The engine under ``Client``: owns the socket and the calls waiting for results; pushed
    signals go to its ``delivery``."""

    def __init__(
        self,
        api: HttpApi,
        token: str,
        *,
        kind: Optional[str],
        handler: Optional[Handler],
        auto_ack: bool,
        identity: Optional[str],
        request_timeout: float,
        connect_timeout: float,
        reconnect_initial: float,
        reconnect_max: float,
        dedupe_window: int,
        max_concurrent_handlers: int = 1,
    ) -> None:
        self.api = api
        self.url = api.url
        self._token = token
        self._ws_url = ws_url_of(self.url, kind)
        self._request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._reconnect_initial = reconnect_initial
        self._reconnect_max = reconnect_max
        self._identity = identity
        # Told when a session opens (the facade wakes the spool replay); set by the facade.
        self.on_open: Callable[[], None] = lambda: None
        # Told each connection event, in order: connected, disconnected, reconnected, closed.
        self.on_event: Callable[[str], None] = lambda event: None
        self._closed_told = False

        self._ws: Optional[ClientConnection] = None
        self.welcome: Optional[Welcome] = None
        self._connected = asyncio.Event()
        self._state_changed = asyncio.Event()
        self._pending: Dict[str, asyncio.Future[Dict[str, Any]]] = {}
        self._refs = 0
        self._tasks: List[asyncio.Task[Any]] = []
        self.delivery = Delivery(
            handler=handler,
            auto_ack=auto_ack,
            dedupe_window=dedupe_window,
            send_acks=self._ack_ids,
            max_concurrent_handlers=max_concurrent_handlers,
        )
        self._fatal: Optional[SignalbusError] = None
        self.closing = False
        self.started = False
        self.sessions_opened = 0
        self._last_rx = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def identity(self) -> Optional[str]:
        return self.welcome.identity if self.welcome else self._identity

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def request_timeout(self) -> float:
        """How long a call waits for its answer (seconds)."""
        return self._request_timeout

    @property
    def open(self) -> bool:
        """A session is open now (calls go over it)."""
        return self._ws is not None

    def start(self) -> None:
        """Start the supervisor and (with a handler) the dispatch; idempotent."""
        if self.closing:
            raise ClientClosed("the client is closed")
        if self.started:
            return
        self.started = True
        self._tasks.append(asyncio.create_task(self._supervise(), name="signalbus-session"))
        if self.delivery.handler is not None:
            self._tasks.append(asyncio.create_task(self.delivery.dispatch(), name="signalbus-dispatch"))

    async def wait_connected(self, timeout: Optional[float] = None) -> Welcome:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self.closing:
                raise ClientClosed("the client is closed")
            if self._connected.is_set() and self.welcome is not None:
                return self.welcome
            self._state_changed.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RequestTimeout(
                    f"no session with {self.url} within {timeout}s",
                    hint="the client keeps trying in the background: check the url and that the bus is up, or wait_connected() again",
                )
            try:
                await asyncio.wait_for(self._state_changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def wait_disconnected(self, timeout: Optional[float] = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._connected.is_set():
            self._state_changed.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RequestTimeout(f"the session did not close within {timeout}s", hint="the session is still open")
            try:
                await asyncio.wait_for(self._state_changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def begin_close(self) -> None:
        """Flush pending acks, then mark the engine closing (every loop stops at its next check)
        and close the socket (1000). ``finish_close`` stops the tasks."""
        if self.delivery.acks_waiting and self._connected.is_set():
            try:
                await asyncio.wait_for(self.delivery.flush_acks(), 2.0)
            except (asyncio.TimeoutError, SignalbusError) as exc:
                log.warning("acks not sent before close (%s): those signals come back on the next session", exc)
        self.closing = True
        self.delivery.close()
        self._state_changed.set()
        ws = self._ws
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(1000, "client closed"), 2.0)
            except (asyncio.TimeoutError, ConnectionClosed, OSError):
                pass

    async def finish_close(self) -> None:
        """Stop the tasks; calls and asks still waiting fail with ``ClientClosed``."""
        await cancel_all(self._tasks)
        self._fail_pending(ClientClosed("the client was closed before the bus answered; the outcome is unknown"))
        self.delivery.fail_asks()
        self.tell_closed()

    def tell(self, event: str) -> None:
        """Hand a connection event to the facade's callback; a callback that fails is logged."""
        try:
            self.on_event(event)
        except Exception:  # noqa: BLE001 - the caller's callback: reported, never fatal
            log.exception("the connection event callback failed on %r", event)

    def tell_closed(self) -> None:
        if not self._closed_told:
            self._closed_told = True
            self.tell("closed")

    def drop_connection(self) -> None:
        ws = self._ws
        if ws is not None:
            ws.transport.abort()

    # -- the session -----------------------------------------------------------------------

    async def _supervise(self) -> None:
        """Keep a session open. Logging is quiet: one WARNING when an open session is lost, DEBUG
        per failed attempt, one INFO when a session opens again; a refusal ``connect()`` raises
        to its caller is not also logged above DEBUG."""
        attempt = 0
        while not self.closing:
            opened = False
            try:
                opened = await self._session()
            except SignalbusError as exc:
                if isinstance(exc, (Unauthorized, InvalidRequest)) or exc.code == "forbidden":
                    self._fatal = exc
                    if self.sessions_opened:  # in the background: no caller is waiting to be told
                        log.warning("the bus refused the session, not reconnecting: %s", exc)
                    else:  # connect() / wait_connected() raises it
                        log.debug("the bus refused the session, not reconnecting: %s", exc)
                    self._fail_pending(exc)
                    self._state_changed.set()
                    self.tell_closed()  # given up for good
                    return
                log.debug("session to %s failed: %s", self.url, exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported, then reconnect
                log.debug("session to %s failed: %r", self.url, exc)
            if self.closing:
                return
            if opened:
                log.warning("lost the session to %s: reconnecting in the background", self.url)
            attempt = 0 if opened else attempt + 1
            ceiling = min(self._reconnect_max, self._reconnect_initial * (2 ** min(attempt, 30)))
            delay = random.uniform(ceiling / 2, ceiling)
            log.debug("reconnecting to %s in %.2fs (attempt %d)", self.url, delay, attempt + 1)
            await asyncio.sleep(delay)

    async def _session(self) -> bool:
        """One session: connect, welcome, read until closed. True when a welcome was received."""
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            ws = await ws_connect(
                self._ws_url,
                additional_headers=headers,
                open_timeout=self.connect_timeout,
                ping_interval=None,
                close_timeout=2,
                max_size=16 * 1024 * 1024,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            try:
                body = json.loads(exc.response.body or b"null")
            except ValueError:
                body = None
            raise error_from_body(body, status) from exc
        except (OSError, asyncio.TimeoutError, InvalidHandshake) as exc:
            raise TransportError(f"cannot open a session with {self.url}: {exc}") from exc
        heartbeat: Optional[asyncio.Task[None]] = None
        try:
            try:
                first = json.loads(await asyncio.wait_for(ws.recv(), self.connect_timeout))
            except asyncio.TimeoutError as exc:
                raise TransportError("the bus sent no welcome") from exc
            if first.get("op") != "welcome":
                raise ProtocolError(f"expected a welcome frame first, got {first.get('op')!r}")
            self.welcome = Welcome.from_json(first)
            self._identity = self.welcome.identity
            self._ws = ws
            self.sessions_opened += 1
            self._connected.set()
            self._state_changed.set()
            self.tell("reconnected" if self.sessions_opened > 1 else "connected")
            if self.sessions_opened > 1:
                log.info("reconnected to %s: session %s as %s/%s", self.url, self.welcome.session_id, self.welcome.tenant, self.welcome.identity)
            else:
                log.debug("session %s open as %s/%s", self.welcome.session_id, self.welcome.tenant, self.welcome.identity)
            self.on_open()
            heartbeat = asyncio.create_task(self._heartbeat(ws, self.welcome.heartbeat_interval_ms / 1000))
            try:
                await self._read(ws)
            except ConnectionClosed:
                pass
            return True
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            was_current = self._ws is ws
            if was_current:
                self._ws = None
                self._connected.clear()
                self._state_changed.set()
                if not self.closing:
                    self.tell("disconnected")
            self._fail_pending(TransportError("the session closed before the bus answered"))
            code = ws.close_code
            reason = ws.close_reason
            try:
                await asyncio.wait_for(ws.close(), 2)
            except (asyncio.TimeoutError, ConnectionClosed, OSError):
                pass
            if was_current:
                log.debug("session closed (code %s %s)", code, reason or "")
            if code == 1008:
                raise Unauthorized(f"the bus closed the session with 1008 ({reason or 'token rotated or agent removed'})")
            if code == 1009:
                log.error("the bus closed the session with 1009: a frame was over its size limit (1 MiB); send smaller frames")

    async def _read(self, ws: ClientConnection) -> None:
        async for raw in ws:
            self._last_rx = time.monotonic()
            try:
                frame = json.loads(raw)
            except ValueError:
                log.error("the bus sent a frame that is not JSON; ignored: %.200r", raw)
                continue
            op = frame.get("op") if isinstance(frame, dict) else None
            if op == "result":
                fut = self._pending.pop(str(frame.get("ref")), None)
                if fut is not None and not fut.done():
                    fut.set_result(frame)
                elif fut is None:
                    log.warning("a result for an unknown ref %r: %.300r", frame.get("ref"), frame)
            elif op == "signal":
                try:
                    self.delivery.on_push(frame.get("signal") or {})
                except SignalbusError as exc:
                    log.error("a signal frame this client cannot read, not acked: %s", exc)
            elif op == "pong":
                pass
            else:
                log.debug("ignoring frame op %r", op)

    async def _heartbeat(self, ws: ClientConnection, interval: float) -> None:
        interval = max(0.05, interval)
        self._last_rx = time.monotonic()
        silence_limit = max(2 * interval, 5.0) + interval
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self._last_rx > silence_limit:
                log.debug("no frame from the bus for %.1fs: dropping the session and reconnecting", silence_limit)
                ws.transport.abort()
                return
            try:
                await ws.send('{"op":"ping"}')
            except ConnectionClosed:
                return

    # -- calls over the session, or HTTP --------------------------------------------------

    async def call(
        self,
        frame: Dict[str, Any],
        via_http: Callable[[], Awaitable[T]],
        extract: Callable[[Dict[str, Any]], T],
        *,
        dedupe_key: Optional[str] = None,
    ) -> T:
        """Over the session when one is open (its result through ``extract``); over HTTP when
        none is, or when it dropped before the answer (the retry is safe: sends carry a
        dedupe_key, the other ops are idempotent)."""
        went_out = False
        if self._ws is not None:
            try:
                return extract(await self._ws_call(frame, dedupe_key=dedupe_key))
            except TransportError:
                if self._ws is not None:  # the session is still up: the call itself timed out
                    raise
                went_out = True
                if dedupe_key:
                    log.debug("the session dropped during a send; retrying it over HTTP with the same dedupe_key %s", dedupe_key)
        try:
            return await via_http()
        except TransportError as exc:
            if went_out and exc.hint == NOTHING_SENT:  # HTTP sent nothing, but the frame may have arrived
                raise TransportError(f"{exc.message}, after the session dropped with the call on it", details=exc.details) from exc
            raise

    async def transmit_send(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """One attempt at a send (the caller's, or a spool replay's); the answer's JSON."""
        key = request.get("dedupe_key")

        async def via_http() -> Dict[str, Any]:
            data: Dict[str, Any] = await self.api.request("POST", "/v1/signals", body=request, dedupe_key=key)
            return data

        return await self.call({"op": "send", **request}, via_http, lambda result: result, dedupe_key=key)

    async def _ack_ids(self, ids: List[str]) -> int:
        async def via_http() -> int:
            total = 0
            for start in range(0, len(ids), 1000):
                data = await self.api.request("POST", "/v1/inbox/ack", body={"signal_ids": ids[start : start + 1000]})
                total += int(data.get("acked", 0))
            return total

        return await self.call({"op": "ack", "signal_ids": ids}, via_http, lambda result: int(result.get("acked", 0)))

    def _fail_pending(self, exc: SignalbusError) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def _ws_call(self, frame: Dict[str, Any], *, dedupe_key: Optional[str] = None) -> Dict[str, Any]:
        """Send one frame on the session and wait for its result (raise the typed error)."""
        ws = self._ws
        if ws is None:
            raise TransportError("no open session", details={"dedupe_key": dedupe_key} if dedupe_key else None)
        self._refs += 1
        ref = f"c{self._refs}"
        fut: asyncio.Future[Dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ref] = fut
        try:
            try:
                await ws.send(json.dumps({**frame, "ref": ref}))
            except ConnectionClosed as exc:
                raise TransportError(f"the session closed while sending: {exc}") from exc
            try:
                answer = await asyncio.wait_for(asyncio.shield(fut), self._request_timeout)
            except asyncio.TimeoutError as exc:
                raise RequestTimeout(f"no answer to {frame.get('op')} within {self._request_timeout}s; the outcome is unknown") from exc
        except TransportError as exc:
            if dedupe_key:
                exc.details.setdefault("dedupe_key", dedupe_key)
            raise
        finally:
            self._pending.pop(ref, None)
        if answer.get("ok"):
            result = answer.get("result")
            return result if isinstance(result, dict) else {}
        err = error_from_body(answer.get("error") or {})
        if dedupe_key:
            err.details.setdefault("dedupe_key", dedupe_key)
        raise err


async def cancel_all(tasks: List["asyncio.Task[Any]"]) -> None:
    """Cancel ``tasks`` and wait for each; what they raised was logged by them. A task that
    swallowed its cancellation is cancelled again until it ends: Python 3.11's
    ``asyncio.wait_for`` can turn a cancel that coincides with its timeout into a
    ``TimeoutError``, which a loop like the spool replay's then waits out forever."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        while not task.done():
            await asyncio.wait({task}, timeout=RECANCEL_AFTER)
            if not task.done():
                task.cancel()
        if not task.cancelled():
            task.exception()  # retrieved, so never reported again: the task logged it
    tasks.clear()


RECANCEL_AFTER = 0.5  # seconds a cancelled task has to end before it is cancelled again
