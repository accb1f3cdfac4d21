"""clients/SCENARIOS.md S32–S35 (time and waiting, CONTRACT §16: scheduled delivery, long-poll
inbox, conversations, force-expire), each against a real `signalbus serve` (see conftest.py)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable

import pytest

from signalbus_client import (
    AdminClient,
    Client,
    ExpirePreview,
    ExpireResult,
    InvalidRequest,
    SendResult,
    SignalbusError,
    SignalRow,
    UsageError,
)

from conftest import Bus
from test_directives import nothing_received
from test_scenarios import eventually, token_for

# Nothing listens there: a call that reached the network would fail with TransportError, so a
# UsageError from a client pointed at it shows the mistake was caught before anything was sent.
NOWHERE = "http://127.0.0.1:1"


async def sent(outcome: Awaitable[Any]) -> SendResult:
    """The ``SendResult`` of a send to one identity that the bus accepted."""
    out = await outcome
    assert isinstance(out, SendResult), out
    return out


async def usage_error(call: Callable[[], Awaitable[Any]]) -> UsageError:
    """``call()`` fails with the language's own error, not the bus's (S20)."""
    with pytest.raises(UsageError) as caught:
        await call()
    assert not isinstance(caught.value, SignalbusError)
    return caught.value


# S32 -----------------------------------------------------------------------------------------
async def test_s32_scheduled_delivery(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    async with Client(bus.url, bob_tok) as bob, Client(bus.url, alice_tok) as alice:
        before = datetime.now(timezone.utc)
        out = await sent(alice.send("bob", "StatusUpdate", {"n": "later"}, deliver_after=2))
        assert (out.queued, out.delivered, out.publish_path, out.scheduled) == (True, False, "scheduled", True)
        assert out.deliver_at is not None
        assert abs((out.deliver_at - (before + timedelta(seconds=2))).total_seconds()) < 1.0
        assert abs((out.expires_at - out.deliver_at) - timedelta(hours=24)) < timedelta(seconds=1)  # the TTL counts from deliver_at
        row = await alice.get(out.signal_id)
        assert row.status == "pending" and row.deliver_at is not None
        assert abs(row.deliver_at - out.deliver_at) < timedelta(milliseconds=1)

        assert await bob.inbox() == []  # invisible to its recipient until deliver_at
        await nothing_received(bob, 1.0)
        sig = await bob.receive(timeout=8)
        arrived = datetime.now(timezone.utc)
        assert (sig.id, sig.from_, sig.payload) == (out.signal_id, "alice", {"n": "later"})
        assert arrived >= out.deliver_at - timedelta(milliseconds=200)
        await bob.ack(sig)
        row = await bob.get(out.signal_id)
        assert (row.status, row.delivered_via) == ("delivered", "ws_push")

        later = await sent(alice.send("bob", "StatusUpdate", {"n": "never"}, deliver_after=timedelta(seconds=30)))
        assert later.publish_path == "scheduled" and later.deliver_at is not None
        assert (await alice.recall(later.signal_id)).outcome == "recalled"
        assert (await alice.get(later.signal_id)).status == "recalled"

        with pytest.raises(InvalidRequest) as past:  # the bus's clock decides
            await alice.send("bob", "StatusUpdate", {}, deliver_at=datetime.now(timezone.utc) - timedelta(minutes=1))
        assert past.value.status == 400
        await nothing_received(bob, 0.5)  # neither the recalled one nor the refused one

    nowhere = Client(NOWHERE, alice_tok)
    try:
        soon = datetime.now(timezone.utc) + timedelta(minutes=5)
        await usage_error(lambda: nowhere.send("bob", "StatusUpdate", {}, deliver_after=5, deliver_at=soon))
        await usage_error(lambda: nowhere.send("bob", "Blocker", {}, deliver_after=5))  # sync by default
        await usage_error(lambda: nowhere.send("bob", "StatusUpdate", {}, delivery_class="sync", deliver_at=soon))
        await usage_error(lambda: nowhere.send("bob", "StatusUpdate", {}, deliver_after=0))
        await usage_error(lambda: nowhere.send("bob", "StatusUpdate", {}, deliver_after=timedelta(seconds=-1)))
        await usage_error(lambda: nowhere.send("bob", "StatusUpdate", {}, deliver_at=datetime.now() + timedelta(minutes=5)))  # naive
    finally:
        await nowhere.close()


# S33 -----------------------------------------------------------------------------------------
async def test_s33_waiting_without_polling(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok = await token_for(admin, "alice"), await token_for(admin, "bob")
    alice, bob = Client(bus.url, alice_tok), Client(bus.url, bob_tok)  # HTTP only: never connected

    async def send_later(n: int) -> SendResult:
        await asyncio.sleep(1)
        return await sent(alice.send("bob", "StatusUpdate", {"n": n}))

    try:
        started = time.monotonic()
        got, first = await asyncio.gather(bob.inbox(wait=10), send_later(1))
        took = time.monotonic() - started
        assert [s.id for s in got] == [first.signal_id]
        assert 0.9 <= took < 5, f"inbox(wait=10) answered after {took:.2f}s"
        assert (await bob.get(first.signal_id)).status == "pending"  # inbox delivers nothing
        assert [s.id for s in await bob.drain()] == [first.signal_id]

        started = time.monotonic()
        assert await bob.inbox(wait=1) == []
        took = time.monotonic() - started
        assert 0.9 <= took < 5, f"inbox(wait=1) with nothing pending answered after {took:.2f}s"

        got, second = await asyncio.gather(bob.drain(wait=10), send_later(2))
        assert [s.id for s in got] == [second.signal_id]
        row = await bob.get(second.signal_id)
        assert (row.status, row.delivered_via) == ("delivered", "inbox")
        assert await bob.inbox() == []
    finally:
        await alice.close()
        await bob.close()

    nowhere = Client(NOWHERE, bob_tok)
    try:
        await usage_error(lambda: nowhere.inbox(wait=61))
        await usage_error(lambda: nowhere.drain(wait=61))
        await usage_error(lambda: nowhere.inbox(wait=-1))
    finally:
        await nowhere.close()


# S34 -----------------------------------------------------------------------------------------
async def test_s34_conversations(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok, carol_tok = [await token_for(admin, n) for n in ("alice", "bob", "carol")]
    alice, bob, carol = Client(bus.url, alice_tok), Client(bus.url, bob_tok), Client(bus.url, carol_tok)
    try:
        thread = [
            await sent(alice.send("bob", "Question", {"q": "ready?"}, delivery_class="async", correlation_id="t-1")),
            await sent(bob.send("alice", "Answer", {"a": "yes"}, correlation_id="t-1")),
            await sent(alice.send("bob", "TaskAssigned", {"task": "ship"}, correlation_id="t-1")),
        ]
        other = await sent(alice.send("bob", "StatusUpdate", {"n": 1}, correlation_id="t-2"))
        ids = [s.signal_id for s in thread]

        for who in (alice, bob):
            page = await who.conversation("t-1")
            assert [r.id for r in page.signals] == ids  # oldest first, sent and received
            assert all(isinstance(r, SignalRow) and r.correlation_id == "t-1" for r in page.signals)
            assert page.next_cursor is None
        assert [r.from_identity for r in (await bob.conversation("t-1")).signals] == ["alice", "bob", "alice"]

        first = await alice.conversation("t-1", limit=2)
        assert [r.id for r in first.signals] == ids[:2] and first.next_cursor
        rest = await alice.conversation("t-1", limit=2, cursor=first.next_cursor)
        assert [r.id for r in rest.signals] == ids[2:]

        assert [r.id for r in (await alice.conversation("t-2")).signals] == [other.signal_id]
        assert (await carol.conversation("t-1")).signals == []  # never anyone else's
        await usage_error(lambda: alice.conversation(""))
    finally:
        for c in (alice, bob, carol):
            await c.close()


# S35 -----------------------------------------------------------------------------------------
async def test_s35_force_expire(bus: Bus, admin: AdminClient) -> None:
    alice_tok, dave_tok, erin_tok = [await token_for(admin, n) for n in ("alice", "dave", "erin")]
    alice, dave, erin = Client(bus.url, alice_tok), Client(bus.url, dave_tok), Client(bus.url, erin_tok)
    try:
        to_dave = [await sent(alice.send("dave", "StatusUpdate", {"n": n})) for n in (1, 2)]
        to_erin = await sent(alice.send("erin", "StatusUpdate", {"n": 3}))
        dave_ids = sorted(s.signal_id for s in to_dave)
        assert all(s.publish_path == "queued_offline" for s in [*to_dave, to_erin])

        preview = await admin.expire_signals(tenant="default", to="dave", dry_run=True)
        assert isinstance(preview, ExpirePreview) and preview.dry_run
        assert preview.count == 2 and sorted(preview.signal_ids) == dave_ids
        assert {(c.to, c.from_, c.type) for c in preview.would_expire} == {("dave", "alice", "StatusUpdate")}
        assert all(c.created_at is not None for c in preview.would_expire)
        assert sorted(s.id for s in await dave.inbox()) == dave_ids  # a dry run expires nothing

        done = await admin.expire_signals(tenant="default", to="dave")
        assert isinstance(done, ExpireResult) and not done.dry_run
        assert (done.expired, done.skipped) == (2, 0)
        for signal_id in dave_ids:
            row = await alice.get(signal_id)
            assert (row.status, row.expired_reason) == ("expired", "forced")
            assert row.expired_at is not None
        assert await dave.inbox() == []
        assert (await admin.expire_signals(tenant="default", to="dave")).expired == 0

        kept = await erin.get(to_erin.signal_id)
        assert (kept.status, kept.expired_reason) == ("pending", None)
        assert [s.id for s in await erin.inbox()] == [to_erin.signal_id]
    finally:
        for c in (alice, dave, erin):
            await c.close()

    async with AdminClient(NOWHERE, bus.admin_token) as nowhere:
        await usage_error(lambda: nowhere.expire_signals(tenant="default"))
        await usage_error(lambda: nowhere.expire_signals(tenant="default", older_than=-1))
        await usage_error(lambda: nowhere.expire_signals(tenant="default", older_than=0))
