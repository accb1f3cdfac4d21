"""The agent client: one WebSocket session kept alive, plus the HTTP API, plus the spool."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Union
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import httpx
import websockets
from websockets.asyncio.client import ClientConnection, connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidHandshake

from .errors import (
    DEFINITIVE_CODES,
    AskTimeout,
    ClientClosed,
    InvalidRequest,
    ProtocolError,
    RateLimited,
    RequestTimeout,
    SignalbusError,
    TransportError,
    Unauthorized,
    Unavailable,
    error_from_body,
)
from .spool import DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES, Spool, SpoolEntry
from .types import (
    Agent,
    Fact,
    FactPage,
    PluginState,
    RecallResult,
    Registration,
    SendOutcome,
    SendResult,
    Signal,
    SignalPage,
    SignalRow,
    Spooled,
    Welcome,
    default_ttl,
    parse_time,
)

log = logging.getLogger("signalbus_client")

Handler = Callable[[Signal], Union[None, Awaitable[None]]]


class SpoolExpired(SignalbusError):
    """A spooled send's TTL ran out before the bus was back: it was dropped, never sent."""

    code = "expired_in_spool"
    hint = "the bus was unreachable for longer than the signal's TTL; send it again if it still matters"


ReplayOutcome = Union[SendResult, SignalbusError]
ReplayCallback = Callable[[SpoolEntry, ReplayOutcome], Union[None, Awaitable[None]]]


@dataclass
class ReplayReport:
    """What one pass over the spool did."""

    replayed: List[SendResult] = field(default_factory=list)
    rejected: List[SignalbusError] = field(default_factory=list)
    expired: List[str] = field(default_factory=list)
    kept: int = 0
    stopped_by: Optional[SignalbusError] = None


def _ws_url(base: str) -> str:
    parts = urlsplit(base)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/") + "/v1/ws"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def _clean(obj: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


class _HttpApi:
    """Shared HTTP plumbing: typed errors, transport failures as TransportError."""

    def __init__(self, url: str, token: str, timeout: float, http: Optional[httpx.AsyncClient]) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be the bus's http(s) base URL, got {url!r}")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        ok_statuses: Iterable[int] = (),
        dedupe_key: Optional[str] = None,
    ) -> Any:
        url = self.url + path
        if params:
            query = urlencode({k: v for k, v in params.items() if v is not None})
            if query:
                url += "?" + query
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        details = {"dedupe_key": dedupe_key} if dedupe_key else {}
        try:
            response = await self._http.request(method, url, json=body, headers=headers, timeout=self._timeout)
        except httpx.TimeoutException as exc:
            raise RequestTimeout(f"{method} {path}: no answer within {self._timeout}s ({exc.__class__.__name__})", details=details) from exc
        except httpx.TransportError as exc:
            raise TransportError(f"{method} {path}: the bus could not be reached ({exc})", details=details) from exc
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = None
        if 200 <= response.status_code < 300 or response.status_code in ok_statuses:
            if data is None and response.status_code != 204:
                raise ProtocolError(f"{method} {path}: the bus answered {response.status_code} without a JSON body")
            return data
        if data is None and response.status_code in (502, 504):
            raise TransportError(f"{method} {path}: a proxy answered {response.status_code}; the bus may not have seen the request", status=response.status_code, details=details)
        if data is None and response.status_code == 429:
            retry = response.headers.get("retry-after")
            raise RateLimited(f"{method} {path}: rate limited", status=429, details={"retry_after_ms": float(retry) * 1000} if retry and retry.isdigit() else {})
        err = error_from_body(data, response.status_code)
        if dedupe_key and err.code == "unavailable":
            err.details.setdefault("dedupe_key", dedupe_key)
        raise err

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()


