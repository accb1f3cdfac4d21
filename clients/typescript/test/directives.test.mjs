// clients/SCENARIOS.md S28–S31 (directives, groups and fan-out), each against a real
// `signalbus serve` (see harness.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  AlreadyClaimed,
  Client,
  ClientClosed,
  DirectiveCanceled,
  DirectiveEnded,
  DirectiveExpired,
  DirectiveFailed,
  DirectiveRejected,
  DirectiveTimeout,
  Forbidden,
  IdempotencyConflict,
  InvalidTransition,
  NotFound,
  TransportError,
  UnknownGroup,
  UnknownRecipient,
  UsageError,
  isFanout,
} from "../dist/index.js";
import { binary, eventually, quiet, sleep, tokenFor, withBus } from "./harness.mjs";

binary(); // fail loudly, before any test, when the binary is missing

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const client = (bus, token, o = {}) => new Client(bus.url, token, { ...quiet, ...o });

/** The next signal `c` receives, acked. */
const next = async (c, timeoutMs = 10000) => {
  const sig = await c.receive(timeoutMs);
  await c.ack(sig);
  return sig;
};
/** Rejects with a RequestTimeout: nothing more came. */
const nothingMore = (c, ms = 500) => assert.rejects(c.receive(ms), (e) => e.name === "TimeoutError");
const requestsIn = async (c, id) => (await c.inbox()).filter((s) => s.type === "DirectiveRequested" && s.correlationId === id);

