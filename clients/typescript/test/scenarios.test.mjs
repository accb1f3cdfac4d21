// clients/SCENARIOS.md, each against a real `signalbus serve` (see harness.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import WS from "ws";

import {
  AlreadyRegistered,
  AskTimeout,
  Client,
  InvalidRequest,
  NotFound,
  RecipientUnavailable,
  SignalbusError,
  SpoolExpired,
  TransportError,
  Unauthorized,
  UnknownRecipient,
  UsageError,
  RequestTimeout,
  forSend,
} from "../dist/index.js";
import { FileSpool } from "../dist/file-spool.js";
import { binary, eventually, quiet, sleep, tokenFor, withBus } from "./harness.mjs";

binary(); // fail loudly, before any test, when the binary is missing

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const client = (bus, token, o = {}) => new Client(bus.url, token, { ...quiet, ...o });
const acked = async (c, id) => {
  const row = await c.get(id);
  return row.ackedAt ? row : null;
};
const seconds = (a, b) => (Date.parse(b) - Date.parse(a)) / 1000;

test("S1 connect", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"), { kind: "daemon" });
    try {
      const w = await alice.connect();
      assert.deepEqual([w.identity, w.tenant, w.heartbeatIntervalMs], ["alice", "default", 750]);
      assert.match(w.sessionId, UUID);
      const roster = Object.fromEntries((await alice.agents()).map((a) => [a.identity, a]));
      assert.equal(roster.alice.state, "available");
    } finally {
      await alice.close();
    }
    const bad = client(bus, "sb_not_a_token");
    await assert.rejects(bad.connect(5000), Unauthorized);
    await bad.close();
    // the browser path: a WebSocket constructor without headers, the token in ?token=
    const viaQuery = client(bus, (await admin.register("bob")).token, { WebSocket: WS });
    try {
      assert.equal((await viaQuery.connect()).identity, "bob");
    } finally {
      await viaQuery.close();
    }
  }));

test("S2 heartbeat keeps the session available", () =>
  withBus(async (bus, admin) => {
    const bob = client(bus, await tokenFor(admin, "bob"));
    const alice = client(bus, await tokenFor(admin, "alice"));
    try {
      await bob.connect();
      await alice.connect();
      await sleep(3600); // longer than --stale-after: only the client's heartbeats keep bob available
      const res = await alice.send("bob", "Question", { q: "still there?" });
      assert.equal(res.recipientState, "available");
      assert.equal(res.delivered, true);
      const sig = await bob.receive(5000);
      assert.equal(sig.id, res.signalId);
      await bob.ack(sig);
    } finally {
      await alice.close();
      await bob.close();
    }
  }));

test("S3 send every class to an available recipient", () =>
  withBus(async (bus, admin) => {
    const bob = client(bus, await tokenFor(admin, "bob"));
    const alice = client(bus, await tokenFor(admin, "alice"));
    try {
      await bob.connect();
      await alice.connect();
      for (const cls of ["sync", "async"]) {
        const res = await alice.send("bob", "StatusUpdate", { cls }, { deliveryClass: cls });
        assert.deepEqual(
          [res.spooled, res.delivered, res.queued, res.recipientState, res.deliveryClass, res.publishPath],
          [false, true, false, "available", cls, "pushed_to_ws"],
        );
        assert.equal(res.resolvedToSession, bob.welcome.sessionId);
        const sig = await bob.receive(5000);
        assert.deepEqual([sig.id, sig.from, sig.to, sig.payload, sig.deliveryClass], [res.signalId, "alice", "bob", { cls }, cls]);
        await bob.ack(sig);
      }
    } finally {
      await alice.close();
      await bob.close();
    }
  }));

test("S4 send every class to an offline recipient", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const alice = client(bus, aliceTok);
    let queued;
    try {
      await alice.connect();
      queued = await alice.send("bob", "Question", { q: "async" }, { deliveryClass: "async" });
      assert.deepEqual([queued.delivered, queued.queued, queued.recipientState, queued.publishPath], [false, true, "not_available_offline", "queued_offline"]);
      const bounce = await alice.send("bob", "Question", { q: "sync" }).then(
        () => assert.fail("not bounced"),
        (e) => e,
      );
      assert.ok(bounce instanceof RecipientUnavailable);
      assert.equal(bounce.recipientState, "not_available_offline");
      assert.match(bounce.signalId, UUID);
      assert.equal(bounce.status, 409); // answered over the session: the §8 status all the same (S22)
    } finally {
      await alice.close();
    }
    const bob = client(bus, bobTok);
    assert.deepEqual((await bob.inbox()).map((s) => s.id), [queued.signalId]); // the bounce was never queued
    const httpAlice = client(bus, aliceTok); // no session: over HTTP, 409
    await assert.rejects(httpAlice.send("bob", "Blocker", { b: 1 }), (e) => e instanceof RecipientUnavailable && e.status === 409 && e.recipientState === "not_available_offline");
  }));

