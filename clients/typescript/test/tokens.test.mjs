// clients/SCENARIOS.md S36–S40 (least-privilege tokens, CONTRACT §17: scoped, revoked and
// expiring tokens, tenant admins, a JWT bearer), each against a real `signalbus serve` (see harness.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";

import {
  AdminClient,
  Client,
  Forbidden,
  InvalidRequest,
  NotFound,
  RecipientUnavailable,
  SCOPES,
  Unauthorized,
  UsageError,
  errorFromBody,
} from "../dist/index.js";
import { binary, quiet, tokenFor, withBus } from "./harness.mjs";

binary(); // fail loudly, before any test, when the binary is missing

const client = (bus, token, o = {}) => new Client(bus.url, token, { ...quiet, ...o });

/** `promise` rejects with the bus's 403 `forbidden`; resolves to that error. */
async function forbidden(promise) {
  let caught;
  await assert.rejects(promise, (e) => {
    caught = e;
    return e instanceof Forbidden && e.status === 403 && e.code === "forbidden";
  });
  return caught;
}

test("S36 a token with only send and read", () =>
  withBus(async (bus, admin) => {
    await admin.register("alice", { kind: "daemon" });
    const bobTok = await tokenFor(admin, "bob");
    const issued = await admin.issueToken("alice", { scopes: ["read", "send"], label: "ci" });
    assert.match(issued.token, /^sb_[0-9a-f]{64}$/);
    assert.deepEqual([issued.scopes, issued.expiresAt, issued.label], [["send", "read"], null, "ci"], "the bus's order");
    const every = await admin.issueToken("alice");
    assert.deepEqual(every.scopes, [...SCOPES], "scopes omitted = every scope");
    const listed = await admin.tokens("alice");
    assert.deepEqual(listed.map((t) => t.tokenId), ["registration", issued.tokenId, every.tokenId]);
    assert.deepEqual([listed[0].scopes, listed[0].expiresAt], [[...SCOPES], null]);
    assert.deepEqual([listed[1].scopes, listed[1].label, listed[1].expired], [["send", "read"], "ci", false]);
    assert.ok(listed[1].issuedAt && !Number.isNaN(Date.parse(listed[1].issuedAt)));
    assert.ok(listed.every((t) => !("token" in t)), "secrets are never listed");
    await assert.rejects(admin.issueToken("alice", { scopes: ["admin"] }), InvalidRequest);
    await assert.rejects(admin.issueToken("alice", { scopes: [] }), InvalidRequest);
    await assert.rejects(admin.issueToken("nobody"), NotFound);
    const bob = client(bus, bobTok);
    const alice = client(bus, issued.token);
    try {
      await bob.connect();
      // A token without `receive` opens a session (the client never assumes it is pushed to)...
      assert.equal((await alice.connect()).identity, "alice");
      const out = await alice.send("bob", "Question", { q: "ship it?" }); // over the session
      assert.ok(!out.spooled && out.delivered);
      const got = await bob.receive(5000);
      assert.deepEqual([got.from, got.payload], ["alice", { q: "ship it?" }]);
      // ...and everything outside send and read is 403 naming the scope it lacks.
      const noInbox = await forbidden(alice.inbox());
      assert.equal(noInbox.scope, "receive");
      assert.match(noInbox.detail, /"receive"/);
      assert.equal((await forbidden(alice.drain())).scope, "receive");
      assert.equal((await forbidden(alice.recall(out.signalId))).scope, "recall"); // over the session
      assert.equal((await forbidden(alice.recordFact("alice", "seen", {}))).scope, "facts");
      assert.equal((await forbidden(alice.createDirective("bob", "package.install"))).scope, "directives");
      // `read` is held; and the session is not a presence session: alice is not available.
      const roster = Object.fromEntries((await alice.agents()).map((a) => [a.identity, a]));
      assert.equal(roster.alice.state, "not_available_offline");
      await assert.rejects(bob.send("alice", "Question", { q: "there?" }), RecipientUnavailable);
    } finally {
      await alice.close();
      await bob.close();
    }
  }));

