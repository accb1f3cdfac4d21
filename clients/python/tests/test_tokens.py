"""clients/SCENARIOS.md S36–S40 (least-privilege tokens, CONTRACT §17: scoped, revoked and
expiring tokens, tenant admins, a JWT bearer), each against a real `signalbus serve` (see
conftest.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import signal
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from signalbus_client import (
    SCOPES,
    AdminClient,
    Client,
    Forbidden,
    InvalidRequest,
    NotFound,
    RecipientUnavailable,
    SendResult,
    SignalbusError,
    Unauthorized,
    UsageError,
)

from conftest import Bus
from test_scenarios import token_for


async def forbidden(call: Any) -> Forbidden:
    """``call`` (an awaitable) fails with the bus's 403 ``forbidden``."""
    with pytest.raises(Forbidden) as caught:
        await call
    assert caught.value.status == 403 and caught.value.code == "forbidden", caught.value
    return caught.value


# S36 -----------------------------------------------------------------------------------------
async def test_s36_a_token_with_only_send_and_read(bus: Bus, admin: AdminClient) -> None:
    await admin.register("alice", kind="daemon")
    bob_tok = await token_for(admin, "bob")
    issued = await admin.issue_token("alice", scopes=["read", "send"], label="ci")
    assert issued.token.startswith("sb_") and len(issued.token) == 3 + 64, "sb_ + 64 hex"
    assert (issued.scopes, issued.expires_at, issued.label) == (["send", "read"], None, "ci"), "the bus's order"
    assert issued.token not in repr(issued), "a secret is never printed by accident"
    every = await admin.issue_token("alice")
    assert every.scopes == list(SCOPES), "scopes omitted = every scope"
    listed = await admin.tokens("alice")
    assert [t.token_id for t in listed] == ["registration", issued.token_id, every.token_id]
    assert listed[0].is_registration and listed[0].scopes == list(SCOPES) and listed[0].expires_at is None
    assert (listed[1].scopes, listed[1].label, listed[1].expired) == (["send", "read"], "ci", False)
    assert isinstance(listed[1].issued_at, datetime)
    assert all("token" not in t.raw for t in listed), "secrets are never listed"
    with pytest.raises(InvalidRequest):
        await admin.issue_token("alice", scopes=["admin"])  # type: ignore[list-item]
    with pytest.raises(InvalidRequest):
        await admin.issue_token("alice", scopes=[])
    with pytest.raises(NotFound):
        await admin.issue_token("nobody")
    async with Client(bus.url, bob_tok) as bob, Client(bus.url, issued.token) as alice:
        # A token without `receive` opens a session (the client never assumes it is pushed to)...
        assert alice.welcome is not None and alice.welcome.identity == "alice"
        out = await alice.send("bob", "Question", {"q": "ship it?"})  # over the session
        assert isinstance(out, SendResult) and out.delivered
        got = await bob.receive(timeout=5)
        assert (got.from_, got.payload) == ("alice", {"q": "ship it?"})
        # ...and everything outside send and read is 403 naming the scope it lacks.
        no_inbox = await forbidden(alice.inbox())
        assert no_inbox.scope == "receive" and '"receive"' in no_inbox.message, no_inbox
        assert (await forbidden(alice.drain())).scope == "receive"
        assert (await forbidden(alice.recall(out.signal_id or ""))).scope == "recall"  # over the session
        assert (await forbidden(alice.record_fact("alice", "seen", {}))).scope == "facts"
        assert (await forbidden(alice.create_directive("bob", "package.install"))).scope == "directives"
        # `read` is held; and the session is not a presence session: alice is not available.
        roster = {a.identity: a for a in await alice.agents()}
        assert roster["alice"].state == "not_available_offline", roster["alice"]
        with pytest.raises(RecipientUnavailable):
            await bob.send("alice", "Question", {"q": "there?"})