test("S5 send every class to a stale recipient", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const r = await fetch(`${bus.url}/v1/sessions`, { method: "POST", headers: { Authorization: `Bearer ${bobTok}` }, body: '{"kind":"shim"}' });
    assert.equal(r.status, 200);
    await sleep(3400); // the piggyback session is now older than --stale-after (3s), not yet closed (6s)
    const alice = client(bus, aliceTok);
    try {
      await alice.connect();
      await assert.rejects(alice.send("bob", "Blocker", { b: "stale" }, { deliveryClass: "sync" }), (e) => e instanceof RecipientUnavailable && e.recipientState === "not_available_stale");
      const queued = await alice.send("bob", "TaskAssigned", { t: "stale" });
      assert.deepEqual([queued.queued, queued.recipientState, queued.publishPath], [true, "not_available_stale", "queued_offline"]);
    } finally {
      await alice.close();
    }
  }));

test("S6 send fields, errors and dedupe", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    await tokenFor(admin, "bob");
    try {
      await alice.connect();
      const res = await alice.send("bob", "ReviewRequested", { pr: 7, db: { password: "hunter2" } }, { deliveryClass: "async", ttlSeconds: 120, correlationId: "corr-1", dedupeKey: "review-7" });
      assert.deepEqual(res.redacted, ["db.password"]);
      assert.equal(res.dedupeKey, "review-7");
      assert.equal(seconds(res.createdAt, res.expiresAt), 120);
      const again = await alice.send("bob", "ReviewRequested", { pr: 7 }, { deliveryClass: "async", dedupeKey: "review-7" });
      assert.equal(again.signalId, res.signalId); // dedupe: nothing new
      const row = await alice.get(res.signalId);
      assert.deepEqual([row.fromIdentity, row.toIdentity, row.signalType, row.correlationId, row.status], ["alice", "bob", "ReviewRequested", "corr-1", "pending"]);
      assert.deepEqual(row.payload, { pr: 7, db: { password: "[REDACTED]" } });
      assert.deepEqual((await alice.list({ role: "sent" })).signals.map((r) => r.id), [res.signalId]);
      const auto = await alice.send("bob", "StatusUpdate");
      assert.match(auto.dedupeKey, /^sbc-/);
      await assert.rejects(alice.send("nobody", "StatusUpdate"), (e) => e instanceof UnknownRecipient && e.code === "unknown_recipient" && e.hint.includes("register"));
      await assert.rejects(alice.send("bob", "not a type!"), InvalidRequest);
      await assert.rejects(alice.send("bob", "StatusUpdate", {}, { ttlSeconds: 0 }), InvalidRequest);
    } finally {
      await alice.close();
    }
  }));

test("S7 receive and ack", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    const bobTok = await tokenFor(admin, "bob");
    const got = [];
    try {
      await alice.connect();
      const queued = await alice.send("bob", "TaskAssigned", { n: 0 }); // waits for bob: startup drain
      assert.equal(queued.queued, true);
      const bob = client(bus, bobTok, { onSignal: (s) => void got.push(s) }); // auto-ack after the handler
      try {
        await bob.connect();
        const pushed = await alice.send("bob", "StatusUpdate", { n: 1 });
        assert.equal(pushed.delivered, true);
        await eventually(() => got.length === 2, 10000, "two signals");
        // (the startup drain and a live push may interleave: no order between them)
        assert.deepEqual(new Set(got.map((s) => s.id)), new Set([queued.signalId, pushed.signalId]));
        for (const [id, via] of [[queued.signalId, "startup_drain"], [pushed.signalId, "ws_push"]]) {
          const row = await eventually(() => acked(alice, id), 10000, `${id} acked`);
          assert.equal(row.deliveredVia, via);
        }
      } finally {
        await bob.close();
      }
      const manual = client(bus, bobTok);
      try {
        await manual.connect();
        const sent = await alice.send("bob", "StatusUpdate", { n: 2 });
        const sig = await manual.receive(5000);
        assert.equal(sig.id, sent.signalId);
        assert.equal((await alice.get(sig.id)).ackedAt, null);
        assert.equal(await manual.ack(sig), 1);
        await eventually(() => acked(alice, sig.id), 10000, "manual ack");
      } finally {
        await manual.close();
      }
    } finally {
      await alice.close();
    }
  }));