test("S28 a directive to an agent", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    const bob = client(bus, await tokenFor(admin, "bob"));
    const carol = client(bus, await tokenFor(admin, "carol")); // over HTTP, no party to it
    try {
      await alice.connect();
      await bob.connect();
      const d = await alice.createDirective("bob", "package.install", { name: "jq" }, { idempotencyKey: "install-jq" });
      assert.match(d.directiveId, UUID);
      assert.deepEqual(
        [d.created, d.terminal, d.status, d.type, d.issuer, d.assignee, d.claimedBy, d.params, d.idempotencyKey, d.result, d.failure, d.declinedBy],
        [true, false, "requested", "package.install", "alice", "bob", null, { name: "jq" }, "install-jq", null, null, []],
      );
      assert.ok(Date.parse(d.deadline) > Date.parse(d.createdAt));
      // the same key: the same directive, nothing created; with other params: a conflict naming it
      const again = await alice.createDirective("bob", "package.install", { name: "jq" }, { idempotencyKey: "install-jq" });
      assert.deepEqual([again.directiveId, again.created, again.status], [d.directiveId, false, "requested"]);
      await assert.rejects(
        alice.createDirective("bob", "package.install", { name: "curl" }, { idempotencyKey: "install-jq" }),
        (e) => e instanceof IdempotencyConflict && e.directiveId === d.directiveId && e.status === 409,
      );
      // a key is generated when none is given; a secret in params is redacted
      const other = await alice.createDirective("bob", "db.migrate", { db: { password: "hunter2" } });
      assert.match(other.idempotencyKey, /^sbd-/);
      assert.deepEqual([other.redacted, other.params], [["params.db.password"], { db: { password: "[REDACTED]" } }]);
      await assert.rejects(alice.createDirective("nobody", "package.install", {}), (e) => e instanceof UnknownRecipient && e.status === 404);
      await assert.rejects(alice.createDirective("@nope", "package.install", {}), (e) => e instanceof UnknownGroup && e.status === 404);

      // bob is told, as a signal whose payload is the directive
      const req = await next(bob);
      assert.deepEqual([req.type, req.from, req.correlationId], ["DirectiveRequested", "alice", d.directiveId]);
      assert.deepEqual([req.payload.directive_id, req.payload.status, req.payload.params], [d.directiveId, "requested", { name: "jq" }]);
      assert.equal((await next(bob)).correlationId, other.directiveId);

      const started = await bob.startDirective(d.directiveId);
      assert.deepEqual([started.status, started.claimedBy], ["started", "bob"]);
      assert.ok(started.startedAt);
      const progressed = await bob.progressDirective(d.directiveId, { message: "downloading", percent: 40 });
      assert.deepEqual([progressed.progress.message, progressed.progress.percent, progressed.status], ["downloading", 40, "started"]);
      const done = await bob.completeDirective(d.directiveId, { ok: true });
      assert.deepEqual([done.status, done.terminal, done.result], ["completed", true, { ok: true }]);
      assert.ok(done.finishedAt);

      // alice is told: started, then completed with the result
      const s1 = await next(alice);
      assert.deepEqual([s1.type, s1.from, s1.correlationId, s1.payload.status], ["DirectiveStarted", "bob", d.directiveId, "started"]);
      const s2 = await next(alice);
      assert.deepEqual([s2.type, s2.from, s2.correlationId, s2.payload.result], ["DirectiveCompleted", "bob", d.directiveId, { ok: true }]);

      const got = await alice.getDirective(d.directiveId);
      assert.deepEqual([got.status, got.result, got.progress.message, got.progress.percent], ["completed", { ok: true }, "downloading", 40]);
      const t0 = Date.now();
      assert.equal((await alice.getDirective(d.directiveId, { waitMs: 5000 })).status, "completed");
      assert.ok(Date.now() - t0 < 2000, "an ended directive is answered at once");
      const issued = await alice.listDirectives({ role: "issued" });
      assert.deepEqual(issued.directives.map((x) => x.directiveId), [other.directiveId, d.directiveId]); // newest first
      const page = await alice.listDirectives({ role: "issued", limit: 1 });
      assert.deepEqual(page.directives.map((x) => x.directiveId), [other.directiveId]);
      assert.ok(page.nextBefore);
      const rest = await alice.listDirectives({ role: "issued", limit: 1, before: page.nextBefore });
      assert.deepEqual(rest.directives.map((x) => x.directiveId), [d.directiveId]);
      assert.deepEqual((await bob.listDirectives({ role: "assigned", status: "completed" })).directives.map((x) => x.directiveId), [d.directiveId]);
      assert.deepEqual((await bob.listDirectives({ role: "assigned", status: "open" })).directives.map((x) => x.directiveId), [other.directiveId]);

      // each party acts only in its column; the state decides the rest
      await assert.rejects(bob.cancelDirective(d.directiveId), (e) => e instanceof Forbidden && e.status === 403);
      await assert.rejects(alice.completeDirective(d.directiveId, { ok: false }), Forbidden);
      await assert.rejects(
        bob.completeDirective(d.directiveId, { ok: true }),
        (e) => e instanceof InvalidTransition && e.status === 409 && e.directive.status === "completed" && e.directive.directiveId === d.directiveId,
      );
      await assert.rejects(carol.getDirective(d.directiveId), (e) => e instanceof NotFound && e.status === 404);
      await assert.rejects(carol.startDirective(d.directiveId), NotFound);
      await assert.rejects(alice.getDirective(d.directiveId, { waitMs: 61000 }), UsageError);
    } finally {
      await bob.close();
      await alice.close();
    }
  }));

