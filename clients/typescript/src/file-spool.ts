/**
 * `FileSpool`: the offline buffer as a directory of JSON files (Node only). Same format as the
 * Python client's spool: `send-<ISO8601 UTC, ':' as '-'>-<seq>-<random>.json`, each written to a
 * temporary name, fsynced and renamed, so a crash never leaves half an entry.
 */

import { promises as fs } from "node:fs";
import * as path from "node:path";

import type { Logger } from "./logger.js";
import {
  byteLength,
  checkLimits,
  decodeEntry,
  encodeEntry,
  entryName,
  nameTime,
  tooBig,
  type PutOptions,
  type SpoolEntry,
  type SpoolLimits,
  type SpoolRequest,
  type SpoolStore,
} from "./spool.js";

const isEntry = (n: string): boolean => n.startsWith("send-") && n.endsWith(".json");

export class FileSpool implements SpoolStore {
  readonly directory: string;
  readonly maxBytes: number;
  readonly maxAgeMs: number;
  private readonly logger: Logger | undefined;
  private ready: Promise<void> | undefined;

  constructor(directory: string, limits: SpoolLimits = {}) {
    this.directory = directory;
    ({ maxBytes: this.maxBytes, maxAgeMs: this.maxAgeMs } = checkLimits(limits));
    this.logger = limits.logger;
  }

  /** @deprecated use `maxAgeMs`. */
  get maxAgeSeconds(): number {
    return this.maxAgeMs / 1000;
  }

  private mkdir(): Promise<void> {
    this.ready ??= fs.mkdir(this.directory, { recursive: true }).then(() => undefined);
    return this.ready;
  }

  private async names(): Promise<string[]> {
    await this.mkdir();
    return (await fs.readdir(this.directory)).filter(isEntry).sort();
  }

  /** Delete entries past the age cap, then the oldest until `roomFor` more bytes fit. */
  async evict(now = Date.now(), roomFor = 0): Promise<string[]> {
    const evicted: string[] = [];
    const sized: [string, number][] = [];
    for (const name of await this.names()) {
      let st;
      try {
        st = await fs.stat(path.join(this.directory, name));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw e;
      }
      const at = nameTime(name) ?? st.mtimeMs;
      if (now - at > this.maxAgeMs) {
        this.logger?.warn(`spool entry ${name} is older than ${this.maxAgeMs / 1000}s: evicted, never replayed`);
        await this.delete(name);
        evicted.push(name);
      } else sized.push([name, st.size]);
    }
    let total = sized.reduce((t, [, s]) => t + s, 0);
    for (const [name, size] of sized) {
      if (total + roomFor <= this.maxBytes) break;
      this.logger?.warn(`spool is over ${this.maxBytes} bytes: evicted its oldest entry ${name}, never replayed`);
      await this.delete(name);
      evicted.push(name);
      total -= size;
    }
    return evicted;
  }

  async put(request: SpoolRequest, o: PutOptions): Promise<SpoolEntry> {
    if (!request.dedupe_key) throw new TypeError("a spooled send needs a dedupe_key");
    const now = o.now ?? Date.now();
    const { iso, name } = entryName(now);
    const text = encodeEntry(request, o, iso);
    const size = byteLength(text);
    if (size > this.maxBytes) throw tooBig(size, this.maxBytes, request.dedupe_key);
    await this.evict(now, size);
    const file = path.join(this.directory, name);
    const tmp = path.join(this.directory, `.${name}.tmp`);
    const fh = await fs.open(tmp, "w", 0o600);
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, file);
    return decodeEntry(name, text);
  }

  async entries(): Promise<SpoolEntry[]> {
    await this.evict();
    const out: SpoolEntry[] = [];
    for (const name of await this.names()) {
      const file = path.join(this.directory, name);
      let text: string;
      try {
        text = await fs.readFile(file, "utf8");
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") continue; // replayed by another client sharing the directory
        throw e;
      }
      try {
        out.push(decodeEntry(name, text));
      } catch (e) {
        this.logger?.error(`spool entry ${file} is unreadable (${(e as Error).message}); moved to ${name}.bad and never replayed`);
        await fs.rename(file, `${file}.bad`).catch((re: Error) => this.logger?.error(`could not move ${file} aside: ${re.message}`));
      }
    }
    return out.sort((a, b) => Date.parse(b.spooledAt) - Date.parse(a.spooledAt) || (a.name < b.name ? 1 : -1));
  }

  async delete(name: string): Promise<void> {
    await fs.unlink(path.join(this.directory, name)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "ENOENT") throw e;
    });
  }

  async count(): Promise<number> {
    return (await this.names()).length;
  }

  async totalBytes(): Promise<number> {
    let total = 0;
    for (const name of await this.names()) {
      try {
        total += (await fs.stat(path.join(this.directory, name))).size;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      }
    }
    return total;
  }
}
