// clients/SCENARIOS.md S32–S35 (time and waiting, CONTRACT §16: scheduled delivery, long-poll
// inbox, conversations, force-expire), each against a real `signalbus serve` (see harness.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";

import { AdminClient, Client, InvalidRequest, SignalbusError, UsageError } from "../dist/index.js";
import { binary, quiet, sleep, tokenFor, withBus } from "./harness.mjs";

binary(); // fail loudly, before any test, when the binary is missing

// Nothing listens there: a call that reached the network would reject with TransportError, so a
// UsageError from a client pointed at it shows the mistake was caught before anything was sent.
const NOWHERE = "http://127.0.0.1:1";
const client = (url, token, o = {}) => new Client(url, token, { ...quiet, ...o });
/** Rejects with a RequestTimeout: nothing (more) came. */
const nothingMore = (c, ms = 500) => assert.rejects(c.receive(ms), (e) => e.name === "TimeoutError");
/** `call()` rejects with the language's own error, not the bus's (S20). */
const usageError = (call) => assert.rejects(call, (e) => e instanceof UsageError && !(e instanceof SignalbusError));
const ms = (a, b) => Date.parse(b) - Date.parse(a);

test("S32 scheduled delivery", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const alice = client(bus.url, aliceTok);
    const bob = client(bus.url, await tokenFor(admin, "bob"));
    try {
      await bob.connect();
      await alice.connect();
      const before = Date.now();
      const out = await alice.send("bob", "StatusUpdate", { n: "later" }, { deliverAfterMs: 2000 });
      assert.deepEqual([out.spooled, out.queued, out.delivered, out.publishPath], [false, true, false, "scheduled"]);
      assert.ok(out.deliverAt, "a scheduled send's answer has deliverAt");
      assert.ok(Math.abs(Date.parse(out.deliverAt) - (before + 2000)) < 1000, `deliverAt ${out.deliverAt}`);
      assert.ok(Math.abs(ms(out.deliverAt, out.expiresAt) - 24 * 3600 * 1000) < 1000); // the TTL counts from deliverAt
      const row = await alice.get(out.signalId);
      assert.deepEqual([Date.parse(row.deliverAt), row.status], [Date.parse(out.deliverAt), "pending"]);

      assert.deepEqual(await bob.inbox(), []); // invisible to its recipient until deliverAt
      await nothingMore(bob, 1000);
      const sig = await bob.receive(8000);
      const arrived = Date.now();
      assert.deepEqual([sig.id, sig.from, sig.payload], [out.signalId, "alice", { n: "later" }]);
      assert.ok(arrived >= Date.parse(out.deliverAt) - 200, "received before its deliverAt");
      await bob.ack(sig);
      const delivered = await bob.get(out.signalId);
      assert.deepEqual([delivered.status, delivered.deliveredVia], ["delivered", "ws_push"]);

      const later = await alice.send("bob", "StatusUpdate", { n: "never" }, { deliverAt: new Date(Date.now() + 30000) });
      assert.equal(later.publishPath, "scheduled");
      assert.deepEqual(await alice.recall(later.signalId), { outcome: "recalled" });
      assert.equal((await alice.get(later.signalId)).status, "recalled");

      const past = new Date(Date.now() - 60000).toISOString(); // the bus's clock decides
      await assert.rejects(alice.send("bob", "StatusUpdate", {}, { deliverAt: past }), (e) => e instanceof InvalidRequest && e.status === 400);
      await nothingMore(bob, 500); // neither the recalled one nor the refused one
    } finally {
      await alice.close();
      await bob.close();
    }

    const nowhere = client(NOWHERE, aliceTok);
    const soon = new Date(Date.now() + 300000);
    await usageError(() => nowhere.send("bob", "StatusUpdate", {}, { deliverAfterMs: 5000, deliverAt: soon }));
    await usageError(() => nowhere.send("bob", "Blocker", {}, { deliverAfterMs: 5000 })); // sync by default
    await usageError(() => nowhere.send("bob", "StatusUpdate", {}, { deliveryClass: "sync", deliverAt: soon }));
    await usageError(() => nowhere.send("bob", "StatusUpdate", {}, { deliverAfterMs: 0 }));
    await usageError(() => nowhere.send("bob", "StatusUpdate", {}, { deliverAt: "not a time" }));
    await usageError(() => nowhere.send("@team", "StatusUpdate", {}, { deliveryClass: "sync", deliverAfterMs: 5000 }));
  }));