test("S29 runDirective and onDirective", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const bobTok = await tokenFor(admin, "bob");
    await tokenFor(admin, "dave"); // never runs a worker
    const erinTok = await tokenFor(admin, "erin");
    const alice = client(bus, aliceTok);
    class PackageMissing extends Error {}
    const seen = [];
    const bob = client(bus, bobTok);
    bob.onDirective("package.*", async (d, progress) => {
      seen.push(await progress({ message: "fetching", percent: 50 }));
      if (d.params.name === "nope") throw new PackageMissing(`no such package: ${d.params.name}`);
      if (d.params.name === "bad") throw new RangeError("version out of range");
      if (d.params.slow) await sleep(d.params.slow);
      if (d.type === "package.version") return "1.7.1"; // not an object: {value: …}
      if (d.type === "package.touch") return undefined; // nothing: {}
      return { installed: d.params.name };
    });
    assert.throws(() => bob.onDirective("package.*", () => ({})), UsageError); // the same pattern twice
    assert.throws(() => bob.onDirective("pack*age", () => ({})), UsageError); // a * not at the end
    try {
      // without a session there is nobody to be told: nothing is created
      await assert.rejects(client(bus, aliceTok).runDirective("bob", "package.install", {}, { timeoutMs: 5000 }), (e) => e instanceof TransportError && e.hint.includes("nothing was sent"));
      await bob.connect();
      await alice.connect();
      assert.equal((await alice.listDirectives({ role: "issued" })).directives.length, 0);
      await assert.rejects(alice.runDirective("bob", "package.install", {}, { timeoutMs: 0 }), UsageError);

      // the handler's result, with its progress recorded
      assert.deepEqual(await alice.runDirective("bob", "package.install", { name: "jq" }, { timeoutMs: 15000 }), { installed: "jq" });
      assert.deepEqual([seen[0].status, seen[0].claimedBy, seen[0].progress.message, seen[0].progress.percent], ["started", "bob", "fetching", 50]);
      const [listed] = (await alice.listDirectives({ role: "issued" })).directives;
      assert.deepEqual([listed.status, listed.claimedBy, listed.progress.percent, listed.result], ["completed", "bob", 50, { installed: "jq" }]);
      assert.deepEqual(await alice.runDirective("bob", "package.version", { name: "jq" }, { timeoutMs: 15000 }), { value: "1.7.1" });
      assert.deepEqual(await alice.runDirective("bob", "package.touch", {}), {}); // no timeout: bounded by the deadline

      // the lifecycle signals were taken (and acked): neither receive() sees anything
      await nothingMore(alice);
      await nothingMore(bob);
      for (const c of [alice, bob]) {
        await eventually(async () => (await c.list({ role: "received" })).signals.every((s) => s.ackedAt), 10000, "the lifecycle signals acked");
      }

      // a handler that throws fails it: the code is the error's class name
      const failed = await alice.runDirective("bob", "package.install", { name: "nope" }, { timeoutMs: 15000 }).then(
        () => assert.fail("not failed"),
        (e) => e,
      );
      assert.ok(failed instanceof DirectiveFailed && failed instanceof DirectiveEnded);
      assert.deepEqual([failed.directive.failure, failed.directive.status], [{ code: "PackageMissing", message: "no such package: nope" }, "failed"]);
      await assert.rejects(
        alice.runDirective("bob", "package.install", { name: "bad" }, { timeoutMs: 15000 }),
        (e) => e instanceof DirectiveFailed && e.failure.code === "RangeError" && e.failure.message === "version out of range",
      );

      // a type nobody serves, declined by hand (it reaches bob's receive())
      const rejected = alice.runDirective("bob", "review.code", { pr: 7 }, { timeoutMs: 15000 }).then(
        () => assert.fail("not rejected"),
        (e) => e,
      );
      const req = await next(bob);
      assert.deepEqual([req.type, req.payload.type], ["DirectiveRequested", "review.code"]);
      await bob.rejectDirective(req.payload.directive_id, "not today");
      const r = await rejected;
      assert.ok(r instanceof DirectiveRejected && r instanceof DirectiveEnded);
      assert.deepEqual([r.directive.status, r.reason], ["rejected", "not today"]);

      // nobody works on dave's: it expires at its deadline (the sweeper may take a second or two more)
      const t0 = Date.now();
      await assert.rejects(
        alice.runDirective("dave", "package.install", { name: "jq" }, { timeoutMs: 20000, deadlineSeconds: 2 }),
        (e) => e instanceof DirectiveExpired && e instanceof DirectiveEnded && e.directive.status === "expired",
      );
      assert.ok(Date.now() - t0 >= 1500, "expired before its deadline");

      // canceled by alice from another task: the issuer is sent no signal; the client tells its run
      const canceled = alice.runDirective("dave", "package.install", { name: "curl" }, { timeoutMs: 20000 }).then(
        () => assert.fail("not canceled"),
        (e) => e,
      );
      const open = await eventually(async () => (await alice.listDirectives({ role: "issued", status: "open" })).directives[0], 10000, "the open directive");
      await alice.cancelDirective(open.directiveId, "changed my mind");
      const c = await canceled;
      assert.ok(c instanceof DirectiveCanceled && c instanceof DirectiveEnded);
      assert.deepEqual([c.directive.directiveId, c.directive.status, c.directive.reason], [open.directiveId, "canceled", "changed my mind"]);

      // a timeout shorter than the work: DirectiveTimeout, the directive left as it is (it completes later)
      const late = await alice.runDirective("bob", "package.install", { name: "big", slow: 1500 }, { timeoutMs: 300 }).then(
        () => assert.fail("not timed out"),
        (e) => e,
      );
      assert.ok(late instanceof DirectiveTimeout);
      assert.equal(late.name, "TimeoutError");
      assert.ok(!late.directive.terminal, late.directive.status);
      assert.ok(!late.hint.includes("dedupe_key"));
      const finished = await alice.getDirective(late.directiveId, { waitMs: 10000 });
      assert.deepEqual([finished.status, finished.result], ["completed", { installed: "big" }]);
      // what came after the run gave up is the caller's again: its DirectiveCompleted reaches receive()
      let after;
      do {
        after = await next(alice);
        assert.equal(after.correlationId, late.directiveId);
      } while (after.type !== "DirectiveCompleted");

      // a redelivered request whose directive ended is skipped (and acked): the handler never runs
      const first = client(bus, erinTok);
      await first.connect();
      const ended = await alice.createDirective("erin", "package.install", { name: "gone" });
      const handedOut = await first.receive(10000);
      assert.equal(handedOut.correlationId, ended.directiveId);
      await first.close(); // not acked: it comes back on erin's next session
      await alice.cancelDirective(ended.directiveId);
      const erinCalls = [];
      const erin = client(bus, erinTok);
      erin.onDirective("package.*", (d) => void erinCalls.push(d));
      try {
        await erin.connect();
        await eventually(async () => (await erin.get(handedOut.id)).ackedAt, 10000, "the redelivered request acked");
        await sleep(200);
        assert.deepEqual(erinCalls, []);
        await nothingMore(erin); // its DirectiveCanceled went to the worker, too
      } finally {
        await erin.close();
      }

      // close() ends a waiting run with ClientClosed; the directive is left as it is
      const waiting = alice.runDirective("dave", "package.install", { name: "left" }, { timeoutMs: 20000 }).then(
        () => assert.fail("not ended by close()"),
        (e) => e,
      );
      const leftOpen = await eventually(async () => (await alice.listDirectives({ role: "issued", status: "open" })).directives[0], 10000, "the open directive");
      await alice.close();
      assert.ok((await waiting) instanceof ClientClosed);
      assert.equal((await client(bus, aliceTok).getDirective(leftOpen.directiveId)).status, "requested");
    } finally {
      await alice.close();
      await bob.close();
    }
  }));

