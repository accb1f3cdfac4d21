"""clients/SCENARIOS.md S28–S31 (directives and groups), each against a real `signalbus serve`
(see conftest.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, List, Optional

import pytest

from signalbus_client import (
    AdminClient,
    AlreadyClaimed,
    Client,
    ClientClosed,
    Directive,
    DirectiveCanceled,
    DirectiveEnded,
    DirectiveExpired,
    DirectiveFailed,
    DirectiveFailure,
    DirectiveProgress,
    DirectiveRejected,
    DirectiveTimeout,
    FanoutResult,
    Forbidden,
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    Signal,
    TransportError,
    UnknownGroup,
    UnknownRecipient,
    UsageError,
)

from conftest import Bus
from test_scenarios import eventually, token_for


async def receive_type(client: Client, signal_type: str, timeout: float = 10.0) -> Signal:
    """The next received signal of ``signal_type`` (acked); others on the way are acked and dropped."""
    deadline = time.monotonic() + timeout
    while True:
        sig = await client.receive(timeout=max(0.01, deadline - time.monotonic()))
        await client.ack(sig)
        if sig.type == signal_type:
            return sig


async def nothing_received(client: Client, seconds: float = 0.5) -> None:
    with pytest.raises(TimeoutError):
        extra = await client.receive(timeout=seconds)
        raise AssertionError(f"unexpected signal {extra.type} {extra.payload!r}")


async def received_rows_acked(client: Client, types: List[str]) -> bool:
    """Every signal of ``types`` the client received is acked."""
    rows = [r for r in (await client.list(role="received", limit=100)).signals if r.signal_type in types]
    return bool(rows) and all(r.acked_at is not None for r in rows)


# S28 -----------------------------------------------------------------------------------------
async def test_s28_a_directive_to_an_agent(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok, carol_tok = [await token_for(admin, n) for n in ("alice", "bob", "carol")]
    async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok) as bob:
        d = await alice.create_directive("bob", "package.install", {"name": "jq"}, idempotency_key="install-jq")
        assert d.created and d.status == "requested" and not d.terminal
        assert (d.issuer, d.assignee, d.claimed_by, d.type, d.params) == ("alice", "bob", None, "package.install", {"name": "jq"})
        assert (d.idempotency_key, d.result, d.failure, d.progress, d.declined_by) == ("install-jq", None, None, None, [])
        assert d.deadline > d.created_at and d.created_at.tzinfo is not None
        uuid.UUID(d.directive_id)
        again = await alice.create_directive("bob", "package.install", {"name": "jq"}, idempotency_key="install-jq")
        assert again.directive_id == d.directive_id and not again.created  # 200: the existing one
        with pytest.raises(IdempotencyConflict) as conflict:
            await alice.create_directive("bob", "package.install", {"name": "curl"}, idempotency_key="install-jq")
        assert conflict.value.directive_id == d.directive_id and conflict.value.status == 409

        req = await bob.receive(timeout=5)
        assert (req.type, req.from_, req.correlation_id) == ("DirectiveRequested", "alice", d.directive_id)
        asked = Directive.from_json(req.payload)
        assert (asked.directive_id, asked.status, asked.params) == (d.directive_id, "requested", {"name": "jq"})
        await bob.ack(req)

        started = await bob.start_directive(d.directive_id)
        assert (started.status, started.claimed_by) == ("started", "bob") and started.started_at is not None
        progressed = await bob.progress_directive(d.directive_id, message="downloading", percent=40)
        assert progressed.progress is not None
        assert (progressed.progress.message, progressed.progress.percent) == ("downloading", 40)
        done = await bob.complete_directive(d.directive_id, {"ok": True})
        assert (done.status, done.result) == ("completed", {"ok": True}) and done.terminal and done.finished_at is not None

        told_started = await alice.receive(timeout=5)
        told_done = await alice.receive(timeout=5)
        assert [told_started.type, told_done.type] == ["DirectiveStarted", "DirectiveCompleted"]
        assert told_started.correlation_id == told_done.correlation_id == d.directive_id
        assert told_started.from_ == told_done.from_ == "bob"
        assert told_done.payload["result"] == {"ok": True} and told_done.payload["status"] == "completed"
        await alice.ack(told_started, told_done)

        got = await alice.get_directive(d.directive_id)
        assert got.status == "completed" and got.progress == DirectiveProgress("downloading", 40, got.progress.at)  # type: ignore[union-attr]
        t0 = time.monotonic()
        waited = await alice.get_directive(d.directive_id, wait=10)  # ended: answered at once
        assert waited.status == "completed" and time.monotonic() - t0 < 5
        issued = await alice.list_directives(role="issued")
        assert d.directive_id in [x.directive_id for x in issued.directives]
        assigned = await bob.list_directives(role="assigned", status="completed")
        assert [x.directive_id for x in assigned.directives] == [d.directive_id]

        with pytest.raises(Forbidden):
            await bob.cancel_directive(d.directive_id)  # only the issuer cancels
        with pytest.raises(Forbidden):
            await alice.complete_directive(d.directive_id, {"ok": False})  # the issuer does not complete
        with pytest.raises(InvalidTransition) as late:
            await bob.complete_directive(d.directive_id, {"ok": True})
        assert late.value.status == 409 and late.value.directive is not None
        assert (late.value.directive.directive_id, late.value.directive.status) == (d.directive_id, "completed")

        # a create without a key carries a generated one; secrets in params are redacted
        d2 = await alice.create_directive("bob", "db.migrate", {"db": {"password": "hunter2"}})
        assert d2.created and d2.idempotency_key.startswith("sbd-")
        assert d2.redacted == ["params.db.password"] and d2.params == {"db": {"password": "[REDACTED]"}}
        with pytest.raises(UnknownRecipient):
            await alice.create_directive("nobody", "package.install", {})
        with pytest.raises(UnknownGroup) as no_group:
            await alice.create_directive("@nope", "package.install", {})
        assert no_group.value.status == 404
    carol = Client(bus.url, carol_tok)  # no party to it: ids cannot be probed
    try:
        with pytest.raises(NotFound):
            await carol.get_directive(d.directive_id)
        with pytest.raises(NotFound):
            await carol.start_directive(d2.directive_id)
    finally:
        await carol.close()


# S29 -----------------------------------------------------------------------------------------
async def test_s29_run_directive_and_on_directive(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok, erin_tok, gina_tok = [await token_for(admin, n) for n in ("alice", "bob", "erin", "gina")]
    await token_for(admin, "dave")  # registered, never connected, no worker
    reported: List[Optional[DirectiveProgress]] = []

    async def install(d: Directive, progress: Any) -> Any:
        if d.params.get("fail"):
            raise ValueError(f"no such package: {d.params['name']}")
        after = await progress(message="fetching", percent=50)  # answered with the directive after it
        reported.append(after.progress)
        if d.params.get("slow"):
            await asyncio.sleep(d.params["slow"])
        if d.params.get("scalar"):
            return 7
        return {"installed": d.params["name"]}

    bob = Client(bus.url, bob_tok)
    bob.on_directive("package.*", install)
    with pytest.raises(UsageError):
        bob.on_directive("package.*", install)  # one handler per pattern
    with pytest.raises(UsageError):
        bob.on_directive("pack*age", install)  # '*' only at the end
    async with Client(bus.url, alice_tok) as alice, bob:
        result = await alice.run_directive("bob", "package.install", {"name": "jq"}, timeout=15)
        assert result == {"installed": "jq"}
        assert reported and reported[0] is not None and (reported[0].message, reported[0].percent) == ("fetching", 50)
        newest = (await alice.list_directives(role="issued", limit=1)).directives[0]
        assert (newest.status, newest.claimed_by, newest.result) == ("completed", "bob", {"installed": "jq"})
        assert newest.progress is not None and newest.progress.percent == 50  # the progress is on the directive
        # the lifecycle signals were consumed and acked: nothing reached receive() on either side
        await eventually(lambda: received_rows_acked(alice, ["DirectiveStarted", "DirectiveCompleted"]), what="alice's acks")
        await eventually(lambda: received_rows_acked(bob, ["DirectiveRequested"]), what="bob's ack of the request")
        await nothing_received(alice, 0.3)
        await nothing_received(bob, 0.3)

        assert await alice.run_directive("bob", "package.count", {"name": "jq", "scalar": True}, timeout=15) == {"value": 7}

        with pytest.raises(DirectiveFailed) as failed:
            await alice.run_directive("bob", "package.install", {"name": "nope", "fail": True}, timeout=15)
        assert isinstance(failed.value, DirectiveEnded) and failed.value.directive.status == "failed"
        assert failed.value.directive.failure == DirectiveFailure("ValueError", "no such package: nope")

        # a type no worker serves, declined by hand by its assignee
        async with Client(bus.url, erin_tok) as erin:
            run = asyncio.create_task(alice.run_directive("erin", "deploy.run", {"env": "prod"}, timeout=15))
            req = await receive_type(erin, "DirectiveRequested")
            await erin.reject_directive(req.correlation_id or "", reason="not today")
            with pytest.raises(DirectiveRejected) as rejected:
                await run
        assert (rejected.value.directive.status, rejected.value.directive.reason) == ("rejected", "not today")

        # nobody works on it before its deadline: the sweeper expires it
        t0 = time.monotonic()
        with pytest.raises(DirectiveExpired) as expired:
            await alice.run_directive("dave", "package.install", {"name": "x"}, timeout=30, deadline_seconds=2)
        assert time.monotonic() - t0 >= 1.5 and expired.value.directive.status == "expired"

        # the issuer cancels it from another task
        run = asyncio.create_task(
            alice.run_directive("dave", "package.install", {"name": "y"}, timeout=15, idempotency_key="cancel-me")
        )
        same = await alice.create_directive("dave", "package.install", {"name": "y"}, idempotency_key="cancel-me")
        await asyncio.sleep(0.3)
        assert not run.done()
        await alice.cancel_directive(same.directive_id, reason="changed my mind")
        with pytest.raises(DirectiveCanceled) as canceled:
            await asyncio.wait_for(run, 10)
        assert (canceled.value.directive.directive_id, canceled.value.directive.reason) == (same.directive_id, "changed my mind")

        # a timeout shorter than the work: the directive is left as it is
        with pytest.raises(DirectiveTimeout) as slow:
            await alice.run_directive("bob", "package.install", {"name": "big", "slow": 2}, timeout=0.5)
        assert isinstance(slow.value, TimeoutError) and not slow.value.directive.terminal
        finished = await alice.get_directive(slow.value.directive_id, wait=15)
        assert (finished.status, finished.result) == ("completed", {"installed": "big"})

        with pytest.raises(UsageError):
            await alice.run_directive("bob", "package.install", {}, timeout=0)
    closing = Client(bus.url, alice_tok)  # close() ends a run that waits
    await closing.connect()
    waiting = asyncio.create_task(closing.run_directive("dave", "package.install", {"name": "w"}, timeout=30))
    await asyncio.sleep(0.5)
    await closing.close()
    with pytest.raises(ClientClosed):
        await asyncio.wait_for(waiting, 5)
    never = Client(bus.url, alice_tok)  # no session: the outcome could never be heard
    try:
        with pytest.raises(TransportError, match="nothing was sent"):
            await never.run_directive("bob", "package.install", {"name": "z"}, timeout=5)
        assert [x for x in (await never.list_directives(role="issued")).directives if x.params.get("name") == "z"] == []
    finally:
        await never.close()

    # a request redelivered after its directive ended is acked and skipped: the handler never runs
    handled: List[Directive] = []
    async with Client(bus.url, alice_tok) as alice:
        gina = Client(bus.url, gina_tok)
        await gina.connect()
        gone = await alice.create_directive("gina", "package.install", {"name": "old"})
        req = await gina.receive(timeout=5)
        assert req.correlation_id == gone.directive_id
        await gina.close()  # delivered, not acked: it comes back on the next session
        await alice.cancel_directive(gone.directive_id)
        worker = Client(bus.url, gina_tok)
        worker.on_directive("package.install", lambda d, progress: handled.append(d))
        async with worker:

            async def request_acked() -> bool:
                return (await worker.get(req.id)).acked_at is not None

            await eventually(request_acked, what="the redelivered request acked")
            await nothing_received(worker, 0.5)  # the DirectiveCanceled was the worker's too
        assert handled == []


# S30 -----------------------------------------------------------------------------------------
async def test_s30_a_group_directive(bus: Bus, admin: AdminClient) -> None:
    alice_tok = await token_for(admin, "alice")
    m_toks = [await token_for(admin, m) for m in ("m1", "m2", "m3")]
    await admin.create_group("@builders")
    for m in ("m1", "m2", "m3"):
        group = await admin.add_member("@builders", m)
    assert group.name == "@builders" and group.identities == ["m1", "m2", "m3"]
    m1, m2, m3 = [Client(bus.url, t) for t in m_toks]  # over HTTP: their requests wait in their inboxes
    try:
        async with Client(bus.url, alice_tok) as alice:
            d = await alice.create_directive("@builders", "build.run", {"ref": "main"})
            assert (d.assignee, d.claimed_by, d.status) == ("@builders", None, "requested")
            for member in (m1, m2, m3):  # (beside the PeerJoined of the members added after them)
                requests = [s for s in await member.inbox() if s.type == "DirectiveRequested"]
                assert [s.correlation_id for s in requests] == [d.directive_id]
            assert [x.directive_id for x in (await m3.list_directives(role="assigned")).directives] == [d.directive_id]

            outcomes = await asyncio.gather(m1.start_directive(d.directive_id), m2.start_directive(d.directive_id), return_exceptions=True)
            won = [o for o in outcomes if isinstance(o, Directive)]
            lost = [o for o in outcomes if isinstance(o, AlreadyClaimed)]
            assert len(won) == 1 and len(lost) == 1, outcomes
            assert won[0].claimed_by in ("m1", "m2") and lost[0].claimed_by == won[0].claimed_by
            assert lost[0].status == 409

            async def m3_request_recalled() -> bool:
                return not [s for s in await m3.inbox() if s.correlation_id == d.directive_id]

            await eventually(m3_request_recalled, what="m3's DirectiveRequested recalled")
            assert (await alice.get_directive(d.directive_id)).claimed_by == won[0].claimed_by
            told = await receive_type(alice, "DirectiveStarted")
            assert (told.correlation_id, told.from_) == (d.directive_id, won[0].claimed_by)

            # declined by every member: rejected
            d2 = await alice.create_directive("@builders", "build.run", {"ref": "dev"})
            first = await m1.reject_directive(d2.directive_id, reason="busy")
            assert (first.status, first.declined_by) == ("requested", ["m1"])
            with pytest.raises(Forbidden):
                await m1.start_directive(d2.directive_id)  # who declined may not take it after all
            second = await m2.reject_directive(d2.directive_id, reason="busy")
            assert (second.status, second.declined_by) == ("requested", ["m1", "m2"])
            last = await m3.reject_directive(d2.directive_id, reason="busy")
            assert (last.status, last.declined_by) == ("rejected", ["m1", "m2", "m3"])
            told = await receive_type(alice, "DirectiveRejected")
            assert told.correlation_id == d2.directive_id and told.payload["status"] == "rejected"
    finally:
        for member in (m1, m2, m3):
            await member.close()


# S31 -----------------------------------------------------------------------------------------
async def test_s31_groups_and_fanout(bus: Bus, admin: AdminClient) -> None:
    alice_tok, bob_tok, carol_tok = [await token_for(admin, n) for n in ("alice", "bob", "carol")]
    created = await admin.create_group("@reviewers", self_join=True)
    assert (created.name, created.self_join, created.announce, created.members) == ("@reviewers", True, True, [])
    assert (await admin.add_member("reviewers", "bob")).identities == ["bob"]  # with or without the '@'
    assert (await admin.add_member("@reviewers", "bob")).identities == ["bob"]  # idempotent
    with pytest.raises(UnknownRecipient):
        await admin.add_member("@reviewers", "nobody")
    carol = Client(bus.url, carol_tok)  # over HTTP: offline
    try:
        async with Client(bus.url, alice_tok) as alice, Client(bus.url, bob_tok) as bob:
            joined = await carol.join_group("@reviewers")
            assert joined.identities == ["bob", "carol"]
            peer = await receive_type(bob, "PeerJoined")
            assert (peer.from_, peer.payload) == ("signalbus", {"group": "@reviewers", "identity": "carol"})

            listed = await alice.groups()
            assert [(g.name, g.identities, g.self_join, g.announce) for g in listed] == [("@reviewers", ["bob", "carol"], True, True)]
            one = await alice.group("@reviewers")
            assert {m.identity: m.recipient_state for m in one.members} == {"bob": "available", "carol": "not_available_offline"}
            assert one.created_at is not None and all(m.added_at is not None for m in one.members)

            out = await alice.send("@reviewers", "ReviewRequested", {"pr": 9}, dedupe_key="pr-9")
            assert isinstance(out, FanoutResult) and out.to == "@reviewers" and not out.spooled and out.signal_id is None
            uuid.UUID(out.fanout_id)
            assert [r.to for r in out.results] == ["bob", "carol"] and all(r.ok for r in out.results)
            to_bob, to_carol = out.results
            assert (to_bob.delivered, to_bob.publish_path) == (True, "pushed_to_ws")
            assert (to_carol.queued, to_carol.publish_path, to_carol.recipient_state) == (True, "queued_offline", "not_available_offline")
            got = await receive_type(bob, "ReviewRequested")
            assert got.id == to_bob.signal_id
            again = await alice.send("@reviewers", "ReviewRequested", {"pr": 9}, dedupe_key="pr-9")
            assert isinstance(again, FanoutResult)
            assert again.fanout_id == out.fanout_id and again.signal_ids == out.signal_ids
            await nothing_received(bob, 1.0)  # nobody receives a second signal
            assert [s.id for s in await carol.inbox()] == [to_carol.signal_id]

            recalled = await alice.recall_many(fanout_id=out.fanout_id)
            assert sorted((e.to, e.signal_id, e.outcome) for e in recalled) == [
                ("bob", to_bob.signal_id, "already_delivered"),
                ("carol", to_carol.signal_id, "recalled"),
            ]
            assert await carol.inbox() == []
            assert await alice.recall_many(fanout_id=str(uuid.uuid4())) == []
            thread = await alice.send("@reviewers", "StatusUpdate", {"n": 1}, correlation_id="thread-1")
            assert isinstance(thread, FanoutResult) and len(thread.signal_ids) == 2
            by_correlation = await carol.recall_many(correlation_id="thread-1")  # not carol's signals
            assert by_correlation == []
            assert sorted(e.to for e in await alice.recall_many(correlation_id="thread-1")) == ["bob", "carol"]
            with pytest.raises(UsageError):
                await alice.recall_many()

            # a member's send to its group goes to the others only (over HTTP here)
            from_carol = await carol.send("@reviewers", "StatusUpdate", {"from": "carol"})
            assert isinstance(from_carol, FanoutResult) and [r.to for r in from_carol.results] == ["bob"]

            await admin.create_group("@leads")  # not self-join
            with pytest.raises(Forbidden):
                await carol.join_group("@leads")
            with pytest.raises(UnknownGroup) as unknown:
                await alice.send("@nope", "StatusUpdate", {})
            assert unknown.value.status == 404
            with pytest.raises(UnknownGroup):
                await carol.send("@nope", "StatusUpdate", {})  # over HTTP too
            with pytest.raises(UnknownGroup):
                await alice.group("@nope")

            left = await carol.leave_group("@reviewers")
            assert left.identities == ["bob"]
            gone = await receive_type(bob, "PeerLeft")
            assert gone.payload == {"group": "@reviewers", "identity": "carol"}
        removed = await admin.remove_member("@reviewers", "bob")
        assert removed.identities == [] and (await admin.group("reviewers", tenant="default")).identities == []
        assert [g.name for g in await admin.groups()] == ["@leads", "@reviewers"]
        await admin.delete_group("@leads")
        with pytest.raises(UnknownGroup):
            await admin.delete_group("@leads")
        assert [g.name for g in await admin.groups(tenant="default")] == ["@reviewers"]
    finally:
        await carol.close()
