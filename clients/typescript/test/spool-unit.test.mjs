// Spool decisions for answers the embedded bus cannot be made to give on demand (503, 429, 500,
// timeouts): a stub fetch answers instead of the bus (SCENARIOS.md S18).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

import { Client, MemorySpool, RateLimited, Unavailable, silentLogger } from "../dist/index.js";
import { FileSpool } from "../dist/file-spool.js";

const OK = {
  signal_id: "5d1e0000-0000-4000-8000-000000000001",
  delivered: false,
  queued: true,
  recipient_state: "not_available_offline",
  delivery_class: "async",
  created_at: "2026-05-03T12:00:00.123456Z",
  expires_at: "2026-05-03T13:00:00.123456Z",
  resolved_to_session: null,
  publish_path: "queued_offline",
};

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const err = (status, code, extra = {}) => json(status, { error: { code, message: `stub ${code}`, ...extra } });
const stub = (answer, seen) => async (_url, init) => {
  const body = JSON.parse(init.body);
  seen.push(body);
  return answer(body);
};
const dir = () => mkdtempSync(path.join(tmpdir(), "sbc-unit-"));
const mk = (fetch, o = {}) => new Client("http://stub", "tok", { logger: silentLogger, fetch, ...o });

test("S18a 503 spools, 429 rejects", async () => {
  const seen = [];
  const answers = [err(503, "unavailable"), err(429, "rate_limited", { retry_after_ms: 1500 })];
  const c = mk(stub(() => answers.shift(), seen), { spoolDir: dir() });
  const out = await c.send("bob", "StatusUpdate", { n: 1 }, { ttlSeconds: 600 });
  assert.equal(out.spooled, true);
  assert.match(out.reason, /^unavailable/);
  assert.equal(out.ttlSeconds, 600);
  assert.equal(seen[0].dedupe_key, out.dedupeKey); // generated before the first attempt
  await assert.rejects(c.send("bob", "StatusUpdate", { n: 2 }), (e) => e instanceof RateLimited && e.retryAfterMs === 1500);
  assert.equal(await (await c.spool()).count(), 1);
  await c.close();
});

test("S18b without a spool a 503 rejects with the dedupe_key", async () => {
  const seen = [];
  const c = mk(stub(() => err(503, "unavailable"), seen));
  await assert.rejects(c.send("bob", "StatusUpdate", {}, { dedupeKey: "k-1" }), (e) => e instanceof Unavailable && e.details.dedupe_key === "k-1" && e.hint.includes("dedupe_key"));
  const spooling = mk(stub(() => err(503, "unavailable"), seen), { spool: new MemorySpool() });
  await assert.rejects(spooling.send("bob", "StatusUpdate", {}, { spool: false }), Unavailable);
});

test("S18c replay deletes only what the bus answered", async () => {
  const seen = [];
  const byKey = {
    d: () => json(200, OK),
    c: () => err(409, "recipient_unavailable", { recipient_state: "not_available_offline", signal_id: OK.signal_id }),
    b: () => err(503, "unavailable"),
  };
  const spool = new MemorySpool();
  const now = Date.now();
  for (const [i, key] of ["a", "b", "c", "d"].entries()) {
    await spool.put({ to: "bob", type: "StatusUpdate", payload: {}, dedupe_key: key }, { ttlSeconds: 600, identity: null, reason: "t", now: now - 100000 + i * 1000 });
  }
  const c = mk(stub((b) => byKey[b.dedupe_key](), seen), { spool, replayRate: 1000 });
  const report = await c.replaySpool();
  assert.deepEqual(seen.map((b) => b.dedupe_key), ["d", "c", "b"]); // newest first; stops at the 503
  assert.ok(seen.every((b) => b.ttl_seconds < 600)); // the TTL left
  assert.deepEqual(report.replayed.map((r) => r.signalId), [OK.signal_id]);
  assert.deepEqual(report.rejected.map((e) => e.code), ["recipient_unavailable"]);
  assert.equal(report.kept, 2);
  assert.ok(report.stoppedBy instanceof Unavailable);
  assert.deepEqual((await spool.entries()).map((e) => e.request.dedupe_key).sort(), ["a", "b"]);

  seen.length = 0;
  const timeout = mk(async () => {
    throw Object.assign(new Error("stub timeout"), { name: "TimeoutError" });
  }, { spool });
  const r2 = await timeout.replaySpool();
  assert.deepEqual([r2.kept, r2.stoppedBy.code], [2, "timeout"]);
  byKey.a = byKey.b = () => err(500, "internal");
  const r3 = await mk(stub((b) => byKey[b.dedupe_key](), seen), { spool }).replaySpool();
  assert.deepEqual([r3.kept, r3.stoppedBy.code, await spool.count()], [2, "internal", 2]);
});

test("S18d a connection failure spools, in the shared file format", async () => {
  const d = dir();
  const c = mk(async () => {
    throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
  }, { spoolDir: d });
  const out = await c.send("bob", "Question", { q: 1 }, { deliveryClass: "async" });
  assert.deepEqual([out.spooled, out.ttlSeconds], [true, 3600]); // Question's default TTL (CONTRACT §3)
  const [entry] = await new FileSpool(d).entries();
  assert.equal(entry.request.dedupe_key, out.dedupeKey);
  assert.equal("ttl_seconds" in entry.request, false);
  const doc = JSON.parse(readFileSync(path.join(d, entry.name), "utf8"));
  assert.deepEqual([doc.version, doc.kind], [1, "send"]);
  assert.match(entry.name, /^send-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}Z-\d{6}-[0-9a-f]{8}\.json$/);
  await c.close();
});