test("S8 redelivery after an unacked disconnect", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    const bobTok = await tokenFor(admin, "bob");
    try {
      await alice.connect();
      const first = client(bus, bobTok);
      await first.connect();
      const res = await alice.send("bob", "Question", { q: "unacked" });
      const sig = await first.receive(5000);
      assert.equal(sig.id, res.signalId);
      assert.equal(sig.redelivered, false);
      await first.close(); // closes the session without acking
      const second = client(bus, bobTok);
      try {
        await second.connect();
        const again = await second.receive(5000);
        assert.equal(again.id, sig.id);
        assert.equal(again.redelivered, true);
        await second.ack(again);
        await eventually(() => acked(alice, sig.id), 10000, "ack after redelivery");
      } finally {
        await second.close();
      }
      // a failing handler does not ack; the signal comes back on the next session, handled again
      const calls = [];
      const bob = client(bus, bobTok, {
        onSignal: (s) => {
          calls.push(s);
          if (calls.length === 1) throw new Error("handler bug");
        },
      });
      try {
        await bob.connect();
        const res2 = await alice.send("bob", "StatusUpdate", { n: "flaky" });
        await eventually(() => calls.length === 1, 10000, "first call");
        bob.dropConnection();
        await eventually(() => calls.length === 2, 10000, "redelivered call");
        assert.equal(calls[1].id, res2.signalId);
        assert.equal(calls[1].redelivered, true);
        await eventually(() => acked(alice, res2.signalId), 10000, "ack of the redelivered signal");
      } finally {
        await bob.close();
      }
    } finally {
      await alice.close();
    }
  }));

test("S9 dedupe of redelivered signals", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    let release;
    const released = new Promise((r) => (release = r));
    const calls = [];
    const bob = client(bus, await tokenFor(admin, "bob"), {
      onSignal: async (s) => {
        calls.push(s);
        await released;
      },
    });
    try {
      await alice.connect();
      await bob.connect();
      const res = await alice.send("bob", "StatusUpdate", { n: 1 });
      await eventually(() => calls.length === 1, 10000, "handler called");
      bob.dropConnection(); // the session closes with the signal delivered, not acked
      await eventually(() => bob.duplicatesDropped === 1, 10000, "the redelivery, dropped");
      release();
      await eventually(() => acked(alice, res.signalId), 10000, "acked once handled");
      await sleep(200);
      assert.equal(calls.length, 1);
      assert.equal(bob.sessionsOpened, 2);
    } finally {
      release();
      await bob.close();
      await alice.close();
    }
  }));

test("S10 reconnect after a server restart", () =>
  withBus(async (bus, admin) => {
    const got = [];
    const alice = client(bus, await tokenFor(admin, "alice"), { reconnectMaxMs: 1000 });
    const bob = client(bus, await tokenFor(admin, "bob"), { reconnectMaxMs: 1000, onSignal: (s) => void got.push(s) });
    try {
      await alice.connect();
      await bob.connect();
      await bus.stop("SIGKILL");
      await alice.waitDisconnected(5000);
      await bob.waitDisconnected(5000);
      await bus.start(); // same port, same data dir
      await alice.waitConnected(20000);
      await bob.waitConnected(20000);
      assert.deepEqual([alice.sessionsOpened, bob.sessionsOpened], [2, 2]);
      await eventually(async () => (await alice.agents()).some((a) => a.identity === "bob" && a.state === "available"), 15000, "bob available again");
      const res = await alice.send("bob", "Question", { q: "after restart" });
      assert.equal(res.delivered, true);
      assert.equal(res.resolvedToSession, bob.welcome.sessionId);
      await eventually(() => got.length === 1 && got[0].id === res.signalId, 10000, "signal after restart");
    } finally {
      await bob.close();
      await alice.close();
    }
  }));

test("S11 recall", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bob = client(bus, await tokenFor(admin, "bob"));
    const alice = client(bus, aliceTok);
    let res;
    try {
      await alice.connect();
      res = await alice.send("bob", "TaskAssigned", { t: 1 });
      assert.equal((await alice.recall(res.signalId)).outcome, "recalled");
      assert.equal((await alice.recall(res.signalId)).outcome, "recalled");
      assert.equal((await alice.recall(crypto.randomUUID())).outcome, "not_found");
      const kept = await alice.send("bob", "TaskAssigned", { t: 2 });
      assert.equal((await bob.recall(kept.signalId)).outcome, "not_found"); // only the sender
      assert.deepEqual((await bob.drain()).map((s) => s.id), [kept.signalId]); // never the recalled one
      assert.equal((await alice.recall(kept.signalId)).outcome, "already_delivered");
      assert.equal((await alice.get(res.signalId)).status, "recalled");
    } finally {
      await alice.close();
    }
    const httpAlice = client(bus, aliceTok); // the same answers over HTTP
    assert.equal((await httpAlice.recall(crypto.randomUUID())).outcome, "not_found");
    assert.equal((await httpAlice.recall(res.signalId)).outcome, "recalled");
  }));