test("S30 a group directive", () =>
  withBus(async (bus, admin) => {
    const alice = client(bus, await tokenFor(admin, "alice"));
    const tokens = {};
    for (const m of ["m1", "m2", "m3"]) tokens[m] = await tokenFor(admin, m);
    const g = await admin.createGroup("@builders");
    assert.deepEqual([g.name, g.created, g.selfJoin, g.announce], ["@builders", true, false, true]);
    for (const m of ["m1", "m2", "m3"]) await admin.addMember("@builders", m);
    const [m1, m2, m3] = ["m1", "m2", "m3"].map((m) => client(bus, tokens[m])); // over HTTP: requests wait in their inboxes
    try {
      await alice.connect();
      const d = await alice.createDirective("@builders", "build.run", { ref: "main" });
      assert.deepEqual([d.assignee, d.status, d.claimedBy], ["@builders", "requested", null]);
      for (const m of [m1, m2, m3]) await eventually(async () => (await requestsIn(m, d.directiveId)).length === 1, 10000, "a request per member");
      assert.deepEqual((await m3.listDirectives({ role: "assigned" })).directives.map((x) => x.directiveId), [d.directiveId]);

      // two members start at once: exactly one claims it
      const [a, b] = await Promise.allSettled([m1.startDirective(d.directiveId), m2.startDirective(d.directiveId)]);
      const won = [a, b].filter((x) => x.status === "fulfilled");
      const lost = [a, b].filter((x) => x.status === "rejected");
      assert.equal(won.length, 1, "exactly one claims it");
      const winner = won[0].value.claimedBy;
      assert.ok(["m1", "m2"].includes(winner));
      assert.ok(lost[0].reason instanceof AlreadyClaimed, String(lost[0].reason));
      assert.deepEqual([lost[0].reason.claimedBy, lost[0].reason.status], [winner, 409]);
      // nobody else is handed work that is gone
      await eventually(async () => (await requestsIn(m3, d.directiveId)).length === 0, 10000, "m3's request recalled");
      const started = await next(alice);
      assert.deepEqual([started.type, started.from], ["DirectiveStarted", winner]);
      await (winner === "m1" ? m1 : m2).completeDirective(d.directiveId, { artifact: "build-1" });
      assert.deepEqual((await next(alice)).payload.result, { artifact: "build-1" });

      // declined by every member: rejected
      const d2 = await alice.createDirective("@builders", "build.run", { ref: "broken" });
      const one = await m1.rejectDirective(d2.directiveId, "busy");
      assert.deepEqual([one.status, one.declinedBy], ["requested", ["m1"]]);
      await assert.rejects(m1.startDirective(d2.directiveId), Forbidden); // declined: not m1's any more
      assert.deepEqual((await m2.rejectDirective(d2.directiveId)).declinedBy, ["m1", "m2"]);
      const last = await m3.rejectDirective(d2.directiveId, "no");
      assert.deepEqual([last.status, last.declinedBy], ["rejected", ["m1", "m2", "m3"]]);
      const told = await next(alice);
      assert.deepEqual([told.type, told.correlationId], ["DirectiveRejected", d2.directiveId]);

      // workers on every member: one handler runs, the others skip it
      const calls = [];
      const workers = ["m1", "m2", "m3"].map((m) => {
        const w = client(bus, tokens[m]);
        w.onDirective("build.*", async (dir) => {
          calls.push(m);
          await sleep(100);
          return { by: m, ref: dir.params.ref };
        });
        return w;
      });
      try {
        await Promise.all(workers.map((w) => w.connect()));
        const result = await alice.runDirective("@builders", "build.run", { ref: "v2" }, { timeoutMs: 15000 });
        assert.equal(result.ref, "v2");
        await sleep(300);
        assert.deepEqual(calls, [result.by]);
      } finally {
        await Promise.all(workers.map((w) => w.close()));
      }
    } finally {
      await alice.close();
    }
  }));

