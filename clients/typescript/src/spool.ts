/**
 * The offline buffer (the Wingman design, ADR 0001 §4). A store of sends the bus could not take,
 * replayed newest-first when it is back. `FileSpool` (Node, `@signalbus/client/file-spool`) keeps
 * them as JSON files in a directory, in the format the Python client uses too; `MemorySpool`
 * keeps them in memory (browsers, tests). Both cap size (default 100 MB) and age (default 24 h),
 * evicting oldest first. A scheduled send keeps its `deliver_at` (see `replayRequest`).
 */

import { SpoolFull } from "./errors.js";
import type { Logger } from "./logger.js";

export const DEFAULT_MAX_BYTES = 100 * 1024 * 1024;
export const DEFAULT_MAX_AGE_MS = 24 * 3600 * 1000;
/** @deprecated use DEFAULT_MAX_AGE_MS (timeouts and ages are milliseconds in this client). */
export const DEFAULT_MAX_AGE_SECONDS = DEFAULT_MAX_AGE_MS / 1000;

/** A spooled send's request: the send fields, always with a dedupe_key, without ttl_seconds. */
export interface SpoolRequest {
  to: string;
  type: string;
  payload: unknown;
  delivery_class?: string;
  correlation_id?: string;
  dedupe_key: string;
  /** A scheduled send's instant (CONTRACT §16): a `deliver_after_seconds` becomes one when it is spooled. */
  deliver_at?: string;
  [key: string]: unknown;
}

export interface SpoolEntry {
  name: string;
  size: number;
  /** RFC 3339, millisecond precision. */
  spooledAt: string;
  identity: string | null;
  /** The send's TTL when it was spooled. */
  ttlSeconds: number;
  reason: string;
  request: SpoolRequest;
}

export interface PutOptions {
  ttlSeconds: number;
  identity: string | null;
  reason: string;
  /** Milliseconds since the epoch (default: now). */
  now?: number;
}

export interface SpoolStore {
  put(request: SpoolRequest, options: PutOptions): Promise<SpoolEntry>;
  /** Every entry, newest first, after evicting those past the age cap. */
  entries(): Promise<SpoolEntry[]>;
  delete(name: string): Promise<void>;
  count(): Promise<number>;
  totalBytes(): Promise<number>;
}

export interface SpoolLimits {
  maxBytes?: number;
  /** Entries older than this are evicted (default 24 h). */
  maxAgeMs?: number;
  /** @deprecated use `maxAgeMs`. */
  maxAgeSeconds?: number;
  logger?: Logger;
}

export const dedupeKeyOf = (e: SpoolEntry): string => e.request.dedupe_key;

/** A scheduled send due sooner than this is replayed at once, without its deliver_at (which the bus would refuse once it has passed). */
const SCHEDULE_MARGIN_MS = 1000;

