"""The spool's traffic: a send the bus could not take goes in (``Replayer.spool_send``) and the
replay takes it out — newest first, rate-limited, each entry with the TTL it has left and its
dedupe_key, deleted only once the bus answered it for good (accepted, or a definitive 4xx).

Deliberately below the facade: it sends through the session engine (``Session.transmit_send``)
and never imports ``client.py``. A pass stops at the first answer that may change later (503,
429, 500, a timeout, the bus unreachable): older entries stay untouched until the next pass.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from .errors import DEFINITIVE_CODES, RateLimited, SignalbusError
from .session import Session, cancel_all
from .spool import Spool, SpoolEntry
from .types import SendResult, Spooled, default_ttl, format_time

log = logging.getLogger("signalbus_client")


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


class Replayer:
    """Writes sends to ``spool`` and replays it: at each new session (``wake``), every
    ``interval`` seconds while it is not empty, and when a caller asks (``replay_spool``)."""

    def __init__(
        self, spool: Spool, session: Session, *, rate: float, interval: float, on_replay: Optional[ReplayCallback]
    ) -> None:
        self.spool = spool
        self._session = session
        self._gap = 1.0 / rate
        self._interval = interval
        self._on_replay = on_replay
        self._wakeup = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tasks: List[asyncio.Task[Any]] = []

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._replay_loop(), name="signalbus-replay"))

    async def stop(self) -> None:
        await cancel_all(self._tasks)

    def wake(self) -> None:
        self._wakeup.set()

    def spool_send(self, request: Dict[str, Any], exc: SignalbusError) -> Spooled:
        """Spool a send the bus could not take; what ``send`` returns for it."""
        ttl = request.pop("ttl_seconds", None)
        if ttl is None:
            ttl = default_ttl(str(request["type"]))
        after = request.pop("deliver_after_seconds", None)
        if after is not None:  # a delay from now, kept as the instant it names (replayed later)
            request["deliver_at"] = format_time(datetime.now(timezone.utc) + timedelta(seconds=float(after)))
        entry = self.spool.put(request, ttl_seconds=int(ttl), identity=self._session.identity, reason=f"{exc.code}: {exc.message}")
        log.debug("the bus could not take the send (%s): spooled as %s, replayed when it is back", exc.code, entry.name)
        self._wakeup.set()
        return Spooled(
            dedupe_key=str(request["dedupe_key"]),
            entry=entry.name,
            reason=entry.reason,
            spooled_at=entry.spooled_at,
            ttl_seconds=entry.ttl_seconds,
        )

    async def _replay_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wakeup.wait(), self._interval)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()
            if len(self.spool) == 0:
                continue
            try:
                report = await self.replay_spool()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged; the loop must go on
                log.exception("spool replay failed; retrying in %ss", self._interval)
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
        async with self._lock:
            entries = self.spool.entries()
            last = 0.0
            for index, entry in enumerate(entries):
                if self._session.closing:
                    report.kept = len(entries) - index
                    break
                if entry.identity and self._session.identity and entry.identity != self._session.identity:
                    log.warning("spool entry %s was spooled by %s, not %s: left for that identity", entry.name, entry.identity, self._session.identity)
                    report.kept += 1
                    continue
                now = time.time()
                remaining = entry.remaining_ttl(now)
                if remaining < 1:
                    self.spool.delete(entry)
                    log.warning("spooled send %s (dedupe_key %s) expired in the spool: dropped", entry.name, entry.dedupe_key)
                    report.expired.append(entry.dedupe_key)
                    await self._report(entry, SpoolExpired(f"spooled send {entry.dedupe_key} expired before the bus was back", details={"dedupe_key": entry.dedupe_key}))
                    continue
                wait = last + self._gap - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                last = time.monotonic()
                request = entry.replay_request(now)
                try:
                    result = SendResult.from_json(await self._session.transmit_send(request), entry.dedupe_key)
                except SignalbusError as exc:
                    if exc.code in DEFINITIVE_CODES:
                        self.spool.delete(entry)
                        log.warning("the bus refused spooled send %s (dedupe_key %s) for good: %s", entry.name, entry.dedupe_key, exc)
                        report.rejected.append(exc)
                        await self._report(entry, exc)
                        continue
                    report.kept = len(entries) - index
                    report.stopped_by = exc
                    log.debug("spool replay paused, %d entries kept: %s", report.kept, exc)
                    break
                self.spool.delete(entry)
                log.debug("replayed spooled send %s as signal %s (%s)", entry.dedupe_key, result.signal_id, result.publish_path)
                report.replayed.append(result)
                await self._report(entry, result)
        return report
