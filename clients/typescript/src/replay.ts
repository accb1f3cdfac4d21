/**
 * The spool's traffic: a send the bus could not take goes in (`spoolSend`) and the replay takes
 * it out — newest first, rate-limited, each entry with the TTL it has left and its dedupe_key,
 * deleted only once the bus answered it for good (accepted, or a definitive 4xx).
 *
 * Deliberately below the facade: it sends through the session engine (`Session.transmitSend`)
 * and never imports `client.ts`. A pass stops at the first answer that may change later (503,
 * 429, 500, a timeout, the bus unreachable): older entries stay untouched until the next pass.
 */

import { DEFINITIVE_CODES, ProtocolError, RateLimited, SignalbusError, SpoolExpired } from "./errors.js";
import type { Logger } from "./logger.js";
import type { Session } from "./session.js";
import { dedupeKeyOf, remainingTtl, replayRequest, type SpoolEntry, type SpoolRequest, type SpoolStore } from "./spool.js";
import { defaultTtl, parseSendResult, type SendResult, type Spooled } from "./types.js";

export type ReplayOutcome = SendResult | SignalbusError;
export type ReplayCallback = (entry: SpoolEntry, outcome: ReplayOutcome) => void | Promise<void>;

export interface ReplayReport {
  replayed: SendResult[];
  rejected: SignalbusError[];
  expired: string[];
  kept: number;
  stoppedBy: SignalbusError | null;
}

export interface ReplayOptions {
  /** Spool replays per second. */
  replayRate: number;
  /** How often the spool is retried while not empty (also at each new session). */
  replayIntervalMs: number;
  onReplay: ReplayCallback | undefined;
  logger: Logger;
}

/** Writes sends to the spool and replays it: at each new session (`wake`), every
 * `replayIntervalMs` while it is not empty, and when a caller asks (`replaySpool`). */