/** When a scheduled entry is due (its request's `deliver_at`, ms since the epoch); undefined when it is not scheduled or the field is unreadable. */
function dueAt(e: SpoolEntry): number | undefined {
  const at = e.request.deliver_at;
  if (typeof at !== "string") return undefined;
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Whole seconds of TTL left (<= 0: expired while spooled). A scheduled send's TTL runs from its `deliver_at` (CONTRACT §16: `expires_at = deliver_at + ttl`). */
export function remainingTtl(e: SpoolEntry, now = Date.now()): number {
  const start = Math.max(Date.parse(e.spooledAt), dueAt(e) ?? -Infinity);
  const age = Math.max(0, now - start) / 1000;
  return Math.trunc(e.ttlSeconds - age);
}

/** What a replay sends: the request with the TTL left, and a scheduled send's `deliver_at` only while it is still ahead — once due it is sent at once. */
export function replayRequest(e: SpoolEntry, now = Date.now()): Record<string, unknown> {
  const request: Record<string, unknown> = { ...e.request, ttl_seconds: remainingTtl(e, now) };
  const due = dueAt(e);
  if (due !== undefined && due - now < SCHEDULE_MARGIN_MS) delete request.deliver_at;
  return request;
}

let seq = 0;

/** `send-<ISO 8601 UTC with ':' as '-'>-<seq>-<random>.json`: names sort by spool time. */
export function entryName(now: number): { iso: string; name: string } {
  const iso = new Date(now).toISOString();
  const rand = Array.from({ length: 8 }, () => Math.floor(Math.random() * 16).toString(16)).join("");
  seq = (seq + 1) % 1_000_000;
  return { iso, name: `send-${iso.replace(/:/g, "-")}-${String(seq).padStart(6, "0")}-${rand}.json` };
}

/** The time a name says it was spooled, in ms, or undefined. */
export function nameTime(name: string): number | undefined {
  const m = /^send-(\d{4}-\d{2}-\d{2}T\d{2})-(\d{2})-(\d{2}\.\d{3}Z)-/.exec(name);
  if (!m) return undefined;
  const t = Date.parse(`${m[1]}:${m[2]}:${m[3]}`);
  return Number.isNaN(t) ? undefined : t;
}

/** The bytes of one entry file (the shared format, version 1). */
export function encodeEntry(request: SpoolRequest, o: PutOptions, iso: string): string {
  return JSON.stringify({
    version: 1,
    kind: "send",
    spooled_at: iso,
    identity: o.identity,
    ttl_seconds: Math.trunc(o.ttlSeconds),
    reason: o.reason,
    request,
  });
}

export function decodeEntry(name: string, text: string): SpoolEntry {
  const doc = JSON.parse(text) as Record<string, unknown>;
  if (doc.version !== 1 || doc.kind !== "send") throw new Error(`unsupported spool entry version/kind ${String(doc.version)}/${String(doc.kind)}`);
  const request = doc.request as SpoolRequest | undefined;
  if (!request || typeof request !== "object" || !request.dedupe_key) throw new Error("the entry's request has no dedupe_key");
  if (typeof doc.spooled_at !== "string" || Number.isNaN(Date.parse(doc.spooled_at))) throw new Error("the entry has no spooled_at");
  return {
    name,
    size: byteLength(text),
    spooledAt: doc.spooled_at,
    identity: (doc.identity as string | null) ?? null,
    ttlSeconds: Number(doc.ttl_seconds),
    reason: String(doc.reason ?? ""),
    request,
  };
}

export function byteLength(text: string): number {
  return new TextEncoder().encode(text).length;
}

export function checkLimits(limits: SpoolLimits): { maxBytes: number; maxAgeMs: number } {
  const maxBytes = limits.maxBytes ?? DEFAULT_MAX_BYTES;
  const maxAgeMs = limits.maxAgeMs ?? (limits.maxAgeSeconds !== undefined ? limits.maxAgeSeconds * 1000 : DEFAULT_MAX_AGE_MS);
  if (!(maxBytes > 0)) throw new RangeError("spool maxBytes must be positive");
  if (!(maxAgeMs > 0)) throw new RangeError("spool maxAgeMs must be positive");
  return { maxBytes, maxAgeMs };
}

export function tooBig(size: number, maxBytes: number, dedupeKey: string): SpoolFull {
  return new SpoolFull(`the send is ${size} bytes encoded, more than the whole spool (${maxBytes} bytes); nothing was spooled`, {
    details: { dedupe_key: dedupeKey },
  });
}

/** A spool in memory: lost with the process. For browsers (or pass your own SpoolStore). */
export class MemorySpool implements SpoolStore {
  readonly maxBytes: number;
  readonly maxAgeMs: number;
  private readonly items = new Map<string, { entry: SpoolEntry; at: number }>();
  private readonly logger: Logger | undefined;

  constructor(limits: SpoolLimits = {}) {
    ({ maxBytes: this.maxBytes, maxAgeMs: this.maxAgeMs } = checkLimits(limits));
    this.logger = limits.logger;
  }

  /** @deprecated use `maxAgeMs`. */
  get maxAgeSeconds(): number {
    return this.maxAgeMs / 1000;
  }

  private evict(now: number, roomFor: number): void {
    const sorted = [...this.items.entries()].sort((a, b) => a[1].at - b[1].at || (a[0] < b[0] ? -1 : 1));
    let total = 0;
    const kept: [string, number][] = [];
    for (const [name, { entry, at }] of sorted) {
      if (now - at > this.maxAgeMs) {
        this.logger?.warn(`spool entry ${name} is older than ${this.maxAgeMs / 1000}s: evicted, never replayed`);
        this.items.delete(name);
      } else {
        kept.push([name, entry.size]);
        total += entry.size;
      }
    }
    for (const [name, size] of kept) {
      if (total + roomFor <= this.maxBytes) break;
      this.logger?.warn(`spool is over ${this.maxBytes} bytes: evicted its oldest entry ${name}, never replayed`);
      this.items.delete(name);
      total -= size;
    }
  }

  async put(request: SpoolRequest, o: PutOptions): Promise<SpoolEntry> {
    if (!request.dedupe_key) throw new TypeError("a spooled send needs a dedupe_key");
    const now = o.now ?? Date.now();
    const { iso, name } = entryName(now);
    const text = encodeEntry(request, o, iso);
    const size = byteLength(text);
    if (size > this.maxBytes) throw tooBig(size, this.maxBytes, request.dedupe_key);
    this.evict(now, size);
    const entry = decodeEntry(name, text);
    this.items.set(name, { entry, at: now });
    return entry;
  }

  async entries(): Promise<SpoolEntry[]> {
    this.evict(Date.now(), 0);
    return [...this.items.values()]
      .sort((a, b) => b.at - a.at || (a.entry.name < b.entry.name ? 1 : -1))
      .map((v) => v.entry);
  }

  async delete(name: string): Promise<void> {
    this.items.delete(name);
  }

  async count(): Promise<number> {
    return this.items.size;
  }

  async totalBytes(): Promise<number> {
    let t = 0;
    for (const v of this.items.values()) t += v.entry.size;
    return t;
  }
}
