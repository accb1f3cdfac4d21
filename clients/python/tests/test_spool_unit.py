"""Spool decisions for answers the embedded bus cannot be made to give on demand (503, 429,
500, timeouts): a stub HTTP transport answers instead of the bus (SCENARIOS.md S18)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, List

import httpx
import pytest

from signalbus_client import Client, RateLimited, SendResult, Spooled, Unavailable

OK = {
    "signal_id": "5d1e0000-0000-4000-8000-000000000001",
    "delivered": False,
    "queued": True,
    "recipient_state": "not_available_offline",
    "delivery_class": "async",
    "created_at": "2026-05-03T12:00:00.123456Z",
    "expires_at": "2026-05-03T13:00:00.123456Z",
    "resolved_to_session": None,
    "publish_path": "queued_offline",
}


def stub(answer: Callable[[dict], httpx.Response], seen: List[dict]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        return answer(body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def err(status: int, code: str, **extra: object) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": f"stub {code}", **extra}})


async def test_503_spools_and_429_raises(tmp_path: Path) -> None:
    seen: List[dict] = []
    answers = iter([err(503, "unavailable"), err(429, "rate_limited", retry_after_ms=1500)])
    client = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(lambda b: next(answers), seen))
    out = await client.send("bob", "StatusUpdate", {"n": 1}, ttl_seconds=600)
    assert isinstance(out, Spooled) and out.reason.startswith("unavailable") and out.ttl_seconds == 600
    assert out.spooled and out.signal_id is None  # like TS `spooled: true, signalId: null` and Rust `signal_id() == None`
    assert seen[0]["dedupe_key"] == out.dedupe_key  # the key generated before the first attempt
    with pytest.raises(RateLimited) as limited:
        await client.send("bob", "StatusUpdate", {"n": 2})
    assert limited.value.retry_after == 1.5 and len(client.spool) == 1  # type: ignore[arg-type]
    await client.close()


async def test_without_a_spool_503_raises_with_the_dedupe_key(tmp_path: Path) -> None:
    seen: List[dict] = []
    client = Client("http://stub", "tok", http=stub(lambda b: err(503, "unavailable"), seen))
    with pytest.raises(Unavailable) as unavailable:
        await client.send("bob", "StatusUpdate", dedupe_key="k-1")
    assert unavailable.value.details["dedupe_key"] == "k-1" and "dedupe_key" in unavailable.value.hint
    spooling = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(lambda b: err(503, "unavailable"), seen))
    with pytest.raises(Unavailable):
        await spooling.send("bob", "StatusUpdate", spool=False)
    await client.close()
    await spooling.close()


async def test_replay_deletes_only_what_the_bus_answered(tmp_path: Path) -> None:
    seen: List[dict] = []
    by_key = {
        "d": httpx.Response(200, json=OK),
        "c": err(409, "recipient_unavailable", recipient_state="not_available_offline", signal_id=OK["signal_id"]),
        "b": err(503, "unavailable"),
    }
    client = Client("http://stub", "tok", spool_dir=str(tmp_path), replay_rate=1000, http=stub(lambda b: by_key[b["dedupe_key"]], seen))
    assert client.spool is not None
    now = time.time()
    for i, key in enumerate("abcd"):  # a oldest, d newest
        client.spool.put({"to": "bob", "type": "StatusUpdate", "payload": {}, "dedupe_key": key}, ttl_seconds=600, identity=None, reason="t", now=now - 100 + i)
    report = await client.replay_spool()
    assert [b["dedupe_key"] for b in seen] == ["d", "c", "b"]  # newest first; stops at the 503
    assert all(b["ttl_seconds"] < 600 for b in seen)  # the TTL left
    assert [r.signal_id for r in report.replayed] == [OK["signal_id"]]
    assert [e.code for e in report.rejected] == ["recipient_unavailable"]
    assert report.kept == 2 and isinstance(report.stopped_by, Unavailable)
    assert sorted(e.dedupe_key for e in client.spool.entries()) == ["a", "b"]  # 503'd and untried: kept

    def timeout(body: dict) -> httpx.Response:
        raise httpx.ReadTimeout("stub timeout")

    seen.clear()
    client2 = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(timeout, seen))
    report2 = await client2.replay_spool()
    assert report2.kept == 2 and report2.stopped_by is not None and report2.stopped_by.code == "timeout"
    assert len(client2.spool) == 2  # type: ignore[arg-type]
    for key in ("a", "b"):
        by_key[key] = err(500, "internal")
    seen.clear()
    client3 = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(lambda b: by_key[b["dedupe_key"]], seen))
    report3 = await client3.replay_spool()
    assert report3.kept == 2 and report3.stopped_by is not None and report3.stopped_by.code == "internal"
    for c in (client, client2, client3):
        await c.close()


async def test_a_connection_failure_spools(tmp_path: Path) -> None:
    def refuse(body: dict) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    seen: List[dict] = []
    client = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(refuse, seen))
    out = await client.send("bob", "Question", {"q": 1}, delivery_class="async")
    assert isinstance(out, Spooled) and out.ttl_seconds == 3600  # Question's default TTL (CONTRACT §3)
    entry = client.spool.entries()[0]  # type: ignore[union-attr]
    assert entry.request["dedupe_key"] == out.dedupe_key and "ttl_seconds" not in entry.request
    doc = json.loads(entry.path.read_text())
    assert doc["version"] == 1 and doc["kind"] == "send" and entry.name.startswith("send-") and entry.name.endswith(".json")
    await client.close()


def test_send_result_is_typed() -> None:
    res = SendResult.from_json(OK, "k")
    assert res.spooled is False and res.created_at.microsecond == 123456 and res.dedupe_key == "k"


def test_reads_the_shared_spool_format(tmp_path: Path) -> None:
    """clients/testdata/spool holds an entry in the format both clients write (SCENARIOS.md)."""
    import shutil

    from signalbus_client import Spool

    src = Path(__file__).resolve().parents[2] / "testdata" / "spool"
    for f in src.glob("send-*.json"):
        shutil.copy(f, tmp_path / f.name)
    (entry,) = Spool(tmp_path, max_age_seconds=10**10).entries()
    assert (entry.identity, entry.ttl_seconds, entry.dedupe_key) == ("alice", 3600, "sbc-00000000-0000-4000-8000-000000000001")
    assert entry.request["payload"] == {"n": 1, "nested": {"ok": True}} and entry.request["correlation_id"] == "c-1"
    assert entry.spooled_at.isoformat() == "2026-05-03T12:00:00.123000+00:00"
    written = Spool(tmp_path / "w").put(dict(entry.request), ttl_seconds=60, identity="alice", reason="r")
    assert set(json.loads(written.path.read_text())) == set(json.loads(entry.path.read_text()))  # the same keys


async def test_close_ends_a_pending_receive() -> None:
    import asyncio

    from signalbus_client import ClientClosed

    client = Client("http://stub", "tok", http=stub(lambda b: httpx.Response(200, json=OK), []))
    waiting = asyncio.create_task(client.receive())
    await asyncio.sleep(0.01)
    await client.close()
    with pytest.raises(ClientClosed):
        await waiting


async def test_a_scheduled_send_is_spooled_with_its_deliver_at(tmp_path: Path) -> None:
    """SCENARIOS.md, the spool file format: a scheduled send keeps an absolute deliver_at; its TTL
    runs from then; once due a replay sends it at once, without deliver_at."""
    from datetime import datetime, timedelta, timezone

    from signalbus_client.types import format_time, parse_time

    seen: List[dict] = []
    answers = iter([err(503, "unavailable")])
    client = Client("http://stub", "tok", spool_dir=str(tmp_path), replay_rate=1000, http=stub(lambda b: next(answers, httpx.Response(200, json=OK)), seen))
    assert client.spool is not None
    out = await client.send("bob", "StatusUpdate", {"n": 1}, ttl_seconds=600, deliver_after=timedelta(minutes=10))
    assert isinstance(out, Spooled) and seen[0]["deliver_after_seconds"] == 600
    (entry,) = client.spool.entries()
    assert "deliver_after_seconds" not in entry.request  # the delay became the instant it names
    due = parse_time(entry.request["deliver_at"])
    assert due is not None and abs((due - datetime.now(timezone.utc)) - timedelta(minutes=10)) < timedelta(seconds=5)

    now = time.time()
    overdue = {"to": "bob", "type": "StatusUpdate", "payload": {}, "dedupe_key": "overdue",
               "deliver_at": format_time(datetime.fromtimestamp(now - 100, timezone.utc))}
    client.spool.put(overdue, ttl_seconds=600, identity=None, reason="t", now=now - 200)
    seen.clear()
    report = await client.replay_spool()
    assert len(report.replayed) == 2 and len(client.spool) == 0
    by_key = {b["dedupe_key"]: b for b in seen}
    ahead = by_key[out.dedupe_key]
    assert ahead["deliver_at"] == entry.request["deliver_at"] and ahead["ttl_seconds"] == 600  # its whole TTL, from deliver_at
    assert "deliver_at" not in by_key["overdue"] and 495 <= by_key["overdue"]["ttl_seconds"] <= 500  # due 100 s ago: sent now
    await client.close()


async def test_scheduled_usage_errors_come_before_the_spool(tmp_path: Path) -> None:
    from datetime import timedelta

    from signalbus_client import UsageError

    seen: List[dict] = []
    client = Client("http://stub", "tok", spool_dir=str(tmp_path), http=stub(lambda b: err(503, "unavailable"), seen))
    with pytest.raises(UsageError):
        await client.send("bob", "Blocker", {}, deliver_after=timedelta(seconds=5))
    with pytest.raises(UsageError):
        await client.send("bob", "StatusUpdate", {}, deliver_after="5")  # type: ignore[arg-type]
    assert seen == [] and len(client.spool) == 0  # type: ignore[arg-type]
    await client.close()