test("S12 ask and reply", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    const bob = client(bus, await tokenFor(admin, "bob"), { onSignal: async (s) => void (await bob.reply(s, "Answer", { a: s.payload.q * 2 })) });
    const carol = client(bus, await tokenFor(admin, "carol"));
    await tokenFor(admin, "dave"); // registered, never connected
    try {
      await Promise.all([alice.connect(), bob.connect(), carol.connect()]);
      const reply = await alice.ask("bob", "Question", { q: 21 }, 10000);
      assert.deepEqual([reply.from, reply.type, reply.payload], ["bob", "Answer", { a: 42 }]);
      assert.ok(reply.correlationId);
      await assert.rejects(alice.ask("carol", "Question", { q: 1 }, 500), (e) => e instanceof AskTimeout && UUID.test(e.signalId) && !!e.correlationId);
      await assert.rejects(alice.ask("dave", "Question", { q: 0 }, 5000), (e) => e instanceof RecipientUnavailable && e.recipientState === "not_available_offline");
    } finally {
      await Promise.all([alice.close(), bob.close(), carol.close()]);
    }
  }));

test("S13 spool while the bus is down, then replay without duplicates", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const spoolDir = mkdtempSync(path.join(tmpdir(), "sbc-spool-"));
    const replayed = [];
    const alice = client(bus, aliceTok, { spoolDir, replayIntervalMs: 200, reconnectMaxMs: 500, onReplay: (e, r) => void replayed.push([e.request.dedupe_key, r]) });
    const spool = new FileSpool(spoolDir);
    try {
      await alice.connect();
      const stored = await alice.send("bob", "TaskAssigned", { n: 0 }, { dedupeKey: "task-0" });
      assert.equal(stored.spooled, false);
      await bus.stop("SIGKILL"); // the bus is unreachable
      await alice.waitDisconnected(5000);
      const spooled = [];
      for (const n of [1, 2, 3]) {
        const out = await alice.send("bob", "TaskAssigned", { n }, { ttlSeconds: 3600 });
        assert.equal(out.spooled, true, JSON.stringify(out));
        assert.match(out.dedupeKey, /^sbc-/);
        spooled.push(out);
        await sleep(10);
      }
      const resend = await alice.send("bob", "TaskAssigned", { n: 0 }, { dedupeKey: "task-0" }); // outcome "unknown" to the caller
      assert.deepEqual([resend.spooled, resend.dedupeKey], [true, "task-0"]);
      await assert.rejects(alice.send("bob", "Blocker", { b: 1 }), (e) => e instanceof TransportError && /nothing was sent/.test(e.message)); // sync: never spooled (S19)
      assert.equal(await spool.count(), 4);
      await bus.start();
      await eventually(async () => replayed.length === 4 && (await spool.count()) === 0, 20000, "spool replayed");
      const outcomes = Object.fromEntries(replayed);
      assert.equal(outcomes["task-0"].signalId, stored.signalId); // the replay answered the original
      assert.deepEqual(
        replayed.map(([k]) => k),
        ["task-0", spooled[2].dedupeKey, spooled[1].dedupeKey, spooled[0].dedupeKey],
      ); // newest first
    } finally {
      await alice.close();
    }
    const drained = await client(bus, bobTok).drain();
    assert.deepEqual(drained.map((s) => s.payload.n).sort(), [0, 1, 2, 3]); // each exactly once: no duplicate of task-0
    const byN = Object.fromEntries(drained.map((s) => [s.payload.n, s]));
    assert.ok(byN[3].createdAt < byN[2].createdAt && byN[2].createdAt < byN[1].createdAt); // replayed newest first
    for (const n of [1, 2, 3]) {
      const ttl = seconds(byN[n].createdAt, byN[n].expiresAt);
      assert.ok(ttl > 3500 && ttl <= 3600, `ttl ${ttl}`); // the TTL left, not a fresh one
    }
  }));