test("S37 revoking a token closes its session", () =>
  withBus(async (bus, admin) => {
    const registration = await tokenFor(admin, "carol");
    const issued = await admin.issueToken("carol", { label: "laptop" });
    const carol = client(bus, issued.token, { reconnectMaxMs: 500 });
    await carol.connect();
    const started = Date.now();
    assert.deepEqual(await admin.revokeToken("carol", issued.tokenId), { tokenId: issued.tokenId, revoked: true });
    await carol.waitDisconnected(5000);
    assert.ok(Date.now() - started < 1500, "closed at once (every gateway within 1 s)");
    await assert.rejects(carol.waitConnected(5000), (e) => e instanceof Unauthorized && /token revoked/.test(e.message));
    await carol.close();
    await assert.rejects(client(bus, issued.token).agents(), (e) => e instanceof Unauthorized && e.status === 401);
    assert.deepEqual(await admin.revokeToken("carol", issued.tokenId), { tokenId: issued.tokenId, revoked: true }, "again: the same answer");
    assert.deepEqual((await admin.tokens("carol")).map((t) => t.tokenId), ["registration"], "revoked ones are not listed");
    await assert.rejects(admin.revokeToken("carol", "registration"), InvalidRequest); // rotate replaces it
    await assert.rejects(admin.revokeToken("carol", randomUUID()), NotFound);
    const still = client(bus, registration);
    try {
      assert.equal((await still.connect()).identity, "carol", "the agent's other tokens keep working");
    } finally {
      await still.close();
    }
  }));

test("S38 a tenant admin manages its own tenant only", () =>
  withBus(async (bus, admin) => {
    await admin.register("alice");
    const acme = await admin.createAdminToken("acme", { label: "acme ops" });
    assert.deepEqual([acme.tenant, acme.label], ["acme", "acme ops"]);
    assert.match(acme.token, /^sb_[0-9a-f]{64}$/);
    const ops = new AdminClient(bus.url, acme.token);
    const robot = await ops.register("robot", { tenant: "acme", kind: "daemon" });
    assert.equal(robot.tenant, "acme");
    assert.deepEqual((await ops.agents({ tenant: "acme" })).map((a) => a.identity), ["robot"]);
    const scoped = await ops.issueToken("robot", { tenant: "acme", scopes: ["send"] });
    assert.deepEqual(scoped.scopes, ["send"]);
    assert.deepEqual((await ops.tokens("robot", { tenant: "acme" })).map((t) => t.tokenId), ["registration", scoped.tokenId]);
    assert.deepEqual((await ops.adminTokens({ tenant: "acme" })).map((t) => t.tokenId), [acme.tokenId]);
    await forbidden(ops.register("intruder", { tenant: "default" }));
    await forbidden(ops.agents({ tenant: "default" }));
    await forbidden(ops.issueToken("alice", { tenant: "default" }));
    await forbidden(ops.remove("alice", { tenant: "default" }));
    await forbidden(ops.adminTokens({ tenant: "default" }));
    await forbidden(ops.rebuild()); // global admin only
    await forbidden(ops.createAdminToken("acme"));
    await forbidden(ops.revokeAdminToken(acme.tokenId));
    assert.deepEqual((await admin.agents()).map((a) => a.identity), ["alice"], "nothing reached tenant default");
    const listed = (await admin.adminTokens()).find((t) => t.tokenId === acme.tokenId);
    assert.deepEqual([listed.tenant, listed.label], ["acme", "acme ops"]);
    assert.ok(listed.issuedAt && !Number.isNaN(Date.parse(listed.issuedAt)));
    await admin.revokeAdminToken(acme.tokenId);
    await assert.rejects(ops.agents({ tenant: "acme" }), Unauthorized);
    await assert.rejects(admin.revokeAdminToken(randomUUID()), NotFound);
    await assert.rejects(admin.createAdminToken(""), UsageError);
  }));