# S37 -----------------------------------------------------------------------------------------
async def test_s37_revoking_a_token_closes_its_session(bus: Bus, admin: AdminClient) -> None:
    registration = await token_for(admin, "carol")
    issued = await admin.issue_token("carol", label="laptop")
    carol = Client(bus.url, issued.token, reconnect_max=0.5)
    await carol.connect()
    started = time.monotonic()
    await admin.revoke_token("carol", issued.token_id)
    await carol.wait_disconnected(5)
    assert time.monotonic() - started < 1.5, "closed at once (every gateway within 1 s)"
    with pytest.raises(Unauthorized) as closed:
        await carol.wait_connected(5)  # 1008 is fatal: the client does not reconnect
    assert "token revoked" in str(closed.value), closed.value
    await carol.close()
    again = Client(bus.url, issued.token)
    try:
        with pytest.raises(Unauthorized) as refused:
            await again.agents()
        assert refused.value.status == 401
    finally:
        await again.close()
    await admin.revoke_token("carol", issued.token_id)  # again: the same answer, nothing appended
    assert [t.token_id for t in await admin.tokens("carol")] == ["registration"], "revoked ones are not listed"
    with pytest.raises(InvalidRequest):
        await admin.revoke_token("carol", "registration")  # rotate replaces it
    with pytest.raises(NotFound):
        await admin.revoke_token("carol", str(uuid.uuid4()))
    async with Client(bus.url, registration) as still:
        assert still.welcome is not None, "the agent's other tokens keep working"


# S38 -----------------------------------------------------------------------------------------
async def test_s38_a_tenant_admin_manages_its_own_tenant_only(bus: Bus, admin: AdminClient) -> None:
    await admin.register("alice")
    acme = await admin.create_admin_token("acme", label="acme ops")
    assert (acme.tenant, acme.label) == ("acme", "acme ops") and acme.token.startswith("sb_")
    async with AdminClient(bus.url, acme.token) as ops:
        robot = await ops.register("robot", tenant="acme", kind="daemon")
        assert robot.tenant == "acme"
        assert [a.identity for a in await ops.agents(tenant="acme")] == ["robot"]
        scoped = await ops.issue_token("robot", tenant="acme", scopes=["send"])
        assert scoped.scopes == ["send"]
        assert [t.token_id for t in await ops.tokens("robot", tenant="acme")] == ["registration", scoped.token_id]
        assert [t.token_id for t in await ops.admin_tokens(tenant="acme")] == [acme.token_id]
        await forbidden(ops.register("intruder", tenant="default"))
        await forbidden(ops.agents(tenant="default"))
        await forbidden(ops.issue_token("alice", tenant="default"))
        await forbidden(ops.remove("alice", tenant="default"))
        await forbidden(ops.admin_tokens(tenant="default"))
        await forbidden(ops.rebuild())  # global admin only
        await forbidden(ops.create_admin_token("acme"))
        await forbidden(ops.revoke_admin_token(acme.token_id))
    assert {a.identity for a in await admin.agents()} == {"alice"}, "nothing reached tenant default"
    listed = {t.token_id: t for t in await admin.admin_tokens()}
    assert (listed[acme.token_id].tenant, listed[acme.token_id].label) == ("acme", "acme ops")
    assert isinstance(listed[acme.token_id].issued_at, datetime)
    await admin.revoke_admin_token(acme.token_id)
    async with AdminClient(bus.url, acme.token) as revoked:
        with pytest.raises(Unauthorized):
            await revoked.agents(tenant="acme")
    with pytest.raises(NotFound):
        await admin.revoke_admin_token(str(uuid.uuid4()))
    with pytest.raises(UsageError):
        await admin.create_admin_token("")