test("reads the shared spool format (clients/testdata/spool)", async () => {
  const { cpSync, readdirSync } = await import("node:fs");
  const { fileURLToPath } = await import("node:url");
  const src = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../testdata/spool");
  const d = dir();
  for (const f of readdirSync(src)) cpSync(path.join(src, f), path.join(d, f));
  const [entry, ...rest] = await new FileSpool(d, { maxAgeSeconds: 1e10 }).entries();
  assert.equal(rest.length, 0);
  assert.deepEqual([entry.identity, entry.ttlSeconds, entry.request.dedupe_key], ["alice", 3600, "sbc-00000000-0000-4000-8000-000000000001"]);
  assert.deepEqual([entry.request.payload, entry.request.correlation_id, entry.spooledAt], [{ n: 1, nested: { ok: true } }, "c-1", "2026-05-03T12:00:00.123Z"]);
  const w = dir();
  const written = await new FileSpool(w).put(entry.request, { ttlSeconds: 60, identity: "alice", reason: "r" });
  const keys = (p) => Object.keys(JSON.parse(readFileSync(p, "utf8"))).sort();
  assert.deepEqual(keys(path.join(w, written.name)), keys(path.join(d, entry.name))); // the same keys
});

test("close ends a pending receive", async () => {
  const { ClientClosed } = await import("../dist/index.js");
  const c = mk(async () => json(200, OK));
  const waiting = c.receive();
  await c.close();
  await assert.rejects(waiting, ClientClosed);
});

test("spool ages are milliseconds; maxAgeSeconds stays as a deprecated alias", () => {
  assert.equal(new MemorySpool().maxAgeMs, 24 * 3600 * 1000);
  assert.equal(new MemorySpool({ maxAgeMs: 1500 }).maxAgeMs, 1500);
  assert.equal(new MemorySpool({ maxAgeSeconds: 2 }).maxAgeMs, 2000);
  assert.throws(() => new MemorySpool({ maxAgeMs: 0 }), RangeError);
});

test("a scheduled send is spooled with its deliver_at (SCENARIOS.md, the spool file format)", async () => {
  const seen = [];
  const answers = [err(503, "unavailable")];
  const spool = new MemorySpool();
  const c = mk(stub(() => answers.shift() ?? json(200, OK), seen), { spool, replayRate: 1000 });
  const out = await c.send("bob", "StatusUpdate", { n: 1 }, { ttlSeconds: 600, deliverAfterMs: 600000 });
  assert.equal(out.spooled, true);
  assert.equal(seen[0].deliver_after_seconds, 600);
  const [entry] = await spool.entries();
  assert.equal("deliver_after_seconds" in entry.request, false); // the delay became the instant it names
  assert.ok(Math.abs(Date.parse(entry.request.deliver_at) - (Date.now() + 600000)) < 5000);

  const now = Date.now();
  const overdue = { to: "bob", type: "StatusUpdate", payload: {}, dedupe_key: "overdue", deliver_at: new Date(now - 100000).toISOString() };
  await spool.put(overdue, { ttlSeconds: 600, identity: null, reason: "t", now: now - 200000 });
  seen.length = 0;
  const report = await c.replaySpool();
  assert.deepEqual([report.replayed.length, await spool.count()], [2, 0]);
  const byKey = Object.fromEntries(seen.map((b) => [b.dedupe_key, b]));
  assert.deepEqual([byKey[out.dedupeKey].deliver_at, byKey[out.dedupeKey].ttl_seconds], [entry.request.deliver_at, 600]); // its whole TTL, from deliver_at
  assert.equal("deliver_at" in byKey.overdue, false); // due 100 s ago: sent now
  assert.ok(byKey.overdue.ttl_seconds >= 495 && byKey.overdue.ttl_seconds <= 500);
  await c.close();
});

test("scheduled usage errors come before the spool", async () => {
  const seen = [];
  const spool = new MemorySpool();
  const c = mk(stub(() => err(503, "unavailable"), seen), { spool });
  await assert.rejects(c.send("bob", "Blocker", {}, { deliverAfterMs: 5000 }), (e) => e.name === "UsageError");
  await assert.rejects(c.send("bob", "StatusUpdate", {}, { deliverAfterMs: 1000, deliverAt: new Date() }), (e) => e.name === "UsageError");
  assert.deepEqual([seen.length, await spool.count()], [0, 0]);
  await c.close();
});

test("close() while the session is still opening ends: a welcome that comes after it is not adopted", async () => {
  const sockets = [];
  class LateWelcome {
    constructor(url) {
      this.url = url;
      this.readyState = 0;
      this.listeners = {};
      this.closedWith = undefined;
      sockets.push(this);
    }
    addEventListener(type, fn) {
      (this.listeners[type] ??= []).push(fn);
    }
    emit(type, ev) {
      for (const fn of this.listeners[type] ?? []) fn(ev);
    }
    send() {}
    close(code = 1000, reason = "") {
      if (this.closedWith) return;
      this.closedWith = code;
      this.readyState = 3;
      setTimeout(() => this.emit("close", { code, reason }), 0);
    }
  }
  const c = new Client("http://stub", "tok", { logger: silentLogger, WebSocket: LateWelcome, fetch: async () => json(200, {}) });
  c.start();
  while (!sockets[0]?.listeners.message) await new Promise((r) => setTimeout(r, 1)); // the client is listening
  const closing = c.close(); // the handshake is still in flight
  sockets[0].emit("message", { data: JSON.stringify({ op: "welcome", session_id: "s-1", tenant: "default", identity: "alice", heartbeat_interval_ms: 750 }) });
  const ended = await Promise.race([closing.then(() => "closed"), new Promise((r) => setTimeout(() => r("hung"), 3000))]);
  assert.equal(ended, "closed");
  assert.equal(sockets[0].closedWith, 1000); // the late session is closed, not kept open
  assert.equal(c.connected, false);
});