test("S33 waiting without polling", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus.url, await tokenFor(admin, "alice")); // HTTP only: never connected
    const bobTok = await tokenFor(admin, "bob");
    const bob = client(bus.url, bobTok);
    const sendLater = async (n) => {
      await sleep(1000);
      return alice.send("bob", "StatusUpdate", { n });
    };

    let started = Date.now();
    const [got, first] = await Promise.all([bob.inbox({ waitMs: 10000 }), sendLater(1)]);
    let took = Date.now() - started;
    assert.deepEqual(got.map((s) => s.id), [first.signalId]);
    assert.ok(took >= 900 && took < 5000, `inbox({waitMs: 10000}) answered after ${took} ms`);
    assert.equal((await bob.get(first.signalId)).status, "pending"); // inbox delivers nothing
    assert.deepEqual((await bob.drain()).map((s) => s.id), [first.signalId]);

    started = Date.now();
    assert.deepEqual(await bob.inbox({ waitMs: 1000 }), []);
    took = Date.now() - started;
    assert.ok(took >= 900 && took < 5000, `inbox({waitMs: 1000}) with nothing pending answered after ${took} ms`);

    const [drained, second] = await Promise.all([bob.drain({ waitMs: 10000 }), sendLater(2)]);
    assert.deepEqual(drained.map((s) => s.id), [second.signalId]);
    const row = await bob.get(second.signalId);
    assert.deepEqual([row.status, row.deliveredVia], ["delivered", "inbox"]);
    assert.deepEqual(await bob.inbox(), []);

    const nowhere = client(NOWHERE, bobTok);
    await usageError(() => nowhere.inbox({ waitMs: 61000 }));
    await usageError(() => nowhere.drain({ waitMs: 61000 }));
    await usageError(() => nowhere.inbox({ waitMs: -1 }));
  }));

test("S34 conversations", () =>
  withBus(async (bus, admin) => {
    const [alice, bob, carol] = await Promise.all(["alice", "bob", "carol"].map(async (n) => client(bus.url, await tokenFor(admin, n))));
    const thread = [
      await alice.send("bob", "Question", { q: "ready?" }, { deliveryClass: "async", correlationId: "t-1" }),
      await bob.send("alice", "Answer", { a: "yes" }, { correlationId: "t-1" }),
      await alice.send("bob", "TaskAssigned", { task: "ship" }, { correlationId: "t-1" }),
    ];
    const other = await alice.send("bob", "StatusUpdate", { n: 1 }, { correlationId: "t-2" });
    const ids = thread.map((s) => s.signalId);

    for (const who of [alice, bob]) {
      const page = await who.conversation("t-1");
      assert.deepEqual(page.signals.map((r) => r.id), ids); // oldest first, sent and received
      assert.ok(page.signals.every((r) => r.correlationId === "t-1"));
      assert.equal(page.nextCursor, null);
    }
    assert.deepEqual((await bob.conversation("t-1")).signals.map((r) => r.fromIdentity), ["alice", "bob", "alice"]);

    const first = await alice.conversation("t-1", { limit: 2 });
    assert.deepEqual(first.signals.map((r) => r.id), ids.slice(0, 2));
    assert.ok(first.nextCursor);
    const rest = await alice.conversation("t-1", { limit: 2, cursor: first.nextCursor });
    assert.deepEqual(rest.signals.map((r) => r.id), ids.slice(2));

    assert.deepEqual((await alice.conversation("t-2")).signals.map((r) => r.id), [other.signalId]);
    assert.deepEqual((await carol.conversation("t-1")).signals, []); // never anyone else's
    await usageError(() => alice.conversation(""));
  }));

test("S35 force-expire", () =>
  withBus(async (bus, admin) => {
    const [alice, dave, erin] = await Promise.all(["alice", "dave", "erin"].map(async (n) => client(bus.url, await tokenFor(admin, n))));
    const toDave = [await alice.send("dave", "StatusUpdate", { n: 1 }), await alice.send("dave", "StatusUpdate", { n: 2 })];
    const toErin = await alice.send("erin", "StatusUpdate", { n: 3 });
    const daveIds = toDave.map((s) => s.signalId).sort();
    assert.ok([...toDave, toErin].every((s) => s.publishPath === "queued_offline"));

    const preview = await admin.expireSignals({ tenant: "default", to: "dave", dryRun: true });
    assert.deepEqual([preview.dryRun, preview.count], [true, 2]);
    assert.deepEqual(preview.wouldExpire.map((c) => c.signalId).sort(), daveIds);
    assert.ok(preview.wouldExpire.every((c) => c.to === "dave" && c.from === "alice" && c.type === "StatusUpdate" && c.createdAt));
    assert.deepEqual((await dave.inbox()).map((s) => s.id).sort(), daveIds); // a dry run expires nothing

    const done = await admin.expireSignals({ tenant: "default", to: "dave" });
    assert.deepEqual([done.dryRun, done.expired, done.skipped], [false, 2, 0]);
    for (const id of daveIds) {
      const row = await alice.get(id);
      assert.deepEqual([row.status, row.expiredReason], ["expired", "forced"]);
      assert.ok(row.expiredAt);
    }
    assert.deepEqual(await dave.inbox(), []);
    assert.equal((await admin.expireSignals({ tenant: "default", to: "dave" })).expired, 0);

    const kept = await erin.get(toErin.signalId);
    assert.deepEqual([kept.status, kept.expiredReason], ["pending", null]);
    assert.deepEqual((await erin.inbox()).map((s) => s.id), [toErin.signalId]);

    const nowhere = new AdminClient(NOWHERE, bus.adminToken);
    await usageError(() => nowhere.expireSignals({ tenant: "default" }));
    await usageError(() => nowhere.expireSignals({ tenant: "default", olderThanMs: -1 }));
    await usageError(() => nowhere.expireSignals({ tenant: "default", olderThanMs: 0 }));
  }));
