// A real `signalbus serve` (embedded) per test, started from the built binary.
import { spawn } from "node:child_process";
import { existsSync, statSync, accessSync, constants, mkdtempSync, openSync, closeSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

import { AdminClient, SignalbusError, silentLogger } from "../dist/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const ADMIN_TOKEN = "sbtest-admin-token";
export const STALE_AFTER = "3s";

export function binary() {
  const p = path.resolve(process.env.SIGNALBUS_BIN ?? path.join(here, "../../../target/debug/signalbus"));
  let ok = existsSync(p) && statSync(p).isFile() && statSync(p).size > 0;
  if (ok) {
    try {
      accessSync(p, constants.X_OK);
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    throw new Error(`the signalbus binary ${p} is missing or empty: build it with \`cargo build --bin signalbus\` or point SIGNALBUS_BIN at one`);
  }
  return p;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Bus {
  constructor(dir, port, extraArgs = []) {
    this.dir = dir;
    this.port = port;
    this.extraArgs = extraArgs;
    this.url = `http://127.0.0.1:${port}`;
    this.adminToken = ADMIN_TOKEN;
    this.proc = undefined;
    this.logPath = path.join(dir, "serve.log");
  }

  /** A fresh bus; `config` (TOML text), when given, is its `--config` file. */
  static async create({ config } = {}) {
    const dir = mkdtempSync(path.join(tmpdir(), "sbc-ts-"));
    const extraArgs = [];
    if (config !== undefined) {
      writeFileSync(path.join(dir, "signalbus.toml"), config);
      extraArgs.push("--config", path.join(dir, "signalbus.toml"));
    }
    const bus = new Bus(dir, await freePort(), extraArgs);
    await bus.start();
    return bus;
  }

  async start() {
    if (this.proc) throw new Error("already running");
    const fd = openSync(this.logPath, "a");
    this.proc = spawn(
      binary(),
      ["serve", "--listen", `127.0.0.1:${this.port}`, "--data-dir", path.join(this.dir, "data"), "--admin-token", this.adminToken, "--stale-after", STALE_AFTER, ...this.extraArgs],
      { stdio: ["ignore", fd, fd], env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "info" } },
    );
    closeSync(fd);
    let exited = null;
    this.proc.once("exit", (code) => (exited = code));
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      if (exited !== null) throw new Error(`signalbus serve exited with ${exited}:\n${this.logTail()}`);
      try {
        const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) });
        if (r.status === 200) return;
      } catch {
        /* not yet */
      }
      await sleep(50);
    }
    throw new Error(`signalbus serve not ready within 30s:\n${this.logTail()}`);
  }

  async stop(signal = "SIGKILL") {
    const p = this.proc;
    if (!p) return;
    this.proc = undefined;
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill(signal);
    const timer = setTimeout(() => p.kill("SIGKILL"), 15000);
    await exited;
    clearTimeout(timer);
  }

  logTail(lines = 40) {
    try {
      return readFileSync(this.logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }
}

/** Runs `body(bus, admin)` against a fresh bus (`options` as `Bus.create`'s); prints the bus's log when it fails. */
export async function withBus(body, options = {}) {
  const bus = await Bus.create(options);
  const admin = new AdminClient(bus.url, bus.adminToken);
  try {
    await body(bus, admin);
  } catch (e) {
    console.error(`--- signalbus serve log (${bus.logPath}) ---\n${bus.logTail(80)}`);
    throw e;
  } finally {
    await bus.stop("SIGTERM");
  }
}

export async function tokenFor(admin, identity) {
  return (await admin.register(identity, { kind: "daemon" })).token;
}

export async function eventually(check, timeoutMs = 10000, what = "condition") {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v;
      last = v;
    } catch (e) {
      if (!(e instanceof SignalbusError) && e?.name !== "AssertionError") throw e;
      last = e;
    }
    await sleep(50);
  }
  throw new Error(`${what} not reached within ${timeoutMs} ms (last: ${last})`);
}

export const quiet = { logger: process.env.SBC_LOG ? console : silentLogger };