class AdminClient:
    """Admin calls with the admin token: register, rotate, remove, roster, rebuild."""

    def __init__(self, url: str, admin_token: str, *, timeout: float = 15.0, http: Optional[httpx.AsyncClient] = None) -> None:
        self._api = _HttpApi(url, admin_token, timeout, http)

    async def __aenter__(self) -> "AdminClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._api.aclose()

    async def register(self, identity: str, *, tenant: Optional[str] = None, kind: Optional[str] = None) -> Registration:
        data = await self._api.request("POST", "/v1/agents", body=_clean({"identity": identity, "tenant": tenant, "kind": kind}))
        return Registration(tenant=data["tenant"], identity=data["identity"], token=data["token"])

    async def rotate(self, identity: str, *, tenant: Optional[str] = None) -> Registration:
        """New token for ``identity``; the old one stops working at once (its sessions close 1008)."""
        data = await self._api.request("POST", f"/v1/agents/{quote(identity, safe='')}/token", params={"tenant": tenant})
        return Registration(tenant=data.get("tenant", tenant or "default"), identity=data.get("identity", identity), token=data["token"])

    async def remove(self, identity: str, *, tenant: Optional[str] = None) -> None:
        """``DELETE /v1/agents/{identity}``: the token stops working, sessions close, pending
        signals expire. A bus without the route answers 404/405 (raised as NotFound/SignalbusError)."""
        await self._api.request("DELETE", f"/v1/agents/{quote(identity, safe='')}", params={"tenant": tenant})

    async def agents(self, *, tenant: Optional[str] = None) -> List[Agent]:
        data = await self._api.request("GET", "/v1/agents", params={"tenant": tenant})
        return [Agent.from_json(a, data.get("tenant", "")) for a in data.get("agents", [])]

    async def rebuild(self) -> Dict[str, Any]:
        data: Dict[str, Any] = await self._api.request("POST", "/v1/admin/rebuild")
        return data