test("S31 groups and fan-out", () =>
  withBus(async (bus, admin) => {
    const aliceTok = await tokenFor(admin, "alice");
    const alice = client(bus, aliceTok);
    const bob = client(bus, await tokenFor(admin, "bob"));
    const carol = client(bus, await tokenFor(admin, "carol")); // over HTTP: offline
    try {
      await bob.connect();
      await alice.connect();
      const created = await admin.createGroup("reviewers", { selfJoin: true });
      assert.deepEqual([created.name, created.created, created.selfJoin, created.announce], ["@reviewers", true, true, true]);
      assert.deepEqual((await admin.addMember("reviewers", "bob")).identities, ["bob"]);
      assert.deepEqual((await admin.addMember("@reviewers", "bob")).identities, ["bob"]); // idempotent
      await assert.rejects(admin.addMember("@reviewers", "nobody"), UnknownRecipient);
      const joined = await carol.joinGroup("@reviewers");
      assert.deepEqual(joined.identities, ["bob", "carol"]);
      const peer = await next(bob);
      assert.deepEqual([peer.type, peer.from, peer.payload], ["PeerJoined", "signalbus", { group: "@reviewers", identity: "carol" }]);

      const listed = await alice.groups();
      assert.deepEqual(listed.map((x) => [x.name, x.identities, x.selfJoin, x.announce]), [["@reviewers", ["bob", "carol"], true, true]]);
      const shown = await alice.group("reviewers");
      assert.equal(shown.name, "@reviewers");
      assert.ok(shown.createdAt);
      assert.deepEqual(shown.members.map((m) => [m.identity, m.recipientState]), [["bob", "available"], ["carol", "not_available_offline"]]);

      // one send, one signal per member, one fanout_id
      const out = await alice.send("@reviewers", "ReviewRequested", { pr: 7 }, { dedupeKey: "review-7" });
      assert.ok(isFanout(out));
      assert.match(out.fanoutId, UUID);
      assert.deepEqual([out.to, out.signalId], ["@reviewers", null]);
      assert.deepEqual(
        out.results.map((m) => [m.to, m.delivered, m.queued, m.publishPath, m.error]),
        [["bob", true, false, "pushed_to_ws", null], ["carol", false, true, "queued_offline", null]],
      );
      assert.equal(out.results[0].result.recipientState, "available");
      const ids = out.signalIds;
      assert.deepEqual(ids, out.results.map((m) => m.signalId));
      for (const id of ids) assert.match(id, UUID);
      const pushed = await next(bob);
      assert.deepEqual([pushed.id, pushed.type, pushed.from], [ids[0], "ReviewRequested", "alice"]);

      // the repeat answers the same signals: nobody gets a second one
      const again = await alice.send("@reviewers", "ReviewRequested", { pr: 7 }, { dedupeKey: "review-7" });
      assert.deepEqual([again.fanoutId, again.signalIds], [out.fanoutId, ids]);
      await nothingMore(bob);
      assert.deepEqual((await carol.inbox()).filter((s) => s.type === "ReviewRequested").map((s) => s.id), [ids[1]]);

      // recall them all at once
      const recalled = await alice.recallMany({ fanoutId: out.fanoutId });
      assert.deepEqual(
        recalled.map((r) => [r.signalId, r.to, r.outcome]).sort(),
        [[ids[0], "bob", "already_delivered"], [ids[1], "carol", "recalled"]].sort(),
      );
      assert.deepEqual((await carol.inbox()).filter((s) => s.type === "ReviewRequested"), []);
      assert.deepEqual(await bob.recallMany({ fanoutId: out.fanoutId }), []); // not bob's
      assert.deepEqual(await alice.recallMany({ fanoutId: "00000000-0000-4000-8000-000000000000" }), []);
      await assert.rejects(alice.recallMany({}), UsageError);
      await assert.rejects(alice.recallMany({ fanoutId: out.fanoutId, correlationId: "x" }), UsageError);

      // by correlation id, the caller's own only; the sender is left out of its own group's fan-out
      await alice.send("@reviewers", "StatusUpdate", { n: 0 }, { correlationId: "corr-9" });
      await next(bob);
      const fromCarol = await carol.send("@reviewers", "StatusUpdate", { n: 1 }, { correlationId: "corr-9" }); // over HTTP
      assert.deepEqual(fromCarol.results.map((m) => m.to), ["bob"]);
      await next(bob);
      const byCorr = await carol.recallMany({ correlationId: "corr-9" });
      assert.deepEqual(byCorr.map((r) => [r.signalId, r.to, r.outcome]), [[fromCarol.signalIds[0], "bob", "already_delivered"]]);
      assert.deepEqual(await client(bus, aliceTok).recallMany({ correlationId: "no-such" }), []);

      // not self-join: Forbidden; an unknown group: UnknownGroup, over the session and over HTTP
      await admin.createGroup("@leads");
      await assert.rejects(carol.joinGroup("@leads"), (e) => e instanceof Forbidden && e.status === 403);
      await assert.rejects(alice.send("@nope", "StatusUpdate", {}), (e) => e instanceof UnknownGroup && e.status === 404);
      await assert.rejects(carol.send("@nope", "StatusUpdate", {}), (e) => e instanceof UnknownGroup && e.status === 404);
      await assert.rejects(alice.group("@nope"), UnknownGroup);
      await assert.rejects(alice.ask("@reviewers", "Question", {}), UsageError);

      // leaving is announced too; the admin removes members and groups
      await carol.leaveGroup("reviewers");
      const left = await next(bob);
      assert.deepEqual([left.type, left.from, left.payload], ["PeerLeft", "signalbus", { group: "@reviewers", identity: "carol" }]);
      assert.deepEqual((await admin.removeMember("@reviewers", "bob")).members, []);
      assert.deepEqual((await admin.groups()).map((x) => [x.name, x.identities]), [["@leads", []], ["@reviewers", []]]);
      assert.deepEqual((await admin.groups({ tenant: "default" })).map((x) => x.name), ["@leads", "@reviewers"]);
      assert.equal((await admin.group("@leads")).name, "@leads");
      assert.deepEqual(await admin.deleteGroup("@leads"), { group: "@leads", deleted: true });
      await assert.rejects(admin.deleteGroup("@leads"), UnknownGroup);
    } finally {
      await alice.close();
      await bob.close();
    }
  }));