test("S19 sync sends and asks are never spooled", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const spoolDirOf = () => mkdtempSync(path.join(tmpdir(), "sbc-spool-"));
    const alice = client(bus, aliceTok, { spoolDir: spoolDirOf(), reconnectInitialMs: 5000, reconnectMaxMs: 5000 });
    const never = client(bus, aliceTok, { spoolDir: spoolDirOf(), identity: "alice" }); // never connected
    const nothingSent = (e) => e instanceof TransportError && /nothing was sent/.test(e.message);
    try {
      await alice.connect();
      await bus.stop("SIGKILL"); // the bus is unreachable
      await alice.waitDisconnected(5000);
      for (const c of [alice, never]) {
        // a lost session and no session behave the same
        const spool = await c.spool();
        await assert.rejects(c.send("bob", "Blocker", { b: 1 }), nothingSent); // sync by default (CONTRACT §3)
        await assert.rejects(c.send("bob", "TaskAssigned", { t: 1 }, { deliveryClass: "sync" }), nothingSent);
        const started = Date.now();
        await assert.rejects(c.ask("bob", "Question", { q: 1 }, 10000), nothingSent);
        await assert.rejects(c.ask("bob", "StatusUpdate", { q: 1 }, 10000, { deliveryClass: "async" }), nothingSent);
        assert.ok(Date.now() - started < 2000, "at once, not after the ask's timeout");
        assert.equal(await spool.count(), 0);
        const queued = await c.send("bob", "TaskAssigned", { t: 2 }); // async: still spooled
        assert.equal(queued.spooled, true);
        assert.equal(queued.signalId, null);
        assert.equal(await spool.count(), 1);
      }
      // The bus is back: the spooled async sends arrive; the failed sync sends and asks never do.
      await bus.start();
      await alice.waitConnected(15000);
      for (const c of [alice, never]) {
        await c.replaySpool();
        assert.equal(await (await c.spool()).count(), 0);
      }
      await sleep(1000); // room for anything replayed late
      const pending = await client(bus, bobTok).inbox();
      assert.deepEqual(pending.map((s) => [s.type, s.payload.t]), [["TaskAssigned", 2], ["TaskAssigned", 2]]);
    } finally {
      await never.close();
      await alice.close();
    }
  }));

test("S14 spool caps and TTL", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const dir = mkdtempSync(path.join(tmpdir(), "sbc-spool-"));
    const spool = new FileSpool(dir, { maxBytes: 2000, maxAgeMs: 3600_000 });
    const now = Date.now();
    const put = (key, payload, ttlSeconds, ago) =>
      spool.put({ to: "bob", type: "StatusUpdate", payload, dedupe_key: key }, { ttlSeconds, identity: "alice", reason: "test", now: now - ago * 1000 });
    const old = await put("old", { n: "old" }, 86400, 7200);
    const expired = await put("exp", { n: "expired" }, 60, 120);
    const aged = await put("aged", { n: "aged" }, 600, 100);
    const exists = (e) => existsSync(path.join(dir, e.name));
    assert.equal(exists(old), false); // past the age cap (1h): evicted when the next entry was written
    const pad = { pad: "x".repeat(700) };
    const first = await put("big-1", pad, 600, 50);
    const second = await put("big-2", pad, 600, 40);
    assert.deepEqual([exists(expired), exists(aged), exists(first), exists(second)], [false, false, true, true]); // oldest first
    assert.ok((await spool.totalBytes()) <= 2000);
    await assert.rejects(put("huge", { pad: "x".repeat(5000) }, 60, 0), (e) => e instanceof SignalbusError && e.code === "spool_full");
    await put("gone", { n: "gone" }, 30, 60);
    assert.equal(exists(first), false); // writing "gone" needed room: the oldest (big-1) was evicted
    const seen = [];
    const alice = client(bus, aliceTok, { spool, onReplay: (e, r) => void seen.push([e.request.dedupe_key, r]) });
    const report = await alice.replaySpool();
    await alice.close();
    assert.deepEqual(report.expired, ["gone"]);
    assert.ok(Object.fromEntries(seen).gone instanceof SpoolExpired);
    assert.deepEqual(report.replayed.map((r) => r.dedupeKey), ["big-2"]);
    const rows = await client(bus, bobTok).drain();
    assert.equal(rows.length, 1);
    const ttl = seconds(rows[0].createdAt, rows[0].expiresAt);
    assert.ok(ttl >= 550 && ttl <= 560, `ttl ${ttl}`); // 600 s less the ~40 s it spent spooled
  }));

test("S15 inbox, drain, get, list", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice")); // HTTP only
    const bob = client(bus, await tokenFor(admin, "bob"));
    const low = await alice.send("bob", "StatusUpdate", { n: "low" });
    const high = await alice.send("bob", "Blocker", { n: "high" }, { deliveryClass: "async" });
    assert.deepEqual((await bob.inbox()).map((s) => s.id), [high.signalId, low.signalId]); // priority first
    assert.deepEqual((await bob.inbox()).map((s) => s.id), [high.signalId, low.signalId]); // inbox delivers nothing
    const page = await alice.list({ role: "sent", status: "pending", limit: 1 });
    assert.deepEqual(page.signals.map((r) => r.id), [high.signalId]);
    assert.ok(page.nextCursor);
    const page2 = await alice.list({ role: "sent", status: "pending", limit: 1, cursor: page.nextCursor });
    assert.deepEqual(page2.signals.map((r) => r.id), [low.signalId]);
    const drained = await bob.drain();
    assert.deepEqual(drained.map((s) => s.id), [high.signalId, low.signalId]);
    assert.deepEqual(await bob.drain(), []);
    const row = await bob.get(high.signalId);
    assert.deepEqual([row.deliveredVia, row.status], ["inbox", "delivered"]);
    assert.equal(await bob.ack(drained), 2);
    const received = await bob.list({ role: "received", status: "delivered" });
    assert.deepEqual(new Set(received.signals.map((r) => r.id)), new Set([high.signalId, low.signalId]));
    await assert.rejects(bob.get(crypto.randomUUID()), NotFound);
  }));