class Client:
    """An agent's client.

    ``await client.connect()`` opens a WebSocket session and keeps it open: it reconnects with
    jittered exponential backoff, heartbeats on the welcome's interval, delivers each pushed
    signal once to ``on_signal`` (redeliveries are deduped by id in a bounded window) and acks
    it after the handler returns (``auto_ack``). Without ``on_signal``, read signals with
    ``await client.receive()`` and ack them yourself.

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
        http: Optional[httpx.AsyncClient] = None,
    ) -> None:
        if replay_rate <= 0:
            raise ValueError("replay_rate must be positive (sends per second)")
        self._api = _HttpApi(url, token, request_timeout, http)
        self.url = self._api.url
        self._token = token
        self._ws_url = _ws_url(self.url) + (f"?kind={quote(kind)}" if kind else "")
        self._handler = on_signal
        self._auto_ack = auto_ack
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._reconnect_initial = reconnect_initial
        self._reconnect_max = reconnect_max
        self._dedupe_window = max(1, dedupe_window)
        self.spool: Optional[Spool] = (
            Spool(spool_dir, max_bytes=spool_max_bytes, max_age_seconds=spool_max_age_seconds) if spool_dir else None
        )
        self._replay_gap = 1.0 / replay_rate
        self._replay_interval = replay_interval
        self._on_replay = on_replay
        self._identity = identity

        self._ws: Optional[ClientConnection] = None
        self.welcome: Optional[Welcome] = None
        self._connected = asyncio.Event()
        self._state_changed = asyncio.Event()
        self._pending: Dict[str, asyncio.Future[Dict[str, Any]]] = {}
        self._refs = 0
        self._seen: "OrderedDict[str, bool]" = OrderedDict()  # id -> handled (True) / in progress (False)
        self._asks: Dict[str, asyncio.Future[Signal]] = {}
        self._inbox: "asyncio.Queue[Signal]" = asyncio.Queue()
        self._ack_buffer: List[str] = []
        self._tasks: List[asyncio.Task[Any]] = []
        self._ack_tasks: "set[asyncio.Task[None]]" = set()
        self._closed = asyncio.Event()
        self._fatal: Optional[SignalbusError] = None
        self._closing = False
        self._started = False
        self._replay_wakeup = asyncio.Event()
        self._replay_lock = asyncio.Lock()
        self.sessions_opened = 0
        self.duplicates_dropped = 0
        self._last_rx = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def identity(self) -> Optional[str]:
        return self.welcome.identity if self.welcome else self._identity

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

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
        if self._closing:
            raise ClientClosed("the client is closed")
        if self._started:
            return
        self._started = True
        self._tasks.append(asyncio.create_task(self._supervise(), name="signalbus-session"))
        if self._handler is not None:
            self._tasks.append(asyncio.create_task(self._dispatch(), name="signalbus-dispatch"))
        if self.spool is not None:
            self._tasks.append(asyncio.create_task(self._replay_loop(), name="signalbus-replay"))

    async def connect(self, timeout: Optional[float] = None) -> Welcome:
        """Start (see ``start``) and wait for the first session's welcome. Raises the fatal
        error (bad token, ...) if the bus refuses the session, ``RequestTimeout`` if no
        session opened within ``timeout`` (default: connect_timeout) — the client keeps trying
        in the background until ``close()``."""
        self.start()
        return await self.wait_connected(self._connect_timeout if timeout is None else timeout)

    async def wait_connected(self, timeout: Optional[float] = None) -> Welcome:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._closing:
                raise ClientClosed("the client is closed")
            if self._connected.is_set() and self.welcome is not None:
                return self.welcome
            self._state_changed.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RequestTimeout(f"no session with {self.url} within {timeout}s; still trying in the background")
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
                raise RequestTimeout(f"the session did not close within {timeout}s")
            try:
                await asyncio.wait_for(self._state_changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def close(self) -> None:
        """Flush pending acks, close the session (1000) and stop every background task."""
        if self._closing:
            return
        if self._ack_buffer and self._connected.is_set():
            try:
                await asyncio.wait_for(self._flush_acks(), 2.0)
            except (asyncio.TimeoutError, SignalbusError) as exc:
                log.warning("acks not sent before close (%s): those signals come back on the next session", exc)
        self._closing = True
        self._closed.set()
        self._signal_state()
        ws = self._ws
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(1000, "client closed"), 2.0)
            except (asyncio.TimeoutError, ConnectionClosed, OSError):
                pass
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - already logged by the task
                pass
        self._tasks.clear()
        self._fail_pending(ClientClosed("the client was closed before the bus answered; the outcome is unknown"))
        for fut in self._asks.values():
            if not fut.done():
                fut.set_exception(ClientClosed("the client was closed while waiting for a reply"))
        await self._api.aclose()

    async def drop_connection(self) -> None:
        """Abort the current WebSocket without a close handshake (as a network failure would);
        the client reconnects. Meant for tests and for callers who know the link is dead."""
        ws = self._ws
        if ws is not None:
            ws.transport.abort()

    # -- session ---------------------------------------------------------------------------

    def _signal_state(self) -> None:
        self._state_changed.set()

    async def _supervise(self) -> None:
        attempt = 0
        while not self._closing:
            opened = False
            try:
                opened = await self._session()
            except SignalbusError as exc:
                if isinstance(exc, (Unauthorized, InvalidRequest)) or exc.code == "forbidden":
                    self._fatal = exc
                    log.error("the bus refused the session, not reconnecting: %s", exc)
                    self._fail_pending(exc)
                    self._signal_state()
                    return
                log.warning("session to %s failed: %s", self.url, exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported, then reconnect
                log.warning("session to %s failed: %r", self.url, exc)
            if self._closing:
                return
            attempt = 0 if opened else attempt + 1
            ceiling = min(self._reconnect_max, self._reconnect_initial * (2 ** min(attempt, 30)))
            delay = random.uniform(ceiling / 2, ceiling)
            log.info("reconnecting to %s in %.2fs (attempt %d)", self.url, delay, attempt + 1)
            await asyncio.sleep(delay)

    async def _session(self) -> bool:
        """One session: connect, welcome, read until closed. True when a welcome was received."""
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            ws = await ws_connect(
                self._ws_url,
                additional_headers=headers,
                open_timeout=self._connect_timeout,
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
                first = json.loads(await asyncio.wait_for(ws.recv(), self._connect_timeout))
            except asyncio.TimeoutError as exc:
                raise TransportError("the bus sent no welcome") from exc
            if first.get("op") != "welcome":
                raise ProtocolError(f"expected a welcome frame first, got {first.get('op')!r}")
            self.welcome = Welcome.from_json(first)
            self._identity = self.welcome.identity
            self._ws = ws
            self.sessions_opened += 1
            self._connected.set()
            self._signal_state()
            log.info("session %s open as %s/%s", self.welcome.session_id, self.welcome.tenant, self.welcome.identity)
            self._replay_wakeup.set()
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
                self._signal_state()
            self._fail_pending(TransportError("the session closed before the bus answered; the outcome is unknown: retry with the same dedupe_key"))
            code = ws.close_code
            reason = ws.close_reason
            try:
                await asyncio.wait_for(ws.close(), 2)
            except (asyncio.TimeoutError, ConnectionClosed, OSError):
                pass
            if was_current:
                log.info("session closed (code %s %s)", code, reason or "")
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
                    self._on_push(frame.get("signal") or {})
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
                log.warning("no frame from the bus for %.1fs: dropping the session and reconnecting", silence_limit)
                ws.transport.abort()
                return
            try:
                await ws.send('{"op":"ping"}')
            except ConnectionClosed:
                return

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

    # -- receiving -------------------------------------------------------------------------

    def _remember(self, signal_id: str, handled: bool) -> None:
        self._seen[signal_id] = handled
        self._seen.move_to_end(signal_id)
        while len(self._seen) > self._dedupe_window:
            self._seen.popitem(last=False)

    def _on_push(self, obj: Mapping[str, Any]) -> None:
        sig = Signal.from_json(obj)
        if sig.id in self._seen:
            handled = self._seen[sig.id]
            self.duplicates_dropped += 1
            log.debug("duplicate signal %s (redelivered=%s) dropped", sig.id, sig.redelivered)
            if handled and self._auto_ack:
                self._queue_ack(sig.id)  # the first ack may have died with the old session
            return
        if sig.correlation_id and sig.correlation_id in self._asks:
            fut = self._asks.pop(sig.correlation_id)
            self._remember(sig.id, True)
            if not fut.done():
                fut.set_result(sig)
            if self._auto_ack:
                self._queue_ack(sig.id)
            return
        self._remember(sig.id, False)
        self._inbox.put_nowait(sig)

    def _queue_ack(self, signal_id: str) -> None:
        self._ack_buffer.append(signal_id)
        if len(self._ack_buffer) >= 100 or self._inbox.empty():
            task = asyncio.get_running_loop().create_task(self._flush_acks_logged())
            self._ack_tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self._ack_tasks.discard)

    async def _flush_acks_logged(self) -> None:
        try:
            await self._flush_acks()
        except SignalbusError as exc:
            log.warning("ack not sent (%s): the signals come back on the next session and are deduped", exc)

    async def _flush_acks(self) -> None:
        ids, self._ack_buffer = self._ack_buffer, []
        if ids:
            await self._ack_ids(ids)

    async def _dispatch(self) -> None:
        handler = self._handler
        assert handler is not None
        while True:
            sig = await self._inbox.get()
            try:
                outcome = handler(sig)
                if inspect.isawaitable(outcome):
                    await outcome
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the signal handler failed for %s; not acked: it comes back on the next session", sig.id)
                self._seen.pop(sig.id, None)
                continue
            self._remember(sig.id, True)
            if self._auto_ack:
                self._queue_ack(sig.id)

    async def receive(self, timeout: Optional[float] = None) -> Signal:
        """The next pushed signal (when no ``on_signal`` handler is set). Ack it with ``ack``."""
        if self._handler is not None:
            raise InvalidRequest("this client has an on_signal handler: signals go there, not to receive()")
        if self._closing:
            raise ClientClosed("the client is closed")
        getter = asyncio.ensure_future(self._inbox.get())
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            done, _ = await asyncio.wait({getter, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not getter.done():
                getter.cancel()
        if getter in done:
            return getter.result()
        if closed in done:
            raise ClientClosed("the client was closed while waiting for a signal")
        raise RequestTimeout(f"no signal within {timeout}s")

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
        Raises the typed error otherwise: ``RecipientUnavailable`` for a bounced sync send
        (``.recipient_state``, ``.signal_id``), ``UnknownRecipient``, ``InvalidRequest``, ...
        """
        key = dedupe_key or f"sbc-{uuid.uuid4()}"
        request = _clean(
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
            return SendResult.from_json(await self._transmit_send(request), key)
        except (TransportError, Unavailable) as exc:
            if self.spool is None or not spool:
                raise
            return self._spool_send(request, exc)

    async def _transmit_send(self, request: Dict[str, Any]) -> Dict[str, Any]:
        key = request.get("dedupe_key")
        if self._ws is not None:
            try:
                return await self._ws_call({"op": "send", **request}, dedupe_key=key)
            except TransportError:
                if self._ws is not None:  # the session is still up: the call itself timed out
                    raise
                log.info("the session dropped during a send; retrying it over HTTP with the same dedupe_key %s", key)
        data: Dict[str, Any] = await self._api.request("POST", "/v1/signals", body=request, dedupe_key=key)
        return data

    def _spool_send(self, request: Dict[str, Any], exc: SignalbusError) -> Spooled:
        assert self.spool is not None
        ttl = request.pop("ttl_seconds", None)
        if ttl is None:
            ttl = default_ttl(str(request["type"]))
        entry = self.spool.put(request, ttl_seconds=int(ttl), identity=self.identity, reason=f"{exc.code}: {exc.message}")
        log.warning("the bus could not take the send (%s): spooled as %s, replayed when it is back", exc.code, entry.name)
        self._replay_wakeup.set()
        return Spooled(
            dedupe_key=str(request["dedupe_key"]),
            entry=entry.name,
            reason=entry.reason,
            spooled_at=entry.spooled_at,
            ttl_seconds=entry.ttl_seconds,
        )

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
        carrying it (acked when ``auto_ack``). Needs the session (``connect()``). Raises
        ``AskTimeout`` (with ``signal_id``) when no reply comes within ``timeout`` seconds, and
        the send's typed error if the send fails (``RecipientUnavailable``, ...)."""
        if not self._started:
            raise InvalidRequest("ask needs the session for the reply: call connect() first")
        cid = uuid.uuid4().hex
        fut: asyncio.Future[Signal] = asyncio.get_running_loop().create_future()
        self._asks[cid] = fut
        started = time.monotonic()
        try:
            sent = await self.send(to, type, payload, correlation_id=cid, **kwargs)
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
            self._asks.pop(cid, None)

    async def recall(self, signal_id: str) -> RecallResult:
        """Recall a signal you sent (CONTRACT §6): ``recalled``, ``already_delivered``,
        ``already_expired`` or ``not_found``."""
        if self._ws is not None:
            try:
                data = await self._ws_call({"op": "recall", "signal_id": signal_id})
                return RecallResult(outcome=data["outcome"])
            except TransportError:
                if self._ws is not None:
                    raise
        data = await self._api.request("POST", f"/v1/signals/{quote(signal_id, safe='')}/recall", ok_statuses=(404,))
        if not isinstance(data, dict) or "outcome" not in data:
            raise error_from_body(data, 404)
        return RecallResult(outcome=data["outcome"])

    async def ack(self, *signals: Union[Signal, str, Iterable[Union[Signal, str]]]) -> int:
        """Ack delivered signals (or ids). Returns how many the bus took (ids that are not
        yours, not delivered or already acked are skipped by the bus)."""
        ids: List[str] = []
        for item in signals:
            if isinstance(item, (Signal, str)):
                ids.append(item.id if isinstance(item, Signal) else item)
            else:
                ids.extend(s.id if isinstance(s, Signal) else s for s in item)
        for i in ids:
            if i in self._seen:
                self._remember(i, True)
        return await self._ack_ids(ids) if ids else 0

    async def _ack_ids(self, ids: List[str]) -> int:
        if self._ws is not None:
            try:
                data = await self._ws_call({"op": "ack", "signal_ids": ids})
                return int(data.get("acked", 0))
            except TransportError:
                if self._ws is not None:
                    raise
        total = 0
        for start in range(0, len(ids), 1000):
            data = await self._api.request("POST", "/v1/inbox/ack", body={"signal_ids": ids[start : start + 1000]})
            total += int(data.get("acked", 0))
        return total

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
        if self._ws is not None:
            try:
                data = await self._ws_call({"op": "fact", "plugin": plugin, "fact_type": fact_type, "state": state})
                return int(data["seq"])
            except TransportError:
                if self._ws is not None:
                    raise
        data = await self._api.request(
            "POST", f"/v1/plugins/{quote(plugin, safe='')}/facts", body={"fact_type": fact_type, "state": state}
        )
        return int(data["seq"])

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

    # -- spool replay ----------------------------------------------------------------------

    async def _replay_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._replay_wakeup.wait(), self._replay_interval)
            except asyncio.TimeoutError:
                pass
            self._replay_wakeup.clear()
            if self.spool is None or len(self.spool) == 0:
                continue
            try:
                report = await self.replay_spool()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged; the loop must go on
                log.exception("spool replay failed; retrying in %ss", self._replay_interval)
                continue
            if isinstance(report.stopped_by, RateLimited) and report.stopped_by.retry_after:
                await asyncio.sleep(report.stopped_by.retry_after)

    async def _report(self, entry: SpoolEntry, outcome: ReplayOutcome) -> None:
        if self._on_replay is None:
            return
        try:
            result = self._on_replay(entry, outcome)
            if inspect.isawaitable(result):
                await result
        except Exception:  # noqa: BLE001 - the callback's failure must not stop the replay
            log.exception("the on_replay callback failed for %s", entry.name)

    async def replay_spool(self) -> ReplayReport:
        """Replay the spool once, newest first, at most ``replay_rate`` sends per second.

        An entry is deleted only once the bus answered it: accepted (200), or refused for good
        (a 4xx such as ``recipient_unavailable`` or ``unknown_recipient``, reported to
        ``on_replay`` and logged). It is kept when the bus is unreachable, times out, answers
        503, 429 or 500 — the pass stops there and the next one (every ``replay_interval``
        seconds, and at each new session) goes on. An entry whose TTL ran out is dropped.
        Each replay carries the entry's ``dedupe_key`` and the TTL it has left, so a replay of
        a send the bus did store answers that signal and never creates a second one.
        """
        report = ReplayReport()
        if self.spool is None:
            return report
        async with self._replay_lock:
            entries = self.spool.entries()
            last = 0.0
            for index, entry in enumerate(entries):
                if self._closing:
                    report.kept = len(entries) - index
                    break
                if entry.identity and self.identity and entry.identity != self.identity:
                    log.warning("spool entry %s was spooled by %s, not %s: left for that identity", entry.name, entry.identity, self.identity)
                    report.kept += 1
                    continue
                remaining = entry.remaining_ttl()
                if remaining < 1:
                    self.spool.delete(entry)
                    log.warning("spooled send %s (dedupe_key %s) expired in the spool: dropped", entry.name, entry.dedupe_key)
                    report.expired.append(entry.dedupe_key)
                    await self._report(entry, SpoolExpired(f"spooled send {entry.dedupe_key} expired before the bus was back", details={"dedupe_key": entry.dedupe_key}))
                    continue
                wait = last + self._replay_gap - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                last = time.monotonic()
                request = {**entry.request, "ttl_seconds": remaining}
                try:
                    result = SendResult.from_json(await self._transmit_send(request), entry.dedupe_key)
                except SignalbusError as exc:
                    if exc.code in DEFINITIVE_CODES:
                        self.spool.delete(entry)
                        log.warning("the bus refused spooled send %s (dedupe_key %s) for good: %s", entry.name, entry.dedupe_key, exc)
                        report.rejected.append(exc)
                        await self._report(entry, exc)
                        continue
                    report.kept = len(entries) - index
                    report.stopped_by = exc
                    log.info("spool replay paused, %d entries kept: %s", report.kept, exc)
                    break
                self.spool.delete(entry)
                log.info("replayed spooled send %s as signal %s (%s)", entry.dedupe_key, result.signal_id, result.publish_path)
                report.replayed.append(result)
                await self._report(entry, result)
        return report

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

    list_signals = list