# S39 -----------------------------------------------------------------------------------------
async def test_s39_an_expiring_token_stops_at_its_expiry(bus: Bus, admin: AdminClient) -> None:
    await admin.register("dave")
    before = datetime.now(timezone.utc)
    issued = await admin.issue_token("dave", expires_in=timedelta(seconds=2))
    assert issued.expires_at is not None
    assert before + timedelta(seconds=1) <= issued.expires_at <= before + timedelta(seconds=4), issued.expires_at
    dave = Client(bus.url, issued.token, reconnect_max=0.5)
    await dave.connect()
    assert [a.identity for a in await dave.agents()] == ["dave"], "it works until then"
    await dave.wait_disconnected(8)  # at expiry the bus closes its sessions
    assert datetime.now(timezone.utc) >= issued.expires_at - timedelta(milliseconds=500)
    with pytest.raises(Unauthorized) as closed:
        await dave.wait_connected(5)
    assert "token expired" in str(closed.value), closed.value
    await dave.close()
    late = Client(bus.url, issued.token)
    try:
        with pytest.raises(Unauthorized) as refused:
            await late.agents()
        assert (refused.value.status, refused.value.message) == (401, "token expired")
    finally:
        await late.close()
    listed = {t.token_id: t for t in await admin.tokens("dave")}
    assert listed[issued.token_id].expired, "listed until revoked, marked expired"
    for bad in (0, -1, float("nan"), timedelta(0)):
        with pytest.raises(UsageError):
            await admin.issue_token("dave", expires_in=bad)
    with pytest.raises(UsageError):
        await admin.issue_token("dave", scopes="send")  # type: ignore[arg-type]


# S40 -----------------------------------------------------------------------------------------
JWT_SECRET = "sbtest-jwt-secret-0123456789abcdef"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(claims: dict[str, Any], secret: str = JWT_SECRET) -> str:
    """A JWT signed with HS256, as an identity provider would issue it."""
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + _b64(json.dumps(claims).encode())
    mac = hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest()
    return head + "." + _b64(mac)


async def test_s40_a_jwt_bearer_passes_through_unchanged(tmp_path: Path) -> None:
    config = tmp_path / "signalbus.toml"
    config.write_text(f'[auth]\njwt_hs256_secret = "{JWT_SECRET}"\n')
    jwt_bus = Bus(tmp_path, extra_args=["--config", str(config)])
    jwt_bus.start()
    try:
        async with AdminClient(jwt_bus.url, jwt_bus.admin_token) as admin:
            await admin.register("erin")
            bob_tok = await token_for(admin, "bob")
        now = int(time.time())
        jwt = hs256({"sub": "erin", "tenant": "default", "scope": "send read", "exp": now + 120})
        async with Client(jwt_bus.url, bob_tok) as bob, Client(jwt_bus.url, jwt) as erin:
            assert erin.welcome is not None and erin.welcome.identity == "erin"
            out = await erin.send("bob", "StatusUpdate", {"via": "jwt"})
            assert isinstance(out, SendResult) and out.delivered
            assert (await bob.receive(timeout=5)).from_ == "erin"
            assert (await forbidden(erin.inbox())).scope == "receive", "the scope claim limits it"
        for refused in (
            hs256({"sub": "erin", "tenant": "default", "exp": now + 120}, secret="another-secret"),
            hs256({"sub": "erin", "tenant": "default", "exp": now - 3600}),
            hs256({"sub": "nobody", "tenant": "default", "exp": now + 120}),
        ):
            client = Client(jwt_bus.url, refused)
            try:
                with pytest.raises(Unauthorized):
                    await client.connect(timeout=5)
                with pytest.raises(Unauthorized):
                    await client.agents()
            finally:
                await client.close()
    finally:
        jwt_bus.stop(signal.SIGTERM)


async def test_forbidden_names_its_scope_on_either_transport() -> None:
    """Without a bus: the 403 body's ``scope`` is the typed error's ``.scope``."""
    from signalbus_client.errors import error_from_body

    body = {"error": {"code": "forbidden", "message": 'this token lacks the "send" scope', "scope": "send"}}
    over_http = error_from_body(body, 403)
    over_session = error_from_body(body["error"])
    for err in (over_http, over_session):
        assert isinstance(err, Forbidden) and isinstance(err, SignalbusError)
        assert (err.scope, err.status) == ("send", 403)
    other = error_from_body({"error": {"code": "forbidden", "message": "not your plugin"}}, 403)
    assert isinstance(other, Forbidden) and other.scope is None
