// clients/SCENARIOS.md S28–S31 (directives, groups and fan-out), each against a real
// `signalbus serve` (see harness.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  AlreadyClaimed,
  Client,
  DirectiveCanceled,
  DirectiveEnded,
  DirectiveExpired,
  DirectiveFailed,
  DirectiveRejected,
  Forbidden,
  IdempotencyConflict,
  InvalidTransition,
  NotFound,
  TransportError,
  UnknownGroup,
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
        [d.created, d.status, d.type, d.issuer, d.assignee, d.claimedBy, d.params, d.idempotencyKey, d.result, d.failure, d.declinedBy],
        [true, "requested", "package.install", "alice", "bob", null, { name: "jq" }, "install-jq", null, null, []],
      );
      assert.ok(Date.parse(d.deadline) > Date.parse(d.createdAt));
      // the same key: the same directive, nothing created; with other params: a conflict naming it
      const again = await alice.createDirective("bob", "package.install", { name: "jq" }, { idempotencyKey: "install-jq" });
      assert.deepEqual([again.directiveId, again.created, again.status], [d.directiveId, false, "requested"]);
      await assert.rejects(
        alice.createDirective("bob", "package.install", { name: "curl" }, { idempotencyKey: "install-jq" }),
        (e) => e instanceof IdempotencyConflict && e.directiveId === d.directiveId && e.status === 409,
      );
      const generated = await alice.createDirective("bob", "package.remove", {});
      assert.match(generated.idempotencyKey, /^sbd-/);

      // bob is told, as a signal whose payload is the directive
      const req = await next(bob);
      assert.deepEqual([req.type, req.from, req.correlationId], ["DirectiveRequested", "alice", d.directiveId]);
      assert.deepEqual([req.payload.directive_id, req.payload.status, req.payload.params], [d.directiveId, "requested", { name: "jq" }]);
      await next(bob); // package.remove's request

      const started = await bob.startDirective(d.directiveId);
      assert.deepEqual([started.status, started.claimedBy], ["started", "bob"]);
      assert.ok(started.startedAt);
      const progressed = await bob.progressDirective(d.directiveId, "downloading", 40);
      assert.deepEqual([progressed.progress.message, progressed.progress.percent, progressed.status], ["downloading", 40, "started"]);
      const done = await bob.completeDirective(d.directiveId, { ok: true });
      assert.deepEqual([done.status, done.result], ["completed", { ok: true }]);
      assert.ok(done.finishedAt);

      // alice is told: started, then completed with the result
      const s1 = await next(alice);
      assert.deepEqual([s1.type, s1.from, s1.correlationId, s1.payload.status], ["DirectiveStarted", "bob", d.directiveId, "started"]);
      const s2 = await next(alice);
      assert.deepEqual([s2.type, s2.from, s2.correlationId, s2.payload.result], ["DirectiveCompleted", "bob", d.directiveId, { ok: true }]);

      const got = await alice.getDirective(d.directiveId);
      assert.deepEqual([got.status, got.result, got.progress.percent], ["completed", { ok: true }, 40]);
      assert.equal((await alice.getDirective(d.directiveId, { waitMs: 5000 })).status, "completed"); // terminal: at once
      const issued = await alice.listDirectives({ role: "issued" });
      assert.ok(issued.directives.some((x) => x.directiveId === d.directiveId && x.status === "completed"));
      assert.deepEqual(issued.directives.map((x) => x.directiveId), [generated.directiveId, d.directiveId]); // newest first
      const page = await alice.listDirectives({ role: "issued", limit: 1 });
      assert.deepEqual(page.directives.map((x) => x.directiveId), [generated.directiveId]);
      assert.ok(page.nextBefore);
      const rest = await alice.listDirectives({ role: "issued", limit: 1, before: page.nextBefore });
      assert.deepEqual(rest.directives.map((x) => x.directiveId), [d.directiveId]);
      assert.deepEqual((await bob.listDirectives({ role: "assigned", status: "open" })).directives.map((x) => x.directiveId), [generated.directiveId]);

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
    await tokenFor(admin, "dave"); // never runs a worker
    const erinTok = await tokenFor(admin, "erin");
    const alice = client(bus, aliceTok);
    class PackageMissing extends Error {}
    const seen = [];
    const bob = client(bus, await tokenFor(admin, "bob"));
    bob.onDirective("package.*", async (d, progress) => {
      const after = await progress("fetching", 50);
      seen.push(after);
      if (d.params.name === "nope") throw new PackageMissing(`no package ${d.params.name}`);
      if (d.type === "package.version") return "1.7.1"; // not an object: {value: …}
      return { installed: d.params.name };
    });
    try {
      // without a session there is nobody to be told: nothing is created
      await assert.rejects(client(bus, aliceTok).runDirective("bob", "package.install", {}, 5000), TransportError);
      await bob.connect();
      await alice.connect();
      assert.equal((await alice.listDirectives({ role: "issued" })).directives.length, 0);

      // the handler's result, with its progress recorded
      assert.deepEqual(await alice.runDirective("bob", "package.install", { name: "jq" }, 15000), { installed: "jq" });
      assert.deepEqual([seen[0].status, seen[0].claimedBy, seen[0].progress.message, seen[0].progress.percent], ["started", "bob", "fetching", 50]);
      assert.deepEqual(await alice.runDirective("bob", "package.version", { name: "jq" }, 15000), { value: "1.7.1" });

      // a handler that throws fails it: the code is the error's class name
      const failed = await alice.runDirective("bob", "package.install", { name: "nope" }, 15000).then(
        () => assert.fail("not failed"),
        (e) => e,
      );
      assert.ok(failed instanceof DirectiveFailed && failed instanceof DirectiveEnded);
      assert.deepEqual([failed.failure.code, failed.failure.message, failed.directive.status], ["PackageMissing", "no package nope", "failed"]);

      // declined by hand (bob's worker does not take review.*: it reaches receive())
      const rejected = alice.runDirective("bob", "review.code", { pr: 7 }, 15000).then(
        () => assert.fail("not rejected"),
        (e) => e,
      );
      const req = await next(bob);
      assert.deepEqual([req.type, req.payload.type], ["DirectiveRequested", "review.code"]);
      await bob.rejectDirective(req.payload.directive_id, "not my area");
      const r = await rejected;
      assert.ok(r instanceof DirectiveRejected);
      assert.deepEqual([r.directive.status, r.reason], ["rejected", "not my area"]);

      // nobody works on dave's: it expires at its deadline (the sweeper may take a second or two more)
      const t0 = Date.now();
      await assert.rejects(
        alice.runDirective("dave", "package.install", { name: "jq" }, 20000, { deadlineSeconds: 2 }),
        (e) => e instanceof DirectiveExpired && e.directive.status === "expired",
      );
      assert.ok(Date.now() - t0 >= 1500, "expired before its deadline");

      // canceled by alice from another task
      const canceled = alice.runDirective("dave", "package.install", { name: "curl" }, 20000).then(
        () => assert.fail("not canceled"),
        (e) => e,
      );
      const open = await eventually(async () => (await alice.listDirectives({ role: "issued", status: "open" })).directives[0], 10000, "the open directive");
      await alice.cancelDirective(open.directiveId, "changed my mind");
      const c = await canceled;
      assert.ok(c instanceof DirectiveCanceled);
      assert.deepEqual([c.directive.directiveId, c.directive.status, c.directive.reason], [open.directiveId, "canceled", "changed my mind"]);

      // runDirective took (and acked) every lifecycle signal: alice's own receive() saw none
      await nothingMore(alice);
      await eventually(async () => (await alice.list({ role: "received" })).signals.every((s) => s.ackedAt), 10000, "alice's lifecycle signals acked");
      await assert.rejects(alice.runDirective("bob", "package.install", {}, 0), UsageError);
      assert.throws(() => bob.onDirective("pack*age", () => ({})), UsageError);

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
    assert.deepEqual([g.group, g.created, g.selfJoin], ["@builders", true, false]);
    for (const m of ["m1", "m2", "m3"]) await admin.addMember("@builders", m);
    const [m1, m2, m3] = ["m1", "m2", "m3"].map((m) => client(bus, tokens[m])); // over HTTP: requests wait in their inboxes
    try {
      await alice.connect();
      const d = await alice.createDirective("@builders", "build.run", { ref: "main" });
      assert.deepEqual([d.assignee, d.status], ["@builders", "requested"]);
      for (const m of [m1, m2, m3]) await eventually(async () => (await requestsIn(m, d.directiveId)).length === 1, 10000, "a request per member");

      // two members start at once: exactly one claims it
      const [a, b] = await Promise.allSettled([m1.startDirective(d.directiveId), m2.startDirective(d.directiveId)]);
      const won = [a, b].filter((x) => x.status === "fulfilled");
      const lost = [a, b].filter((x) => x.status === "rejected");
      assert.equal(won.length, 1, "exactly one claims it");
      const winner = won[0].value.claimedBy;
      assert.ok(["m1", "m2"].includes(winner));
      assert.ok(lost[0].reason instanceof AlreadyClaimed, String(lost[0].reason));
      assert.equal(lost[0].reason.claimedBy, winner);
      // nobody else is handed work that is gone
      await eventually(async () => (await requestsIn(m3, d.directiveId)).length === 0, 10000, "m3's request recalled");
      const started = await next(alice);
      assert.deepEqual([started.type, started.from], ["DirectiveStarted", winner]);
      await (winner === "m1" ? m1 : m2).completeDirective(d.directiveId, { artifact: "build-1" });
      assert.deepEqual((await next(alice)).payload.result, { artifact: "build-1" });

      // declined by every member: rejected
      const d2 = await alice.createDirective("@builders", "build.run", { ref: "broken" });
      await m1.rejectDirective(d2.directiveId, "busy");
      await m2.rejectDirective(d2.directiveId);
      assert.equal((await alice.getDirective(d2.directiveId)).status, "requested");
      const last = await m3.rejectDirective(d2.directiveId, "no");
      assert.equal(last.status, "rejected");
      assert.deepEqual([...last.declinedBy].sort(), ["m1", "m2", "m3"]);
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
        const result = await alice.runDirective("@builders", "build.run", { ref: "v2" }, 15000);
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
    const alice = client(bus, await tokenFor(admin, "alice"));
    const bob = client(bus, await tokenFor(admin, "bob"));
    const carol = client(bus, await tokenFor(admin, "carol")); // over HTTP: offline
    try {
      await bob.connect();
      await alice.connect();
      assert.equal((await admin.createGroup("reviewers", { selfJoin: true })).selfJoin, true);
      assert.deepEqual((await admin.addMember("@reviewers", "bob")).members.map((m) => m.identity), ["bob"]);
      const joined = await carol.joinGroup("@reviewers");
      assert.deepEqual(joined.members.map((m) => m.identity), ["bob", "carol"]);
      const peer = await next(bob);
      assert.deepEqual([peer.type, peer.from, peer.payload], ["PeerJoined", "signalbus", { group: "@reviewers", identity: "carol" }]);

      assert.deepEqual(await alice.groups(), [{ group: "@reviewers", members: ["bob", "carol"], selfJoin: true, announce: true }]);
      const shown = await alice.group("reviewers");
      assert.deepEqual(shown.members.map((m) => [m.identity, m.recipientState]), [["bob", "available"], ["carol", "not_available_offline"]]);
      assert.deepEqual((await admin.groups()).map((x) => x.group), ["@reviewers"]);

      // one send, one signal per member, one fanout_id
      const out = await alice.send("@reviewers", "ReviewRequested", { pr: 7 }, { dedupeKey: "review-7" });
      assert.ok(isFanout(out));
      assert.match(out.fanoutId, UUID);
      assert.equal(out.to, "@reviewers");
      assert.deepEqual(out.results.map((m) => [m.to, m.delivered, m.queued, m.error]), [["bob", true, false, null], ["carol", false, true, null]]);
      assert.equal(out.results[0].result.recipientState, "available");
      const ids = out.results.map((m) => m.signalId);
      for (const id of ids) assert.match(id, UUID);
      const pushed = await next(bob);
      assert.deepEqual([pushed.id, pushed.type, pushed.from], [ids[0], "ReviewRequested", "alice"]);

      // the repeat answers the same signals: nobody gets a second one
      const again = await alice.send("@reviewers", "ReviewRequested", { pr: 7 }, { dedupeKey: "review-7" });
      assert.equal(again.fanoutId, out.fanoutId);
      assert.deepEqual(again.results.map((m) => m.signalId), ids);
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
      await assert.rejects(alice.recallMany({}), UsageError);

      // over HTTP, by correlation id; the sender is left out of its own group's fan-out
      const fromCarol = await carol.send("@reviewers", "StatusUpdate", { n: 1 }, { correlationId: "corr-9" });
      assert.deepEqual(fromCarol.results.map((m) => m.to), ["bob"]);
      await next(bob);
      const byCorr = await carol.recallMany({ correlationId: "corr-9" });
      assert.deepEqual(byCorr.map((r) => [r.signalId, r.outcome]), [[fromCarol.results[0].signalId, "already_delivered"]]);

      // not self-join: Forbidden; an unknown group: UnknownGroup
      await admin.createGroup("@ops");
      await assert.rejects(carol.joinGroup("@ops"), (e) => e instanceof Forbidden && e.status === 403);
      await assert.rejects(alice.send("@nope", "StatusUpdate", {}), (e) => e instanceof UnknownGroup && e.status === 404);
      await assert.rejects(alice.group("@nope"), UnknownGroup);
      await assert.rejects(alice.ask("@reviewers", "Question", {}), UsageError);

      // leaving is announced too; the admin removes members and groups
      await carol.leaveGroup("reviewers");
      const left = await next(bob);
      assert.deepEqual([left.type, left.payload], ["PeerLeft", { group: "@reviewers", identity: "carol" }]);
      assert.deepEqual((await admin.removeMember("@reviewers", "bob")).members, []);
      assert.deepEqual(await admin.deleteGroup("@ops"), { group: "@ops", deleted: true });
      await assert.rejects(admin.deleteGroup("@ops"), UnknownGroup);
    } finally {
      await alice.close();
      await bob.close();
    }
  }));
