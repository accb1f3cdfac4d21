"""clients/SCENARIOS.md, each against a real `signalbus serve` (see conftest.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, List, TypeVar

import httpx
import pytest

from signalbus_client import (
    AdminClient,
    AlreadyRegistered,
    AskTimeout,
    Client,
    InvalidRequest,
    NotFound,
    RecipientUnavailable,
    SendResult,
    Signal,
    SignalbusError,
    Spooled,
    SpoolEntry,
    SpoolExpired,
    TransportError,
    Unauthorized,
    UnknownRecipient,
    UsageError,
)

from conftest import Bus

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T]], timeout: float = 10.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = await check()
            if value:
                return value
            last = value
        except (AssertionError, SignalbusError) as exc:
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")


async def token_for(admin: AdminClient, identity: str) -> str:
    return (await admin.register(identity, kind="daemon")).token


# S1 ------------------------------------------------------------------------------------------
async def test_s01_connect(bus: Bus, admin: AdminClient) -> None:
    tok = await token_for(admin, "alice")
    async with Client(bus.url, tok, kind="daemon") as alice:
        assert alice.welcome is not None
        assert (alice.welcome.identity, alice.welcome.tenant) == ("alice", "default")
        assert alice.welcome.heartbeat_interval_ms == 750  # a quarter of --stale-after 3s
        uuid.UUID(alice.welcome.session_id)
        roster = {a.identity: a for a in await alice.agents()}
        assert roster["alice"].state == "available"
    bad = Client(bus.url, "sb_not_a_token")
    with pytest.raises(Unauthorized):
        await bad.connect(timeout=5)
    await bad.close()


# S2 ------------------------------------------------------------------------------------------
async def test_s02_heartbeat_keeps_the_session_available(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, bob_tok) as bob, Client(bus.url, alice_tok) as alice:
        await asyncio.sleep(3.6)  # longer than --stale-after: only the client's heartbeats keep bob available
        res = await alice.send("bob", "Question", {"q": "still there?"})
        assert isinstance(res, SendResult) and res.recipient_state == "available" and res.delivered
        sig = await bob.receive(timeout=5)
        assert sig.id == res.signal_id
        await bob.ack(sig)


# S3 ------------------------------------------------------------------------------------------
async def test_s03_send_every_class_to_an_available_recipient(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, bob_tok) as bob, Client(bus.url, alice_tok) as alice:
        for cls in ("sync", "async"):
            res = await alice.send("bob", "StatusUpdate", {"cls": cls}, delivery_class=cls)
            assert isinstance(res, SendResult)
            assert (res.delivered, res.queued, res.recipient_state, res.delivery_class, res.publish_path) == (
                True, False, "available", cls, "pushed_to_ws"
            )
            assert res.resolved_to_session == bob.welcome.session_id  # type: ignore[union-attr]
            sig = await bob.receive(timeout=5)
            assert (sig.id, sig.from_, sig.to, sig.payload, sig.delivery_class) == (res.signal_id, "alice", "bob", {"cls": cls}, cls)
            await bob.ack(sig)


# S4 ------------------------------------------------------------------------------------------
async def test_s04_send_every_class_to_an_offline_recipient(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        queued = await alice.send("bob", "Question", {"q": "async"}, delivery_class="async")
        assert isinstance(queued, SendResult)
        assert (queued.delivered, queued.queued, queued.recipient_state, queued.publish_path) == (
            False, True, "not_available_offline", "queued_offline"
        )
        with pytest.raises(RecipientUnavailable) as bounce:
            await alice.send("bob", "Question", {"q": "sync"})  # Question defaults to sync
        assert bounce.value.recipient_state == "not_available_offline"
        uuid.UUID(bounce.value.signal_id or "")
        assert bounce.value.status == 409  # answered over the WebSocket session: the §8 status all the same (S22)
    bob = Client(bus.url, bob_tok)
    try:
        pending = await bob.inbox()
        assert [s.id for s in pending] == [queued.signal_id]  # the bounce was never queued
    finally:
        await bob.close()
    # the same bounce over HTTP (no session): status 409
    http_alice = Client(bus.url, alice_tok)
    try:
        with pytest.raises(RecipientUnavailable) as bounce:
            await http_alice.send("bob", "Blocker", {"b": 1})
        assert bounce.value.status == 409 and bounce.value.recipient_state == "not_available_offline"
    finally:
        await http_alice.close()


# S5 ------------------------------------------------------------------------------------------
async def test_s05_send_every_class_to_a_stale_recipient(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{bus.url}/v1/sessions", json={"kind": "shim"}, headers={"Authorization": f"Bearer {bob_tok}"})
        assert r.status_code == 200, r.text
    await asyncio.sleep(3.4)  # the piggyback session is now older than --stale-after (3s), not yet closed (6s)
    async with Client(bus.url, alice_tok) as alice:
        with pytest.raises(RecipientUnavailable) as bounce:
            await alice.send("bob", "Blocker", {"b": "stale"}, delivery_class="sync")
        assert bounce.value.recipient_state == "not_available_stale"
        queued = await alice.send("bob", "TaskAssigned", {"t": "stale"})
        assert isinstance(queued, SendResult)
        assert (queued.queued, queued.recipient_state, queued.publish_path) == (True, "not_available_stale", "queued_offline")


# S6 ------------------------------------------------------------------------------------------
async def test_s06_send_fields_errors_and_dedupe(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        res = await alice.send(
            "bob",
            "ReviewRequested",
            {"pr": 7, "db": {"password": "hunter2"}},
            delivery_class="async",
            ttl_seconds=120,
            correlation_id="corr-1",
            dedupe_key="review-7",
        )
        assert isinstance(res, SendResult)
        assert res.redacted == ["db.password"] and res.dedupe_key == "review-7"
        assert res.expires_at - res.created_at == timedelta(seconds=120)
        again = await alice.send("bob", "ReviewRequested", {"pr": 7}, delivery_class="async", dedupe_key="review-7")
        assert isinstance(again, SendResult) and again.signal_id == res.signal_id  # dedupe: nothing new
        row = await alice.get(res.signal_id)
        assert (row.from_identity, row.to_identity, row.signal_type, row.correlation_id, row.status) == (
            "alice", "bob", "ReviewRequested", "corr-1", "pending"
        )
        assert row.payload == {"pr": 7, "db": {"password": "[REDACTED]"}}
        sent = await alice.list(role="sent")
        assert [r.id for r in sent.signals] == [res.signal_id]
        auto = await alice.send("bob", "StatusUpdate")  # the client generates a dedupe_key
        assert isinstance(auto, SendResult) and auto.dedupe_key and auto.dedupe_key.startswith("sbc-")
        with pytest.raises(UnknownRecipient) as unknown:
            await alice.send("nobody", "StatusUpdate")
        assert unknown.value.code == "unknown_recipient" and "register" in unknown.value.hint
        with pytest.raises(InvalidRequest):
            await alice.send("bob", "not a type!")
        with pytest.raises(InvalidRequest):
            await alice.send("bob", "StatusUpdate", ttl_seconds=0)


# S7 ------------------------------------------------------------------------------------------
async def test_s07_receive_and_ack(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    got: List[Signal] = []
    async with Client(bus.url, alice_tok) as alice:
        queued = await alice.send("bob", "TaskAssigned", {"n": 0})  # waits for bob: startup drain
        assert isinstance(queued, SendResult) and queued.queued
        async with Client(bus.url, bob_tok, on_signal=got.append):  # auto-ack after the handler
            pushed = await alice.send("bob", "StatusUpdate", {"n": 1})
            assert isinstance(pushed, SendResult) and pushed.delivered
            await eventually(lambda: asyncio.sleep(0, len(got) == 2), what="two signals")
            # (the startup drain and a live push may interleave: no order between them)
            assert {s.id for s in got} == {queued.signal_id, pushed.signal_id}
            for sid, via in ((queued.signal_id, "startup_drain"), (pushed.signal_id, "ws_push")):
                row = await eventually(lambda: _acked(alice, sid), what=f"{sid} acked")
                assert row.delivered_via == via
        async with Client(bus.url, bob_tok) as bob:  # manual ack
            manual = await alice.send("bob", "StatusUpdate", {"n": 2})
            sig = await bob.receive(timeout=5)
            assert sig.id == manual.signal_id  # type: ignore[union-attr]
            assert (await alice.get(sig.id)).acked_at is None
            assert await bob.ack(sig) == 1
            await eventually(lambda: _acked(alice, sig.id), what="manual ack")


async def _acked(client: Client, signal_id: str) -> Any:
    row = await client.get(signal_id)
    return row if row.acked_at is not None else None


# S8 ------------------------------------------------------------------------------------------
async def test_s08_redelivery_after_an_unacked_disconnect(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        first = Client(bus.url, bob_tok)
        await first.connect()
        res = await alice.send("bob", "Question", {"q": "unacked"})
        sig = await first.receive(timeout=5)
        assert sig.id == res.signal_id and not sig.redelivered  # type: ignore[union-attr]
        await first.close()  # closes the session without acking
        async with Client(bus.url, bob_tok) as second:
            again = await second.receive(timeout=5)
            assert again.id == sig.id and again.redelivered
            await second.ack(again)
            await eventually(lambda: _acked(alice, sig.id), what="ack after redelivery")
        # a failing handler does not ack; the signal comes back on the next session, handled again
        calls: List[Signal] = []

        def flaky(s: Signal) -> None:
            calls.append(s)
            if len(calls) == 1:
                raise RuntimeError("handler bug")

        async with Client(bus.url, bob_tok, on_signal=flaky) as bob:
            res2 = await alice.send("bob", "StatusUpdate", {"n": "flaky"})
            await eventually(lambda: asyncio.sleep(0, len(calls) == 1), what="first call")
            await bob.drop_connection()
            await eventually(lambda: asyncio.sleep(0, len(calls) == 2), what="redelivered call")
            assert calls[1].id == res2.signal_id and calls[1].redelivered  # type: ignore[union-attr]
            await eventually(lambda: _acked(alice, calls[1].id), what="ack of the redelivered signal")


# S9 ------------------------------------------------------------------------------------------
async def test_s09_dedupe_of_redelivered_signals(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    release = asyncio.Event()
    calls: List[Signal] = []

    async def slow(s: Signal) -> None:
        calls.append(s)
        await release.wait()

    async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok, on_signal=slow) as bob:
        res = await alice.send("bob", "StatusUpdate", {"n": 1})
        await eventually(lambda: asyncio.sleep(0, len(calls) == 1), what="handler called")
        await bob.drop_connection()  # the session closes with the signal delivered, not acked
        await eventually(lambda: asyncio.sleep(0, bob.duplicates_dropped == 1), what="the redelivery, dropped")
        release.set()
        await eventually(lambda: _acked(alice, res.signal_id), what="acked once handled")  # type: ignore[union-attr]
        await asyncio.sleep(0.2)
        assert len(calls) == 1 and bob.sessions_opened == 2


# S10 -----------------------------------------------------------------------------------------
async def test_s10_reconnect_after_a_server_restart(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    got: List[Signal] = []
    async with Client(bus.url, alice_tok, reconnect_max=1.0) as alice, Client(
        bus.url, bob_tok, on_signal=got.append, reconnect_max=1.0
    ) as bob:
        bus.stop()  # kill -9
        await alice.wait_disconnected(5)
        await bob.wait_disconnected(5)
        bus.start()  # same port, same data dir
        await alice.wait_connected(20)
        await bob.wait_connected(20)
        assert alice.sessions_opened == 2 and bob.sessions_opened == 2

        async def bob_available() -> bool:
            return any(a.identity == "bob" and a.state == "available" for a in await alice.agents())

        await eventually(bob_available, 15, "bob available again")
        res = await alice.send("bob", "Question", {"q": "after restart"})
        assert isinstance(res, SendResult) and res.delivered and res.resolved_to_session == bob.welcome.session_id  # type: ignore[union-attr]
        await eventually(lambda: asyncio.sleep(0, [s.id for s in got] == [res.signal_id]), what="signal after restart")


# S11 -----------------------------------------------------------------------------------------
async def test_s11_recall(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        res = await alice.send("bob", "TaskAssigned", {"t": 1})
        assert (await alice.recall(res.signal_id)).outcome == "recalled"  # type: ignore[union-attr]
        assert (await alice.recall(res.signal_id)).outcome == "recalled"  # type: ignore[union-attr]
        assert (await alice.recall(str(uuid.uuid4()))).outcome == "not_found"
        kept = await alice.send("bob", "TaskAssigned", {"t": 2})
        bob = Client(bus.url, bob_tok)
        try:
            assert (await bob.recall(kept.signal_id)).outcome == "not_found"  # type: ignore[union-attr]  # only the sender
            drained = await bob.drain()
            assert [s.id for s in drained] == [kept.signal_id]  # type: ignore[union-attr]  # never the recalled one
        finally:
            await bob.close()
        assert (await alice.recall(kept.signal_id)).outcome == "already_delivered"  # type: ignore[union-attr]
        assert (await alice.get(res.signal_id)).status == "recalled"  # type: ignore[union-attr]
    http_alice = Client(bus.url, alice_tok)  # the same answers over HTTP
    try:
        assert (await http_alice.recall(str(uuid.uuid4()))).outcome == "not_found"
        assert (await http_alice.recall(res.signal_id)).outcome == "recalled"  # type: ignore[union-attr]
    finally:
        await http_alice.close()


# S12 -----------------------------------------------------------------------------------------
async def test_s12_ask_and_reply(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok, carol_tok = [await token_for(admin, n) for n in ("alice", "bob", "carol")]
    await token_for(admin, "dave")  # registered, never connected
    bob: Client

    async def answer(s: Signal) -> None:
        await bob.reply(s, "Answer", {"a": s.payload["q"] * 2})

    async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok, on_signal=answer) as bob, Client(
        bus.url, carol_tok
    ):
        reply = await alice.ask("bob", "Question", {"q": 21}, timeout=10)
        assert (reply.from_, reply.type, reply.payload) == ("bob", "Answer", {"a": 42})
        assert reply.correlation_id
        with pytest.raises(AskTimeout) as late:
            await alice.ask("carol", "Question", {"q": 1}, timeout=0.5)  # carol never answers
        assert late.value.signal_id and late.value.correlation_id
        with pytest.raises(RecipientUnavailable) as bounce:
            await alice.ask("dave", "Question", {"q": 0}, timeout=5)  # sync to an offline agent
        assert bounce.value.recipient_state == "not_available_offline"


# S13 -----------------------------------------------------------------------------------------
async def test_s13_spool_while_the_bus_is_down_then_replay_without_duplicates(bus: Bus, admin: AdminClient, tmp_path: Path) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    spool_dir = tmp_path / "spool"
    replayed: List[Any] = []
    alice = Client(
        bus.url, alice_tok, spool_dir=str(spool_dir), replay_interval=0.2, reconnect_max=0.5,
        on_replay=lambda e, r: replayed.append((e.dedupe_key, r)),
    )
    await alice.connect()
    try:
        stored = await alice.send("bob", "TaskAssigned", {"n": 0}, dedupe_key="task-0")
        assert isinstance(stored, SendResult)
        bus.stop()  # kill -9: the bus is unreachable
        await alice.wait_disconnected(5)
        spooled = []
        for n in (1, 2, 3):
            out = await alice.send("bob", "TaskAssigned", {"n": n}, ttl_seconds=3600)
            assert isinstance(out, Spooled) and out.spooled, out
            spooled.append(out)
            await asyncio.sleep(0.01)
        resend = await alice.send("bob", "TaskAssigned", {"n": 0}, dedupe_key="task-0")  # outcome "unknown" to the caller
        assert isinstance(resend, Spooled) and resend.dedupe_key == "task-0"
        with pytest.raises(TransportError, match="nothing was sent"):
            await alice.send("bob", "Blocker", {"b": 1})  # sync: never spooled (S19)
        assert len(alice.spool) == 4  # type: ignore[arg-type]
        assert all(s.dedupe_key.startswith("sbc-") for s in spooled)
        bus.start()
        await eventually(lambda: asyncio.sleep(0, len(replayed) == 4 and len(alice.spool) == 0), 20, "spool replayed")  # type: ignore[arg-type]
        outcomes = {k: r for k, r in replayed}
        assert outcomes["task-0"].signal_id == stored.signal_id  # the replay answered the original
        # replay order: newest first
        order = [k for k, _ in replayed]
        assert order == ["task-0", spooled[2].dedupe_key, spooled[1].dedupe_key, spooled[0].dedupe_key]
    finally:
        await alice.close()
    bob = Client(bus.url, bob_tok)
    try:
        drained = await bob.drain()
    finally:
        await bob.close()
    payloads = sorted(s.payload["n"] for s in drained)
    assert payloads == [0, 1, 2, 3]  # each exactly once: no duplicate of task-0
    by_n = {s.payload["n"]: s for s in drained}
    assert by_n[3].created_at < by_n[2].created_at < by_n[1].created_at  # replayed newest first
    for n in (1, 2, 3):
        ttl = (by_n[n].expires_at - by_n[n].created_at).total_seconds()
        assert 3500 < ttl <= 3600  # the TTL left, not a fresh one


# S14 -----------------------------------------------------------------------------------------
async def test_s19_sync_sends_and_asks_are_never_spooled(bus: Bus, admin: AdminClient, tmp_path: Path) -> None:
    alice_tok = await token_for(admin, "alice")
    bob_tok = await token_for(admin, "bob")
    alice = Client(bus.url, alice_tok, spool_dir=str(tmp_path / "a"), reconnect_initial=5, reconnect_max=5)
    never = Client(bus.url, alice_tok, spool_dir=str(tmp_path / "n"), identity="alice")  # never connected
    await alice.connect()
    try:
        bus.stop()  # kill -9: the bus is unreachable
        await alice.wait_disconnected(5)
        for client in (alice, never):  # a lost session and no session behave the same
            assert client.spool is not None
            for send in (
                client.send("bob", "Blocker", {"b": 1}),  # sync by default (CONTRACT §3)
                client.send("bob", "TaskAssigned", {"t": 1}, delivery_class="sync"),
            ):
                with pytest.raises(TransportError, match="nothing was sent"):
                    await send
            started = time.monotonic()
            with pytest.raises(TransportError, match="nothing was sent"):
                await client.ask("bob", "Question", {"q": 1}, timeout=10)
            with pytest.raises(TransportError, match="nothing was sent"):
                await client.ask("bob", "StatusUpdate", {"q": 1}, timeout=10, delivery_class="async")
            assert time.monotonic() - started < 2  # at once, not after the ask's timeout
            assert len(client.spool) == 0
            queued = await client.send("bob", "TaskAssigned", {"t": 2})  # async: still spooled
            assert isinstance(queued, Spooled) and len(client.spool) == 1
        # The bus is back: the spooled async sends arrive; the failed sync sends and asks never do.
        bus.start()
        await alice.wait_connected(15)
        for client in (alice, never):
            await client.replay_spool()
            assert client.spool is not None and len(client.spool) == 0
        await asyncio.sleep(1)  # room for anything replayed late
        bob = Client(bus.url, bob_tok)
        try:
            pending = await bob.inbox()
        finally:
            await bob.close()
        assert sorted((s.type, s.payload["t"]) for s in pending) == [("TaskAssigned", 2)] * 2, pending
    finally:
        await never.close()
        await alice.close()


async def test_s14_spool_caps_and_ttl(bus: Bus, admin: AdminClient, tmp_path: Path) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    spool_dir = tmp_path / "spool"
    from signalbus_client import Spool

    spool = Spool(spool_dir, max_bytes=2000, max_age_seconds=3600)
    now = time.time()
    old = spool.put({"to": "bob", "type": "StatusUpdate", "payload": {"n": "old"}, "dedupe_key": "old"}, ttl_seconds=86400, identity="alice", reason="test", now=now - 7200)
    expired = spool.put({"to": "bob", "type": "StatusUpdate", "payload": {"n": "expired"}, "dedupe_key": "exp"}, ttl_seconds=60, identity="alice", reason="test", now=now - 120)
    aged = spool.put({"to": "bob", "type": "StatusUpdate", "payload": {"n": "aged"}, "dedupe_key": "aged"}, ttl_seconds=600, identity="alice", reason="test", now=now - 100)
    assert not old.path.exists()  # past the age cap (1h): evicted when the next entry was written
    # size cap: filling the spool evicts the oldest first
    big = {"to": "bob", "type": "StatusUpdate", "payload": {"pad": "x" * 700}}
    first = spool.put({**big, "dedupe_key": "big-1"}, ttl_seconds=600, identity="alice", reason="test", now=now - 50)
    second = spool.put({**big, "dedupe_key": "big-2"}, ttl_seconds=600, identity="alice", reason="test", now=now - 40)
    assert not expired.path.exists() and not aged.path.exists() and first.path.exists() and second.path.exists()
    assert spool.total_bytes() <= 2000
    with pytest.raises(SignalbusError) as too_big:
        spool.put({**big, "payload": {"pad": "x" * 5000}, "dedupe_key": "huge"}, ttl_seconds=60, identity="alice", reason="t")
    assert too_big.value.code == "spool_full"
    spool.put({"to": "bob", "type": "StatusUpdate", "payload": {"n": "gone"}, "dedupe_key": "gone"}, ttl_seconds=30, identity="alice", reason="test", now=now - 60)
    seen: List[Any] = []
    alice = Client(bus.url, alice_tok, spool_dir=str(spool_dir), spool_max_bytes=2000, spool_max_age_seconds=3600, on_replay=lambda e, r: seen.append((e.dedupe_key, r)))
    try:
        report = await alice.replay_spool()
    finally:
        await alice.close()
    assert report.expired == ["gone"] and isinstance(dict(seen)["gone"], SpoolExpired)
    assert not first.path.exists()  # writing "gone" needed room: the oldest (big-1) was evicted
    assert [r.dedupe_key for r in report.replayed] == ["big-2"]
    bob = Client(bus.url, bob_tok)
    try:
        rows = await bob.drain()
    finally:
        await bob.close()
    assert len(rows) == 1
    ttl = (rows[0].expires_at - rows[0].created_at).total_seconds()
    assert 550 <= ttl <= 560  # 600 s less the ~40 s it spent spooled


# S15 -----------------------------------------------------------------------------------------
async def test_s15_inbox_drain_get_list(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    alice, bob = Client(bus.url, alice_tok), Client(bus.url, bob_tok)  # HTTP only
    try:
        low = await alice.send("bob", "StatusUpdate", {"n": "low"})
        high = await alice.send("bob", "Blocker", {"n": "high"}, delivery_class="async")
        assert [s.id for s in await bob.inbox()] == [high.signal_id, low.signal_id]  # type: ignore[union-attr]  # priority first
        assert [s.id for s in await bob.inbox()] == [high.signal_id, low.signal_id]  # type: ignore[union-attr]  # inbox delivers nothing
        page = await alice.list(role="sent", status="pending", limit=1)
        assert [r.id for r in page.signals] == [high.signal_id] and page.next_cursor  # type: ignore[union-attr]
        page2 = await alice.list(role="sent", status="pending", limit=1, cursor=page.next_cursor)
        assert [r.id for r in page2.signals] == [low.signal_id]  # type: ignore[union-attr]
        drained = await bob.drain()
        assert [s.id for s in drained] == [high.signal_id, low.signal_id]  # type: ignore[union-attr]
        assert await bob.drain() == []
        row = await bob.get(high.signal_id)  # type: ignore[union-attr]
        assert row.delivered_via == "inbox" and row.status == "delivered"
        assert await bob.ack(drained) == 2
        received = await bob.list(role="received", status="delivered")
        assert {r.id for r in received.signals} == {high.signal_id, low.signal_id}  # type: ignore[union-attr]
        with pytest.raises(NotFound):
            await bob.get(str(uuid.uuid4()))
    finally:
        await alice.close()
        await bob.close()


# S16 -----------------------------------------------------------------------------------------
async def test_s16_plugin_facts(bus: Bus, admin: AdminClient) -> None:
    bob_tok = await token_for(admin, "bob")
    await token_for(admin, "alice")
    async with Client(bus.url, bob_tok) as bob:
        assert await bob.record_fact("bob/watcher", "seen", {"head": "a1"}) == 1  # over the session
    http_bob = Client(bus.url, bob_tok)
    try:
        assert await http_bob.record_fact("bob/watcher", "seen", {"head": "b2", "token": "x"}) == 2  # over HTTP
        st = await http_bob.state("bob/watcher")
        assert (st.plugin, st.state, st.seq) == ("bob/watcher", {"head": "b2", "token": "[REDACTED]"}, 2)
        page = await http_bob.facts("bob/watcher", limit=1)
        assert [f.seq for f in page.facts] == [2] and page.next_before_seq == 2
        older = await http_bob.facts("bob/watcher", fact_type="seen", before_seq=page.next_before_seq)
        assert [f.seq for f in older.facts] == [1] and older.next_before_seq is None
        assert page.facts[0].recorded_by == "bob"
        with pytest.raises(SignalbusError) as forbidden:
            await http_bob.record_fact("alice", "seen", {})
        assert forbidden.value.code == "forbidden"
    finally:
        await http_bob.close()


# S17 -----------------------------------------------------------------------------------------
async def test_s17_admin_register_rotate_remove(bus: Bus, admin: AdminClient) -> None:
    reg = await admin.register("erin", kind="daemon")
    assert (reg.identity, reg.tenant) == ("erin", "default") and reg.token.startswith("sb_")
    with pytest.raises(AlreadyRegistered):
        await admin.register("erin")
    erin = Client(bus.url, reg.token, reconnect_max=0.5)
    await erin.connect()
    rotated = await admin.rotate("erin")
    assert rotated.token != reg.token
    await erin.wait_disconnected(5)  # the bus closed the session (1008): the client does not reconnect
    with pytest.raises(Unauthorized):
        await erin.wait_connected(5)
    await erin.close()
    old = Client(bus.url, reg.token)
    try:
        with pytest.raises(Unauthorized):
            await old.agents()
    finally:
        await old.close()
    assert {a.identity for a in await admin.agents()} == {"erin"}
    frank = Client(bus.url, (await admin.register("frank")).token)
    try:
        pending = await frank.send("erin", "StatusUpdate", {"s": 1})  # erin is offline: queued
        assert isinstance(pending, SendResult) and pending.queued
    finally:
        await frank.close()
    removal = await admin.remove("erin")  # what the bus answers
    assert (removal.identity, removal.tenant, removal.signals_expired) == ("erin", "default", 1)
    assert isinstance(removal.removed_at, datetime) and removal.removed_at.tzinfo is not None
    gone = Client(bus.url, rotated.token)
    try:
        with pytest.raises(Unauthorized):
            await gone.agents()
    finally:
        await gone.close()


# S20 -----------------------------------------------------------------------------------------
async def test_s20_usage_errors_are_the_languages_own(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    async with Client(bus.url, alice_tok, on_signal=lambda s: None) as handled:
        with pytest.raises(ValueError) as mistake:
            await handled.receive(timeout=1)
        assert isinstance(mistake.value, UsageError) and not isinstance(mistake.value, SignalbusError)
        assert "on_signal" in str(mistake.value)
    async with Client(bus.url, alice_tok) as alice:
        with pytest.raises(ValueError) as bad_timeout:
            await alice.ask("alice", "Question", {}, timeout=0)
        assert not isinstance(bad_timeout.value, SignalbusError)
        with pytest.raises(TypeError):
            await alice.ack(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Client(bus.url, alice_tok, replay_rate=0)
    # the never-connected ask stays a transport error (S19), not a usage error
    never = Client(bus.url, alice_tok)
    try:
        with pytest.raises(TransportError):
            await never.ask("alice", "Question", {}, timeout=1)
    finally:
        await never.close()


# S21 -----------------------------------------------------------------------------------------
async def test_s21_hints_fit_the_operation(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        with pytest.raises(TimeoutError) as waited:  # receive() timing out is a TimeoutError
            await alice.receive(timeout=0.2)
        assert isinstance(waited.value, SignalbusError) and "dedupe_key" not in str(waited.value)
        assert "receive()" in waited.value.hint
    dead = Client(f"http://127.0.0.1:{bus.port}", alice_tok, identity="alice")
    bus.stop()
    try:
        with pytest.raises(TimeoutError) as connecting:
            await dead.connect(timeout=0.5)
        assert "dedupe_key" not in str(connecting.value)
        with pytest.raises(TransportError) as recalling:
            await dead.recall(str(uuid.uuid4()))
        assert "dedupe_key" not in str(recalling.value)
        with pytest.raises(TransportError) as sending:
            await dead.send("bob", "StatusUpdate", {"n": 1}, spool=False, dedupe_key="k-21")
        assert sending.value.dedupe_key == "k-21" and "nothing was sent" in sending.value.hint
    finally:
        await dead.close()
    bus.start()
    # a send whose outcome is unknown says to retry with its dedupe_key; a recall does not
    from signalbus_client.errors import RequestTimeout, for_send

    assert "same dedupe_key" in for_send(TransportError("dropped")).hint
    assert "same dedupe_key" in for_send(RequestTimeout("slow")).hint
    assert "dedupe_key" not in TransportError("dropped").hint and "dedupe_key" not in RequestTimeout("slow").hint


# S22 -----------------------------------------------------------------------------------------
async def test_s22_status_is_the_same_over_either_transport(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    await token_for(admin, "bob")  # never connected: offline
    async with Client(bus.url, alice_tok) as over_ws:
        http = Client(bus.url, alice_tok)
        try:
            for client in (over_ws, http):
                with pytest.raises(RecipientUnavailable) as bounce:
                    await client.send("bob", "Blocker", {"b": 1})
                assert bounce.value.status == 409
                with pytest.raises(UnknownRecipient) as unknown:
                    await client.send("nobody", "StatusUpdate", {})
                assert unknown.value.status == 404
                with pytest.raises(InvalidRequest) as invalid:
                    await client.send("bob", "StatusUpdate", {}, ttl_seconds=0)
                assert invalid.value.status == 400
                with pytest.raises(SignalbusError) as forbidden:
                    await client.record_fact("bob", "seen", {})
                assert (forbidden.value.code, forbidden.value.status) == ("forbidden", 403)
        finally:
            await http.close()


# S23 -----------------------------------------------------------------------------------------
async def test_s23_max_concurrent_handlers(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    release = asyncio.Event()
    running, peak, done = 0, 0, []  # type: ignore[var-annotated]
    started: List[int] = []

    async def handler(sig: Signal) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        started.append(sig.payload["n"])
        try:
            if sig.payload["n"] == 0:
                await release.wait()  # the slow one
            else:
                await asyncio.sleep(0.2)
        finally:
            running -= 1
        done.append(sig.payload["n"])

    async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok, on_signal=handler, max_concurrent_handlers=2):
        sent = [await alice.send("bob", "StatusUpdate", {"n": n}) for n in range(5)]
        # the slow handler of n=0 does not hold back the others: they run beside it, one at a time
        await eventually(lambda: asyncio.sleep(0, sorted(done) == [1, 2, 3, 4]), what="the others handled")
        assert 0 not in done and peak == 2 and started == [0, 1, 2, 3, 4]  # started in arrival order
        for res in sent[1:]:
            await eventually(lambda: _acked(alice, res.signal_id), what="acked")  # type: ignore[union-attr]
        assert (await alice.get(sent[0].signal_id)).acked_at is None  # type: ignore[union-attr]
        release.set()
        await eventually(lambda: _acked(alice, sent[0].signal_id), what="the slow one acked")  # type: ignore[union-attr]
    assert peak == 2
    # the default is one at a time, in arrival order
    order: List[int] = []
    running, peak = 0, 0

    async def one_at_a_time(sig: Signal) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        order.append(sig.payload["n"])
        running -= 1

    async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok, on_signal=one_at_a_time):
        for n in range(4):
            await alice.send("bob", "StatusUpdate", {"n": n})
        await eventually(lambda: asyncio.sleep(0, len(order) == 4), what="four handled")
    assert order == [0, 1, 2, 3] and peak == 1
    with pytest.raises(ValueError):
        Client(bus.url, bob_tok, on_signal=handler, max_concurrent_handlers=0)


# S24 -----------------------------------------------------------------------------------------
async def test_s24_logging_is_quiet(bus: Bus, admin: AdminClient, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    alice_tok = await token_for(admin, "alice")
    await token_for(admin, "bob")
    caplog.set_level(logging.DEBUG, logger="signalbus_client")

    def records(level: int) -> List[str]:
        return [r.getMessage() for r in caplog.records if r.name.startswith("signalbus_client") and r.levelno == level]

    alice = Client(bus.url, alice_tok, spool_dir=str(tmp_path / "spool"), reconnect_initial=0.1, reconnect_max=0.3)
    try:
        await alice.connect()
        with pytest.raises(UnknownRecipient):  # an error raised to the caller is not also logged
            await alice.send("nobody", "StatusUpdate", {})
        assert records(logging.WARNING) == [] and records(logging.INFO) == [] and records(logging.ERROR) == []
        bus.stop()  # kill -9
        await alice.wait_disconnected(5)
        spooled = await alice.send("bob", "TaskAssigned", {"n": 1})  # spooled: at DEBUG only
        assert isinstance(spooled, Spooled)
        await asyncio.sleep(1.0)  # several failed attempts
        bus.start()
        await alice.wait_connected(20)
        await eventually(lambda: asyncio.sleep(0, alice.spool is not None and len(alice.spool) == 0), what="spool replayed")
        warnings, infos = records(logging.WARNING), records(logging.INFO)
        assert len(warnings) == 1 and "lost the session" in warnings[0], warnings
        assert len(infos) == 1 and "reconnected" in infos[0], infos
        assert records(logging.ERROR) == []
        debug = records(logging.DEBUG)
        assert sum("reconnecting to" in m for m in debug) >= 2  # DEBUG per retry
        assert any("spooled as" in m for m in debug)
    finally:
        await alice.close()
    caplog.clear()
    bad = Client(bus.url, "sb_not_a_token")
    try:
        with pytest.raises(Unauthorized):
            await bad.connect(timeout=5)
    finally:
        await bad.close()
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []  # raised to the caller: not also logged


# S25 -----------------------------------------------------------------------------------------
async def test_s25_connection_events_in_order(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    events: List[str] = []

    async def on_reconnected() -> None:  # a coroutine function works too
        events.append("reconnected")

    alice = Client(
        bus.url,
        alice_tok,
        reconnect_initial=0.1,
        reconnect_max=0.5,
        on_connected=lambda: events.append("connected"),
        on_disconnected=lambda: events.append("disconnected"),
        on_reconnected=on_reconnected,
        on_closed=lambda: events.append("closed"),
    )
    try:
        await alice.connect()
        assert events == ["connected"]
        bus.stop()  # kill -9
        await eventually(lambda: asyncio.sleep(0, events == ["connected", "disconnected"]), what="disconnected")
        bus.start()  # same port, same data dir
        await eventually(lambda: asyncio.sleep(0, events == ["connected", "disconnected", "reconnected"]), timeout=20, what="reconnected")
    finally:
        await alice.close()
    await alice.close()  # closed is told once
    assert events == ["connected", "disconnected", "reconnected", "closed"]
    # the bus refusing the token (rotate: 1008) is the end: disconnected, then closed
    erin_tok = await token_for(admin, "erin")
    told: List[str] = []
    erin = Client(bus.url, erin_tok, on_disconnected=lambda: told.append("disconnected"), on_closed=lambda: told.append("closed"))
    try:
        await erin.connect()
        await admin.rotate("erin")
        await eventually(lambda: asyncio.sleep(0, told == ["disconnected", "closed"]), what="closed after 1008")
    finally:
        await erin.close()
    assert told == ["disconnected", "closed"]


# S26 -----------------------------------------------------------------------------------------
async def test_s26_async_iterator_over_signals(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, alice_tok) as alice:
        bob = Client(bus.url, bob_tok)
        await bob.connect()
        got: List[Signal] = []

        async def consume() -> None:
            async for sig in bob.signals():
                got.append(sig)
                await bob.ack(sig)

        consumer = asyncio.create_task(consume())
        sent = [await alice.send("bob", "StatusUpdate", {"n": n}) for n in range(3)]
        await eventually(lambda: asyncio.sleep(0, len(got) == 3), what="three signals")
        assert [s.id for s in got] == [r.signal_id for r in sent]  # type: ignore[union-attr]
        await eventually(lambda: _acked(alice, got[2].id), what="acked")
        await bob.close()  # ends the iteration
        await asyncio.wait_for(consumer, 5)
    handled = Client(bus.url, bob_tok, on_signal=lambda s: None)
    try:
        with pytest.raises(ValueError):
            async for _ in handled.signals():
                pass
    finally:
        await handled.close()
