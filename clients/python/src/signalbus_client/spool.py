"""The offline buffer (the Wingman design, ADR 0001 §4): a directory of JSON files, one per send
the bus could not take, replayed newest-first when the bus is back.

File name: ``send-<ISO8601 UTC, ':' as '-'>-<seq>-<random>.json`` (the Wingman pattern
``<payload_type>-<ISO8601UTC>-<seq>.json``), so names sort by the time they were spooled. Each
file is written to a temporary name, fsynced and renamed, so a crash never leaves half an entry.
The Python and TypeScript clients read and write the same format (``version`` 1)::

    {"version": 1, "kind": "send", "spooled_at": "2026-05-03T12:00:00.123Z",
     "identity": "alice" | null, "ttl_seconds": 3600, "reason": "...",
     "request": {"to", "type", "payload", "delivery_class"?, "correlation_id"?, "dedupe_key"}}

``ttl_seconds`` is the send's TTL when it was spooled (the caller's, or the type's CONTRACT §3
default); a replay sends what is left of it and drops the entry once it has run out. A scheduled
send (CONTRACT §16) keeps an absolute ``deliver_at`` in its request (a ``deliver_after_seconds``
becomes one when it is spooled): its TTL runs from then, and a replay once it is due (less than a
second ahead) sends it without ``deliver_at``, at once.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from .errors import SpoolFull
from .types import parse_time

log = logging.getLogger("signalbus_client.spool")

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_AGE_SECONDS = 24 * 3600

# A scheduled send due sooner than this is replayed at once, without its deliver_at (which the
# bus would refuse once it has passed).
SCHEDULE_MARGIN_SECONDS = 1.0

_seq = itertools.count()


@dataclass(frozen=True)
class SpoolEntry:
    name: str
    path: Path
    size: int
    spooled_at: datetime
    identity: Optional[str]
    ttl_seconds: int
    reason: str
    request: Mapping[str, Any]

    @property
    def dedupe_key(self) -> str:
        return str(self.request.get("dedupe_key"))

    def age_seconds(self, now: Optional[float] = None) -> float:
        now = time.time() if now is None else now
        return max(0.0, now - self.spooled_at.timestamp())

    @property
    def deliver_at(self) -> Optional[datetime]:
        """When a scheduled send is due (its request's ``deliver_at``); ``None`` when it is not
        scheduled (or the field is unreadable: the bus will say so at replay)."""
        value = self.request.get("deliver_at")
        try:
            return parse_time(value) if isinstance(value, str) else None
        except ValueError:
            return None

    def remaining_ttl(self, now: Optional[float] = None) -> int:
        """Whole seconds of TTL left (≤ 0: expired while spooled). A scheduled send's TTL runs
        from its ``deliver_at`` (CONTRACT §16: ``expires_at = deliver_at + ttl``)."""
        now = time.time() if now is None else now
        start = self.spooled_at.timestamp()
        due = self.deliver_at
        if due is not None:
            start = max(start, due.timestamp())
        return int(self.ttl_seconds - max(0.0, now - start))

    def replay_request(self, now: Optional[float] = None) -> Dict[str, Any]:
        """What a replay sends: the request with the TTL left, and a scheduled send's
        ``deliver_at`` only while it is still ahead — once due it is sent at once."""
        now = time.time() if now is None else now
        request = {**self.request, "ttl_seconds": self.remaining_ttl(now)}
        due = self.deliver_at
        if due is not None and due.timestamp() - now < SCHEDULE_MARGIN_SECONDS:
            del request["deliver_at"]
        return request


def _stamp(t: float) -> tuple[str, str]:
    dt = datetime.fromtimestamp(t, tz=timezone.utc)
    iso = dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return iso, iso.replace(":", "-")


def _name_time(name: str) -> Optional[float]:
    """The time a file name says it was spooled (``send-2026-05-03T12-00-00.123Z-…``)."""
    stamp = name[5:29]
    try:
        dt = datetime.strptime(stamp, "%Y-%m-%dT%H-%M-%S.%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return dt.timestamp()


class Spool:
    """A directory of spooled sends with a size cap and an age cap, evicting oldest first."""

    def __init__(
        self,
        directory: "str | os.PathLike[str]",
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
    ) -> None:
        if max_bytes <= 0:
            raise ValueError("spool max_bytes must be positive")
        if max_age_seconds <= 0:
            raise ValueError("spool max_age_seconds must be positive")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.max_age_seconds = max_age_seconds
        self.directory.mkdir(parents=True, exist_ok=True)

    # -- reading ---------------------------------------------------------------------------

    def _load(self, path: Path) -> Optional[SpoolEntry]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None  # replayed and deleted by another client sharing the directory
        try:
            obj = json.loads(raw)
            if obj.get("version") != 1 or obj.get("kind") != "send":
                raise ValueError(f"unsupported spool entry version/kind {obj.get('version')!r}/{obj.get('kind')!r}")
            request = obj["request"]
            if not isinstance(request, dict) or not request.get("dedupe_key"):
                raise ValueError("the entry's request has no dedupe_key")
            return SpoolEntry(
                name=path.name,
                path=path,
                size=len(raw),
                spooled_at=parse_time(obj["spooled_at"]),  # type: ignore[arg-type]
                identity=obj.get("identity"),
                ttl_seconds=int(obj["ttl_seconds"]),
                reason=str(obj.get("reason", "")),
                request=request,
            )
        except (ValueError, KeyError, TypeError) as exc:
            bad = path.with_name(path.name + ".bad")
            log.error("spool entry %s is unreadable (%s); moved to %s and never replayed", path, exc, bad.name)
            try:
                path.rename(bad)
            except OSError as rename_exc:
                log.error("could not move unreadable spool entry %s aside: %s", path, rename_exc)
            return None

    def _paths(self) -> List[Path]:
        return sorted(p for p in self.directory.glob("send-*.json") if p.is_file())

    def entries(self) -> List[SpoolEntry]:
        """Every entry, newest first, after evicting those past the age cap."""
        self.evict()
        out = [e for e in (self._load(p) for p in self._paths()) if e is not None]
        out.sort(key=lambda e: (e.spooled_at, e.name), reverse=True)
        return out

    def __len__(self) -> int:
        return len(self._paths())

    def total_bytes(self) -> int:
        total = 0
        for p in self._paths():
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
        return total

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        request: Mapping[str, Any],
        *,
        ttl_seconds: int,
        identity: Optional[str],
        reason: str,
        now: Optional[float] = None,
    ) -> SpoolEntry:
        if not request.get("dedupe_key"):
            raise ValueError("a spooled send needs a dedupe_key")
        now = time.time() if now is None else now
        iso, file_stamp = _stamp(now)
        doc = {
            "version": 1,
            "kind": "send",
            "spooled_at": iso,
            "identity": identity,
            "ttl_seconds": int(ttl_seconds),
            "reason": reason,
            "request": dict(request),
        }
        data = json.dumps(doc, separators=(",", ":")).encode()
        if len(data) > self.max_bytes:
            raise SpoolFull(
                f"the send is {len(data)} bytes encoded, more than the whole spool ({self.max_bytes} bytes); nothing was spooled",
                details={"dedupe_key": request.get("dedupe_key")},
            )
        self.evict(now=now, room_for=len(data))
        name = f"send-{file_stamp}-{next(_seq) % 1_000_000:06d}-{secrets.token_hex(4)}.json"
        path = self.directory / name
        tmp = self.directory / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # payloads may be private
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return SpoolEntry(
            name=name,
            path=path,
            size=len(data),
            spooled_at=parse_time(iso),  # type: ignore[arg-type]
            identity=identity,
            ttl_seconds=int(ttl_seconds),
            reason=reason,
            request=doc["request"],  # type: ignore[arg-type]
        )

    def delete(self, entry: "SpoolEntry | str") -> None:
        name = entry.name if isinstance(entry, SpoolEntry) else entry
        try:
            (self.directory / name).unlink()
        except FileNotFoundError:
            pass

    def evict(self, *, now: Optional[float] = None, room_for: int = 0) -> List[str]:
        """Delete entries past the age cap, then the oldest until ``room_for`` more bytes fit
        under the size cap. Returns the names evicted (each is logged as a warning)."""
        now = time.time() if now is None else now
        evicted: List[str] = []
        sized: List[tuple[Path, int]] = []
        for p in self._paths():  # oldest first (names sort by time)
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            age = now - (_name_time(p.name) or st.st_mtime)
            if age > self.max_age_seconds:
                log.warning("spool entry %s is older than %ss: evicted, never replayed", p.name, self.max_age_seconds)
                self.delete(p.name)
                evicted.append(p.name)
            else:
                sized.append((p, st.st_size))
        total = sum(size for _, size in sized)
        for p, size in sized:
            if total + room_for <= self.max_bytes:
                break
            log.warning("spool is over %s bytes: evicted its oldest entry %s, never replayed", self.max_bytes, p.name)
            self.delete(p.name)
            evicted.append(p.name)
            total -= size
        return evicted