test("S16 plugin facts", () =>
  withBus(async (bus, admin) => {
    const bobTok = await tokenFor(admin, "bob");
    await tokenFor(admin, "alice");
    const bob = client(bus, bobTok);
    try {
      await bob.connect();
      assert.equal(await bob.recordFact("bob/watcher", "seen", { head: "a1" }), 1); // over the session
    } finally {
      await bob.close();
    }
    const httpBob = client(bus, bobTok);
    assert.equal(await httpBob.recordFact("bob/watcher", "seen", { head: "b2", token: "x" }), 2); // over HTTP
    const st = await httpBob.state("bob/watcher");
    assert.deepEqual([st.plugin, st.state, st.seq], ["bob/watcher", { head: "b2", token: "[REDACTED]" }, 2]);
    const page = await httpBob.facts("bob/watcher", { limit: 1 });
    assert.deepEqual([page.facts.map((f) => f.seq), page.nextBeforeSeq, page.facts[0].recordedBy], [[2], 2, "bob"]);
    const older = await httpBob.facts("bob/watcher", { factType: "seen", beforeSeq: page.nextBeforeSeq });
    assert.deepEqual([older.facts.map((f) => f.seq), older.nextBeforeSeq], [[1], null]);
    await assert.rejects(httpBob.recordFact("alice", "seen", {}), (e) => e.code === "forbidden");
  }));

test("S17 admin register, rotate, remove", () =>
  withBus(async (bus, admin) => {
    const reg = await admin.register("erin", { kind: "daemon" });
    assert.deepEqual([reg.identity, reg.tenant], ["erin", "default"]);
    assert.match(reg.token, /^sb_/);
    await assert.rejects(admin.register("erin"), AlreadyRegistered);
    const erin = client(bus, reg.token, { reconnectMaxMs: 500 });
    await erin.connect();
    const rotated = await admin.rotate("erin");
    assert.notEqual(rotated.token, reg.token);
    await erin.waitDisconnected(5000); // the bus closed the session (1008): the client does not reconnect
    await assert.rejects(erin.waitConnected(5000), Unauthorized);
    await erin.close();
    await assert.rejects(client(bus, reg.token).agents(), Unauthorized);
    assert.deepEqual((await admin.agents()).map((a) => a.identity), ["erin"]);
    const frank = client(bus, await tokenFor(admin, "frank"));
    const pending = await frank.send("erin", "StatusUpdate", { s: 1 }); // erin is offline: queued
    assert.ok(!pending.spooled && pending.queued);
    const removal = await admin.remove("erin"); // what the bus answers
    assert.deepEqual([removal.identity, removal.tenant, removal.signalsExpired], ["erin", "default", 1]);
    assert.ok(Math.abs(Date.now() - Date.parse(removal.removedAt)) < 60000, removal.removedAt);
    await assert.rejects(client(bus, rotated.token).agents(), Unauthorized);
  }));

test("S20 usage errors are the language's own", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const handled = client(bus, aliceTok, { onSignal: () => {} });
    const alice = client(bus, aliceTok);
    const never = client(bus, aliceTok);
    try {
      await handled.connect();
      await assert.rejects(handled.receive(1000), (e) => e instanceof UsageError && e instanceof Error && !(e instanceof SignalbusError) && /onSignal/.test(e.message));
      await alice.connect();
      await assert.rejects(alice.ask("alice", "Question", {}, 0), (e) => e instanceof UsageError && !(e instanceof SignalbusError));
      await assert.rejects(alice.ack(42), TypeError);
      assert.throws(() => client(bus, aliceTok, { replayRate: 0 }), (e) => e instanceof RangeError && !(e instanceof SignalbusError));
      // the never-connected ask stays a transport error (S19), not a usage error
      await assert.rejects(never.ask("alice", "Question", {}, 1000), TransportError);
    } finally {
      await handled.close();
      await alice.close();
      await never.close();
    }
  }));

