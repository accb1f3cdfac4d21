// The README's examples run (issue 29): each ```ts block is type-checked and compiled with tsc as
// a file of this package (so `import ... from "@signalbus/client"` resolves to the built dist/),
// then run with node against a real bus, with the URL and a token put in place of the README's
// placeholders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "../dist/index.js";
import { eventually, quiet, sleep, tokenFor, withBus } from "./harness.mjs";

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const URL_PLACEHOLDER = "http://127.0.0.1:7400";
const TOKEN_PLACEHOLDER = "sb_…";
const blocks = () => [...readFileSync(path.join(pkg, "README.md"), "utf8").matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1]);

test("README: it has ts examples with the placeholders", () => {
  const found = blocks();
  assert.ok(found.length > 0, "no ```ts block in the README");
  for (const b of found) assert.ok(b.includes(URL_PLACEHOLDER) && b.includes(TOKEN_PLACEHOLDER), b);
});

test("README: the examples compile and run", () =>
  withBus(async (bus, admin) => {
    const botTok = await tokenFor(admin, "bot");
    const aliceTok = await tokenFor(admin, "alice");
    // inside the package (not under node_modules), so the package's own name resolves to it
    const dir = mkdtempSync(path.join(pkg, "test", ".readme-"));
    try {
      for (const [i, block] of blocks().entries()) {
        const src = path.join(dir, `example_${i}.ts`);
        writeFileSync(src, block.replaceAll(URL_PLACEHOLDER, bus.url).replaceAll(TOKEN_PLACEHOLDER, botTok));
        execFileSync(
          process.execPath,
          [path.join(pkg, "node_modules/typescript/bin/tsc"), "--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext",
            "--strict", "--skipLibCheck", "--types", "node", "--outDir", dir, "--rootDir", dir, src],
          { stdio: "inherit" },
        );
        const child = spawn(process.execPath, [path.join(dir, `example_${i}.js`)], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let err = "";
        child.stdout.on("data", (d) => (out += d));
        child.stderr.on("data", (d) => (err += d));
        const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
        const alice = new Client(bus.url, aliceTok, quiet);
        try {
          await alice.connect();
          const sig = await alice.receive(20000); // the example sends alice a StatusUpdate ...
          assert.deepEqual([sig.from, sig.type, sig.payload], ["bot", "StatusUpdate", { build: "green" }]);
          await alice.ack(sig);
          const answer = await alice.ask("bot", "Question", { q: "?" }, 10000); // ... and answers a Question
          assert.deepEqual([answer.type, answer.payload], ["Answer", { a: 42 }]);
          await eventually(async () => out.includes("alice Question"), 5000, "the handler's console.log");
          assert.equal(child.exitCode, null, "the example keeps serving");
        } finally {
          await alice.close();
          child.kill("SIGINT");
        }
        const { signal } = await Promise.race([exited, sleep(10000).then(() => ({ signal: "timeout" }))]);
        assert.equal(signal, "SIGINT");
        assert.equal(err, "", `stderr: ${err}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }));
