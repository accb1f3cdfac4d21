"""Delivery of pushed signals: each one once (redeliveries dropped by id in a bounded window,
re-acked when already handled), to a route that claims it (a ``run_directive`` waiting, an
``on_directive`` worker), to a waiting ``ask``, to the handler or to ``receive()``; and the
acks after the handler returns, batched.

Deliberately no I/O of its own: the session engine (``session.py``) hands it each pushed
signal and gives it the function that sends an ack batch, so it imports neither the session
nor the facade.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Union

from .errors import ClientClosed, RequestTimeout, SignalbusError, UsageError
from .types import Signal

log = logging.getLogger("signalbus_client")

Handler = Callable[[Signal], Union[None, Awaitable[None]]]


class Route:
    """A claim on pushed signals: each one ``match`` accepts goes to ``take`` instead of the
    handler or ``receive()``. The taker settles it (``Delivery.settle``) when it is done with it:
    only then is it acked (until then a redelivery is dropped as a duplicate)."""

    def __init__(self, match: Callable[[Signal], bool], take: Callable[[Signal], None]) -> None:
        self.match = match
        self.take = take


class Delivery:
    """The dedupe window, the inbox, the asks waiting for replies and the ack buffer."""

    def __init__(
        self,
        *,
        handler: Optional[Handler],
        auto_ack: bool,
        dedupe_window: int,
        send_acks: Callable[[List[str]], Awaitable[int]],
        max_concurrent_handlers: int = 1,
    ) -> None:
        if isinstance(max_concurrent_handlers, bool) or not isinstance(max_concurrent_handlers, int):
            raise TypeError("max_concurrent_handlers must be an int")
        if max_concurrent_handlers < 1:
            raise UsageError(f"max_concurrent_handlers must be at least 1, got {max_concurrent_handlers}")
        self.handler = handler
        self.max_concurrent_handlers = max_concurrent_handlers
        self._running: "set[asyncio.Task[None]]" = set()
        self._auto_ack = auto_ack
        self._dedupe_window = max(1, dedupe_window)
        self._send_acks = send_acks
        self._seen: "OrderedDict[str, bool]" = OrderedDict()  # id -> handled (True) / in progress (False)
        self._asks: Dict[str, asyncio.Future[Signal]] = {}
        self._routes: List[Route] = []
        self._inbox: "asyncio.Queue[Signal]" = asyncio.Queue()
        self._ack_buffer: List[str] = []
        self._ack_tasks: "set[asyncio.Task[None]]" = set()
        self._closed = asyncio.Event()
        self._closing = False
        self.duplicates_dropped = 0

    @property
    def acks_waiting(self) -> bool:
        return bool(self._ack_buffer)

    def close(self) -> None:
        """No more signals: ``receive()`` ends with ``ClientClosed``."""
        self._closing = True
        self._closed.set()

    def fail_asks(self) -> None:
        for fut in self._asks.values():
            if not fut.done():
                fut.set_exception(ClientClosed("the client was closed while waiting for a reply"))

    async def ack(self, ids: List[str]) -> int:
        """Ack ``ids`` (marking the ones seen as handled, so a redelivery is re-acked)."""
        for i in ids:
            if i in self._seen:
                self._remember(i, True)
        return await self._send_acks(ids) if ids else 0

    def expect_reply(self, correlation_id: str) -> "asyncio.Future[Signal]":
        """A future resolved by the first pushed signal carrying ``correlation_id``."""
        fut: asyncio.Future[Signal] = asyncio.get_running_loop().create_future()
        self._asks[correlation_id] = fut
        return fut

    def forget_reply(self, correlation_id: str) -> None:
        self._asks.pop(correlation_id, None)

    def add_route(self, route: Route) -> Route:
        """Claim the signals ``route.match`` accepts (checked newest route first, before asks)."""
        self._routes.insert(0, route)
        return route

    def remove_route(self, route: Route) -> None:
        if route in self._routes:
            self._routes.remove(route)

    def settle(self, signal_id: str) -> None:
        """A routed signal is done with: remember it as handled and ack it (always — its taker
        consumed it, and no caller ever sees it to ack it)."""
        self._remember(signal_id, True)
        self._queue_ack(signal_id, now=True)

    def release(self, signal_id: str) -> None:
        """A routed signal its taker gave up on: forgotten, not acked — the bus hands it out
        again on the next session, and it is taken again then."""
        self._seen.pop(signal_id, None)

    def _remember(self, signal_id: str, handled: bool) -> None:
        self._seen[signal_id] = handled
        self._seen.move_to_end(signal_id)
        while len(self._seen) > self._dedupe_window:
            self._seen.popitem(last=False)

    def on_push(self, obj: Mapping[str, Any]) -> None:
        sig = Signal.from_json(obj)
        if sig.id in self._seen:
            handled = self._seen[sig.id]
            self.duplicates_dropped += 1
            log.debug("duplicate signal %s (redelivered=%s) dropped", sig.id, sig.redelivered)
            if handled and self._auto_ack:
                self._queue_ack(sig.id)  # the first ack may have died with the old session
            return
        for route in self._routes:
            if route.match(sig):
                self._remember(sig.id, False)
                route.take(sig)
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

    def _queue_ack(self, signal_id: str, *, now: bool = False) -> None:
        self._ack_buffer.append(signal_id)
        if now or len(self._ack_buffer) >= 100 or self._inbox.empty():
            task = asyncio.get_running_loop().create_task(self._flush_acks_logged())
            self._ack_tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self._ack_tasks.discard)

    async def _flush_acks_logged(self) -> None:
        try:
            await self.flush_acks()
        except SignalbusError as exc:
            log.warning("ack not sent (%s): the signals come back on the next session and are deduped", exc)

    async def flush_acks(self) -> None:
        ids, self._ack_buffer = self._ack_buffer, []
        if ids:
            await self._send_acks(ids)

    async def dispatch(self) -> None:
        """Hand each queued signal to the handler, starting them in arrival order with at most
        ``max_concurrent_handlers`` running at once (1: one after the other). Each is acked when
        its own handler returns; cancelled (with the handlers running) when the client closes."""
        limit = asyncio.Semaphore(self.max_concurrent_handlers)
        try:
            while True:
                sig = await self._inbox.get()
                await limit.acquire()
                task = asyncio.create_task(self._handle(sig, limit), name=f"signalbus-handler-{sig.id}")
                self._running.add(task)
                task.add_done_callback(self._running.discard)
        finally:
            for task in list(self._running):
                task.cancel()

    async def _handle(self, sig: Signal, limit: asyncio.Semaphore) -> None:
        handler = self.handler
        assert handler is not None
        try:
            try:
                outcome = handler(sig)
                if inspect.isawaitable(outcome):
                    await outcome
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the signal handler failed for %s; not acked: it comes back on the next session", sig.id)
                self._seen.pop(sig.id, None)
                return
            self._remember(sig.id, True)
            if self._auto_ack:
                self._queue_ack(sig.id)
        finally:
            limit.release()

    async def receive(self, timeout: Optional[float] = None) -> Signal:
        """The next pushed signal (when no ``on_signal`` handler is set). Ack it with ``ack``."""
        if self.handler is not None:
            raise UsageError("this client has an on_signal handler: signals go there, not to receive()")
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
        raise RequestTimeout(f"no signal within {timeout}s", hint="nothing arrived in time: call receive() again")