test("S39 an expiring token stops at its expiry", () =>
  withBus(async (bus, admin) => {
    await admin.register("dave");
    const before = Date.now();
    const issued = await admin.issueToken("dave", { expiresInMs: 2000 });
    const expiresAt = Date.parse(issued.expiresAt);
    assert.ok(expiresAt >= before + 1000 && expiresAt <= before + 4000, issued.expiresAt);
    const dave = client(bus, issued.token, { reconnectMaxMs: 500 });
    try {
      await dave.connect();
      assert.deepEqual((await dave.agents()).map((a) => a.identity), ["dave"], "it works until then");
      await dave.waitDisconnected(8000); // at expiry the bus closes its sessions
      assert.ok(Date.now() >= expiresAt - 500);
      await assert.rejects(dave.waitConnected(5000), (e) => e instanceof Unauthorized && /token expired/.test(e.message));
    } finally {
      await dave.close();
    }
    await assert.rejects(client(bus, issued.token).agents(), (e) => e instanceof Unauthorized && e.status === 401 && e.detail === "token expired");
    const listed = (await admin.tokens("dave")).find((t) => t.tokenId === issued.tokenId);
    assert.equal(listed.expired, true, "listed until revoked, marked expired");
    for (const bad of [0, -1, Number.NaN]) await assert.rejects(admin.issueToken("dave", { expiresInMs: bad }), UsageError);
    await assert.rejects(admin.issueToken("dave", { scopes: "send" }), UsageError);
  }));

const JWT_SECRET = "sbtest-jwt-secret-0123456789abcdef";
const b64 = (buf) => Buffer.from(buf).toString("base64url");
/** A JWT signed with HS256, as an identity provider would issue it. */
function hs256(claims, secret = JWT_SECRET) {
  const head = `${b64(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${b64(JSON.stringify(claims))}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}

test("S40 a JWT bearer passes through unchanged", () =>
  withBus(
    async (bus, admin) => {
      await admin.register("erin");
      const bobTok = await tokenFor(admin, "bob");
      const now = Math.floor(Date.now() / 1000);
      const jwt = hs256({ sub: "erin", tenant: "default", scope: "send read", exp: now + 120 });
      const bob = client(bus, bobTok);
      const erin = client(bus, jwt);
      try {
        await bob.connect();
        assert.equal((await erin.connect()).identity, "erin");
        const out = await erin.send("bob", "StatusUpdate", { via: "jwt" });
        assert.ok(!out.spooled && out.delivered);
        assert.equal((await bob.receive(5000)).from, "erin");
        assert.equal((await forbidden(erin.inbox())).scope, "receive", "the scope claim limits it");
      } finally {
        await erin.close();
        await bob.close();
      }
      const refused = [
        hs256({ sub: "erin", tenant: "default", exp: now + 120 }, "another-secret"),
        hs256({ sub: "erin", tenant: "default", exp: now - 3600 }),
        hs256({ sub: "nobody", tenant: "default", exp: now + 120 }),
      ];
      for (const token of refused) {
        const c = client(bus, token);
        try {
          await assert.rejects(c.connect(5000), Unauthorized);
          await assert.rejects(c.agents(), Unauthorized);
        } finally {
          await c.close();
        }
      }
    },
    { config: `[auth]\njwt_hs256_secret = "${JWT_SECRET}"\n` },
  ));

test("a 403 names its scope on either transport (no bus)", () => {
  const body = { error: { code: "forbidden", message: 'this token lacks the "send" scope', scope: "send" } };
  for (const e of [errorFromBody(body, 403), errorFromBody(body.error)]) {
    assert.ok(e instanceof Forbidden);
    assert.deepEqual([e.scope, e.status], ["send", 403]);
  }
  assert.equal(errorFromBody({ error: { code: "forbidden", message: "not your plugin" } }, 403).scope, undefined);
});