test("S21 hints fit the operation", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    await tokenFor(admin, "bob");
    const alice = client(bus, aliceTok);
    try {
      await alice.connect();
      await assert.rejects(alice.receive(200), (e) => e.name === "TimeoutError" && e instanceof SignalbusError && !/dedupe_key/.test(e.message) && /receive\(\)/.test(e.hint));
    } finally {
      await alice.close();
    }
    const dead = client(bus, aliceTok, { identity: "alice" });
    await bus.stop("SIGKILL");
    try {
      await assert.rejects(dead.connect(500), (e) => e.name === "TimeoutError" && !/dedupe_key/.test(e.message));
      await assert.rejects(dead.recall("00000000-0000-4000-8000-000000000000"), (e) => e instanceof TransportError && !/dedupe_key/.test(e.message));
      await assert.rejects(
        dead.send("bob", "StatusUpdate", { n: 1 }, { spool: false, dedupeKey: "k-21" }),
        (e) => e instanceof TransportError && e.dedupeKey === "k-21" && /nothing was sent/.test(e.hint),
      );
    } finally {
      await dead.close();
    }
    await bus.start();
    // a send whose outcome is unknown says to retry with its dedupe_key; other calls do not
    assert.match(forSend(new TransportError("dropped")).hint, /same dedupe_key/);
    assert.match(forSend(new RequestTimeout("slow")).hint, /same dedupe_key/);
    assert.doesNotMatch(new TransportError("dropped").hint + new RequestTimeout("slow").hint, /dedupe_key/);
  }));

test("S22 status is the same over either transport", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    await tokenFor(admin, "bob"); // never connected: offline
    const overWs = client(bus, aliceTok);
    const http = client(bus, aliceTok);
    try {
      await overWs.connect();
      for (const c of [overWs, http]) {
        await assert.rejects(c.send("bob", "Blocker", { b: 1 }), (e) => e instanceof RecipientUnavailable && e.status === 409);
        await assert.rejects(c.send("nobody", "StatusUpdate", {}), (e) => e instanceof UnknownRecipient && e.status === 404);
        await assert.rejects(c.send("bob", "StatusUpdate", {}, { ttlSeconds: 0 }), (e) => e instanceof InvalidRequest && e.status === 400);
        await assert.rejects(c.recordFact("bob", "seen", {}), (e) => e.code === "forbidden" && e.status === 403);
      }
    } finally {
      await overWs.close();
      await http.close();
    }
  }));

test("S23 max concurrent handlers", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    let release;
    const released = new Promise((r) => (release = r));
    let running = 0;
    let peak = 0;
    const started = [];
    const done = [];
    const handler = async (sig) => {
      running += 1;
      peak = Math.max(peak, running);
      started.push(sig.payload.n);
      try {
        if (sig.payload.n === 0) await released; // the slow one
        else await sleep(200);
      } finally {
        running -= 1;
      }
      done.push(sig.payload.n);
    };
    const alice = client(bus, aliceTok);
    const bob = client(bus, bobTok, { onSignal: handler, maxConcurrentHandlers: 2 });
    try {
      await alice.connect();
      await bob.connect();
      const sent = [];
      for (let n = 0; n < 5; n++) sent.push(await alice.send("bob", "StatusUpdate", { n }));
      // the slow handler of n=0 does not hold back the others: they run beside it, one at a time
      await eventually(() => [...done].sort().join() === "1,2,3,4", 10000, "the others handled");
      assert.ok(!done.includes(0));
      assert.equal(peak, 2);
      assert.deepEqual(started, [0, 1, 2, 3, 4]); // started in arrival order
      for (const res of sent.slice(1)) await eventually(() => acked(alice, res.signalId), 10000, "acked");
      assert.equal((await alice.get(sent[0].signalId)).ackedAt, null);
      release();
      await eventually(() => acked(alice, sent[0].signalId), 10000, "the slow one acked");
    } finally {
      await bob.close();
      await alice.close();
    }
    assert.equal(peak, 2);
    // the default is one at a time, in arrival order
    const order = [];
    running = 0;
    peak = 0;
    const alice2 = client(bus, aliceTok);
    const bob2 = client(bus, bobTok, {
      onSignal: async (sig) => {
        running += 1;
        peak = Math.max(peak, running);
        await sleep(50);
        order.push(sig.payload.n);
        running -= 1;
      },
    });
    try {
      await alice2.connect();
      await bob2.connect();
      for (let n = 0; n < 4; n++) await alice2.send("bob", "StatusUpdate", { n });
      await eventually(() => order.length === 4, 10000, "four handled");
    } finally {
      await bob2.close();
      await alice2.close();
    }
    assert.deepEqual([order, peak], [[0, 1, 2, 3], 1]);
    assert.throws(() => client(bus, bobTok, { onSignal: handler, maxConcurrentHandlers: 0 }), RangeError);
  }));