export class Replayer {
  private readonly logger: Logger;
  private readonly onReplay: ReplayCallback | undefined;
  private replayWake: (() => void) | undefined;
  private replayRequested = false;
  private replayRunning: Promise<ReplayReport> | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly spoolStore: Promise<SpoolStore>,
    private readonly session: Session,
    private readonly o: ReplayOptions,
  ) {
    this.logger = o.logger;
    this.onReplay = o.onReplay;
  }

  start(): void {
    this.loop ??= this.replayLoop();
  }

  /** Ends the loop (the session is closing already) and waits for it. */
  async stop(): Promise<void> {
    this.replayWake?.();
    await this.loop?.catch(() => {});
  }

  /** Spool a send the bus could not take; what `send` resolves to for it. */
  async spoolSend(request: Record<string, unknown>, err: SignalbusError): Promise<Spooled> {
    const store = await this.spoolStore;
    const { ttl_seconds, deliver_after_seconds, ...rest } = request;
    const ttl = (ttl_seconds as number | undefined) ?? defaultTtl(String(request.type));
    // a delay from now, kept as the instant it names (the replay comes later)
    if (deliver_after_seconds !== undefined) rest.deliver_at = new Date(Date.now() + Number(deliver_after_seconds) * 1000).toISOString();
    const entry = await store.put(rest as SpoolRequest, { ttlSeconds: ttl, identity: this.session.identity ?? null, reason: `${err.code}: ${err.detail}` });
    this.logger.debug(`the bus could not take the send (${err.code}): spooled as ${entry.name}, replayed when it is back`);
    this.wake();
    return { spooled: true, signalId: null, dedupeKey: entry.request.dedupe_key, entry: entry.name, reason: entry.reason, spooledAt: entry.spooledAt, ttlSeconds: entry.ttlSeconds };
  }

  /** A pass now (a new session, a new entry). */
  wake(): void {
    this.replayRequested = true;
    this.replayWake?.();
  }

  private async replayLoop(): Promise<void> {
    const store = await this.spoolStore;
    while (!this.session.closing) {
      if (!this.replayRequested) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, this.o.replayIntervalMs);
          function done(): void {
            clearTimeout(timer);
            resolve();
          }
          this.replayWake = done;
        });
        this.replayWake = undefined;
      }
      this.replayRequested = false;
      if (this.session.closing) return;
      try {
        if ((await store.count()) === 0) continue;
        const report = await this.replaySpool();
        const wait = report.stoppedBy instanceof RateLimited ? report.stoppedBy.retryAfterMs : undefined;
        if (wait) await this.session.sleep(wait);
      } catch (e) {
        this.logger.error(`spool replay failed; retrying in ${this.o.replayIntervalMs} ms`, e);
      }
    }
  }

  private async report(entry: SpoolEntry, outcome: ReplayOutcome): Promise<void> {
    if (!this.onReplay) return;
    try {
      await this.onReplay(entry, outcome);
    } catch (e) {
      this.logger.error(`the onReplay callback failed for ${entry.name}`, e);
    }
  }

  /**
   * Replay the spool once, newest first, at most `replayRate` sends per second. An entry is
   * deleted only once the bus answered it: accepted, or refused for good (a 4xx such as
   * `recipient_unavailable`, reported to `onReplay` and logged). It is kept when the bus is
   * unreachable, times out, or answers 503, 429 or 500 — the pass stops there; the next one
   * (every `replayIntervalMs`, and at each new session) goes on. An entry whose TTL ran out is
   * dropped. Each replay carries the entry's dedupe_key and the TTL it has left.
   */
  replaySpool(): Promise<ReplayReport> {
    const run = (this.replayRunning ?? Promise.resolve()).then(() => this.replayOnce());
    this.replayRunning = run.catch(() => ({ replayed: [], rejected: [], expired: [], kept: 0, stoppedBy: null }));
    return run;
  }

  private async replayOnce(): Promise<ReplayReport> {
    const report: ReplayReport = { replayed: [], rejected: [], expired: [], kept: 0, stoppedBy: null };
    const store = await this.spoolStore;
    const entries = await store.entries();
    const gap = 1000 / this.o.replayRate;
    let last = 0;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as SpoolEntry;
      const key = dedupeKeyOf(entry);
      if (this.session.closing) {
        report.kept = entries.length - i;
        break;
      }
      if (entry.identity && this.session.identity && entry.identity !== this.session.identity) {
        this.logger.warn(`spool entry ${entry.name} was spooled by ${entry.identity}, not ${this.session.identity}: left for that identity`);
        report.kept += 1;
        continue;
      }
      const now = Date.now();
      const remaining = remainingTtl(entry, now);
      if (remaining < 1) {
        await store.delete(entry.name);
        this.logger.warn(`spooled send ${entry.name} (dedupe_key ${key}) expired in the spool: dropped`);
        report.expired.push(key);
        await this.report(entry, new SpoolExpired(`spooled send ${key} expired before the bus was back`, { details: { dedupe_key: key } }));
        continue;
      }
      const wait = last + gap - Date.now();
      if (wait > 0) await this.session.sleep(wait);
      last = Date.now();
      let result: SendResult;
      try {
        result = parseSendResult(await this.session.transmitSend(replayRequest(entry, now)), key);
      } catch (e) {
        const err = e instanceof SignalbusError ? e : new ProtocolError(String((e as Error)?.message ?? e), { cause: e });
        if (DEFINITIVE_CODES.has(err.code)) {
          await store.delete(entry.name);
          this.logger.warn(`the bus refused spooled send ${entry.name} (dedupe_key ${key}) for good: ${err.message}`);
          report.rejected.push(err);
          await this.report(entry, err);
          continue;
        }
        report.kept = entries.length - i;
        report.stoppedBy = err;
        this.logger.debug(`spool replay paused, ${report.kept} entries kept: ${err.message}`);
        break;
      }
      await store.delete(entry.name);
      this.logger.debug(`replayed spooled send ${key} as signal ${result.signalId} (${result.publishPath})`);
      report.replayed.push(result);
      await this.report(entry, result);
    }
    return report;
  }
}