test("S24 logging is quiet", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    await tokenFor(admin, "bob");
    const lines = { debug: [], info: [], warn: [], error: [] };
    const logger = Object.fromEntries(Object.keys(lines).map((level) => [level, (m) => lines[level].push(m)]));
    const spoolDir = mkdtempSync(path.join(tmpdir(), "sbc-spool-"));
    const alice = new Client(bus.url, aliceTok, { logger, spoolDir, reconnectInitialMs: 100, reconnectMaxMs: 300 });
    try {
      await alice.connect();
      await assert.rejects(alice.send("nobody", "StatusUpdate", {}), UnknownRecipient); // raised to the caller: not also logged
      assert.deepEqual([lines.info, lines.warn, lines.error], [[], [], []]);
      await bus.stop("SIGKILL");
      await alice.waitDisconnected(5000);
      const spooled = await alice.send("bob", "TaskAssigned", { n: 1 }); // spooled: at debug only
      assert.equal(spooled.spooled, true);
      await sleep(1000); // several failed attempts
      await bus.start();
      await alice.waitConnected(20000);
      const spool = await alice.spool();
      await eventually(async () => (await spool.entries()).length === 0, 10000, "spool replayed");
      assert.equal(lines.warn.length, 1, lines.warn.join("\n"));
      assert.match(lines.warn[0], /lost the session/);
      assert.equal(lines.info.length, 1, lines.info.join("\n"));
      assert.match(lines.info[0], /reconnected/);
      assert.deepEqual(lines.error, []);
      assert.ok(lines.debug.filter((m) => /reconnecting to/.test(m)).length >= 2); // debug per retry
      assert.ok(lines.debug.some((m) => /spooled as/.test(m)));
    } finally {
      await alice.close();
    }
    for (const level of Object.keys(lines)) lines[level] = [];
    const bad = new Client(bus.url, "sb_not_a_token", { logger });
    try {
      await assert.rejects(bad.connect(5000), Unauthorized);
    } finally {
      await bad.close();
    }
    assert.deepEqual([lines.info, lines.warn, lines.error], [[], [], []]); // raised to the caller: not also logged
  }));

test("S25 connection events in order", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const events = [];
    const alice = client(bus, aliceTok, { reconnectInitialMs: 100, reconnectMaxMs: 500 });
    for (const e of ["connected", "disconnected", "closed"]) alice.on(e, () => events.push(e));
    alice.on("reconnected", async () => {
      events.push("reconnected"); // an async listener works too
    });
    try {
      await alice.connect();
      assert.deepEqual(events, ["connected"]);
      await bus.stop("SIGKILL");
      await eventually(() => events.join() === "connected,disconnected", 10000, "disconnected");
      await bus.start(); // same port, same data dir
      await eventually(() => events.join() === "connected,disconnected,reconnected", 20000, "reconnected");
    } finally {
      await alice.close();
    }
    await alice.close(); // closed is told once
    assert.deepEqual(events, ["connected", "disconnected", "reconnected", "closed"]);
    // the bus refusing the token (rotate: 1008) is the end: disconnected, then closed
    const erin = client(bus, await tokenFor(admin, "erin"));
    const told = [];
    erin.on("disconnected", () => told.push("disconnected")).on("closed", () => told.push("closed"));
    try {
      await erin.connect();
      await admin.rotate("erin");
      await eventually(() => told.join() === "disconnected,closed", 10000, "closed after 1008");
    } finally {
      await erin.close();
    }
    assert.deepEqual(told, ["disconnected", "closed"]);
  }));

test("S26 async iterator over signals", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    const alice = client(bus, aliceTok);
    const bob = client(bus, bobTok);
    try {
      await alice.connect();
      await bob.connect();
      const got = [];
      const consumer = (async () => {
        for await (const sig of bob.signals()) {
          got.push(sig);
          await bob.ack(sig);
        }
      })();
      const sent = [];
      for (let n = 0; n < 3; n++) sent.push(await alice.send("bob", "StatusUpdate", { n }));
      await eventually(() => got.length === 3, 10000, "three signals");
      assert.deepEqual(got.map((s) => s.id), sent.map((r) => r.signalId));
      await eventually(() => acked(alice, got[2].id), 10000, "acked");
      await bob.close(); // ends the iteration
      await consumer;
    } finally {
      await bob.close();
      await alice.close();
    }
    const handled = client(bus, bobTok, { onSignal: () => {} });
    try {
      await assert.rejects(async () => {
        for await (const _ of handled.signals()) void _;
      }, UsageError);
    } finally {
      await handled.close();
    }
  }));
