/**
 * The agent's `Client`, a thin facade: it shapes each call (send, ask, recall, ack, inbox, facts,
 * groups, ...) and hands it to the engine below — the session (`session.ts`: transport,
 * supervisor; `delivery.ts`: dedupe, dispatch, acks), the HTTP API (`http.ts`), the spool replay
 * (`replay.ts`) and the directives (`directives.ts`: calls, `runDirective`, the worker).
 *
 * Deliberately no protocol here: the engine modules never import this one, so each layer is read
 * and tested alone. The admin calls are `admin.ts`.
 */

import { Directives, type DirectiveHandler, type ProgressReport, type RunDirectiveOptions } from "./directives.js";
import { AskTimeout, ClientClosed, NOTHING_SENT, TransportError, Unavailable, UsageError, errorFromBody, forSend } from "./errors.js";
import { HttpApi, type FetchLike } from "./http.js";
import { randomId } from "./ids.js";
import { consoleLogger, type Logger } from "./logger.js";
import { Replayer, type ReplayCallback, type ReplayReport } from "./replay.js";
import type { SignalHandler } from "./delivery.js";
import { Session, type ConnectionEvent, type WebSocketConstructor } from "./session.js";
import { DEFAULT_MAX_AGE_MS, DEFAULT_MAX_BYTES, type SpoolStore } from "./spool.js";
import {
  defaultClass,
  parseAgent,
  parseFanout,
  parseGroup,
  parseRecallMany,
  parseSendResult,
  parseSignal,
  parseSignalRow,
  type Agent,
  type CreateDirectiveOptions,
  type Directive,
  type DirectivePage,
  type FactPage,
  type FanoutResult,
  type Group,
    type Json,
  type ListDirectivesOptions,
  type RecallEntry,
  type PluginState,
  type RecallOutcome,
  type SendAnswer,
  type SendOptions,
  type SendOutcome,
  type SessionKind,
  type Signal,
  type SignalPage,
  type Welcome,
} from "./types.js";

export type { ReplayCallback, ReplayOutcome, ReplayReport } from "./replay.js";
export type { SignalHandler } from "./delivery.js";
export type { DirectiveHandler, ProgressReport, ProgressReporter, RunDirectiveOptions } from "./directives.js";
export type { ConnectionEvent, WebSocketConstructor, WebSocketLike } from "./session.js";

export interface ClientOptions {
  /** `daemon`, `shim` or `interactive` (the bus's default). */
  kind?: SessionKind;
  /** Called once per signal (redeliveries deduped by id); acked after it returns without throwing when `autoAck`. Without it, read signals with `receive()`. */
  onSignal?: SignalHandler;
  autoAck?: boolean;
  /**
   * How many `onSignal` calls may run at once (default 1). With 1, signals are handled one after
   * the other in the order they arrived; with more, they start in that order but may finish (and
   * be acked) in any order — a slow handler no longer holds back the next signal. The same bound
   * applies, separately, to `onDirective` handlers.
   */
  maxConcurrentHandlers?: number;
  /** Node: a directory for the offline buffer (a `FileSpool`). */
  spoolDir?: string;
  /** Any SpoolStore (e.g. `MemorySpool` in browsers). */
  spool?: SpoolStore;
  spoolMaxBytes?: number;
  /** Spool entries older than this are evicted (default 86 400 000: 24 h). */
  spoolMaxAgeMs?: number;
  /** @deprecated use `spoolMaxAgeMs` (every duration option of this client is in milliseconds). */
  spoolMaxAgeSeconds?: number;
  /** Spool replays per second (default 20). */
  replayRate?: number;
  /** How often the spool is retried while not empty (default 5000 ms; also at each new session). */
  replayIntervalMs?: number;
  onReplay?: ReplayCallback;
  /** Your identity, for spool entries written before the first session's welcome. */
  identity?: string;
  requestTimeoutMs?: number;
  connectTimeoutMs?: number;
  reconnectInitialMs?: number;
  reconnectMaxMs?: number;
  /** How many signal ids are remembered to drop redeliveries (default 10,000). */
  dedupeWindow?: number;
  logger?: Logger;
  /** A WebSocket constructor (default: the global one where present, with the token in `?token=`; else `ws` with an Authorization header). */
  WebSocket?: WebSocketConstructor;
  fetch?: FetchLike;
}


function clean(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

/** CONTRACT §16: the longest an inbox call may wait. */
const MAX_INBOX_WAIT_MS = 60000;

/**
 * The wire fields of a scheduled send (CONTRACT §16), checked before anything is sent: at most one
 * of `deliverAfterMs` and `deliverAt`, on an async send only, a positive delay (rounded up to whole
 * seconds), a valid instant. Whether `deliverAt` lies in the future is the bus's to say (its clock
 * decides: `InvalidRequest`).
 */
function scheduleFields(type: string, options: SendOptions): Record<string, unknown> {
  const { deliverAfterMs: after, deliverAt: at } = options;
  if (after === undefined && at === undefined) return {};
  if (after !== undefined && at !== undefined) throw new UsageError("a send takes {deliverAfterMs} or {deliverAt}, not both");
  if ((options.deliveryClass ?? defaultClass(type)) === "sync") {
    throw new UsageError(`only an async send can be scheduled: ${type} is sent sync (pass deliveryClass: "async", or send it without deliverAfterMs/deliverAt)`);
  }
  if (after !== undefined) {
    if (!(typeof after === "number" && Number.isFinite(after) && after > 0)) {
      throw new UsageError(`deliverAfterMs must be a positive number of milliseconds, got ${String(after)}`);
    }
    return { deliver_after_seconds: Math.ceil(after / 1000) };
  }
  const instant = at instanceof Date ? at : typeof at === "string" ? new Date(at) : undefined;
  if (!instant || Number.isNaN(instant.getTime())) {
    throw new UsageError(`deliverAt must be a Date or an RFC 3339 string, got ${JSON.stringify(at)}`);
  }
  return { deliver_at: instant.toISOString() };
}

const enc = encodeURIComponent;
/** A group's name in a path: without its `@` (`"@reviewers"` and `"reviewers"` name the same group). */
const groupPath = (name: string): string => enc(name.replace(/^@/, ""));

/** `inbox` and `drain` options: at most `limit` signals; `waitMs` (≤ 60000) makes the call a long poll. */
export interface InboxOptions {
  limit?: number;
  waitMs?: number;
}

/** What `recallMany` recalls: every signal of one group send, or every signal you sent with one correlation id. */
export type RecallManyTarget = { fanoutId: string; correlationId?: undefined } | { correlationId: string; fanoutId?: undefined };

/**
 * An agent's client. `await client.connect()` opens a WebSocket session and keeps it open: it
 * reconnects with jittered exponential backoff, heartbeats on the welcome's interval, hands each
 * pushed signal once to `onSignal` (redeliveries are deduped by id in a bounded window) and acks
 * it after the handler returns (`autoAck`). Calls go over the session when it is open and over
 * HTTP otherwise. With a spool, a send the bus cannot take (unreachable, timeout, 503) is kept
 * and replayed newest-first once the bus is back; `send` then resolves to `Spooled`.
 */
export class Client {
  readonly url: string;

  private readonly api: HttpApi;
  private readonly session: Session;
  private readonly replayer: Replayer | undefined;
  private readonly directives: Directives;
  private readonly spoolStore: Promise<SpoolStore> | undefined;
  private readonly connectTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly listeners = new Map<ConnectionEvent, Set<() => void>>();

  constructor(url: string, token: string, options: ClientOptions = {}) {
    const requestTimeoutMs = options.requestTimeoutMs ?? 15000;
    this.api = new HttpApi(url, token, requestTimeoutMs, options.fetch);
    this.url = this.api.url;
    const logger = options.logger ?? consoleLogger;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10000;
    this.requestTimeoutMs = requestTimeoutMs;
    const replayRate = options.replayRate ?? 20;
    if (!(replayRate > 0)) throw new RangeError("replayRate must be positive (sends per second)");
    this.session = new Session(this.api, token, {
      kind: options.kind,
      handler: options.onSignal,
      identity: options.identity,
      autoAck: options.autoAck ?? true,
      requestTimeoutMs,
      connectTimeoutMs: this.connectTimeoutMs,
      reconnectInitialMs: options.reconnectInitialMs ?? 500,
      reconnectMaxMs: options.reconnectMaxMs ?? 30000,
      dedupeWindow: Math.max(1, options.dedupeWindow ?? 10000),
      maxConcurrentHandlers: options.maxConcurrentHandlers ?? 1,
      logger,
      WebSocket: options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket,
    });
    this.directives = new Directives(this.api, this.session, { requestTimeoutMs, maxConcurrent: options.maxConcurrentHandlers ?? 1, logger });
    const limits = {
      maxBytes: options.spoolMaxBytes ?? DEFAULT_MAX_BYTES,
      maxAgeMs: options.spoolMaxAgeMs ?? (options.spoolMaxAgeSeconds !== undefined ? options.spoolMaxAgeSeconds * 1000 : DEFAULT_MAX_AGE_MS),
      logger,
    };
    if (options.spool) this.spoolStore = Promise.resolve(options.spool);
    else if (options.spoolDir) {
      const dir = options.spoolDir;
      this.spoolStore = import("./file-spool.js").then((m) => new m.FileSpool(dir, limits));
    }
    if (this.spoolStore) {
      const replayer = new Replayer(this.spoolStore, this.session, {
        replayRate,
        replayIntervalMs: options.replayIntervalMs ?? 5000,
        onReplay: options.onReplay,
        logger,
      });
      this.session.onOpen = () => replayer.wake();
      this.replayer = replayer;
    }
    this.session.onEvent = (event) => {
      for (const listener of [...(this.listeners.get(event) ?? [])]) {
        try {
          const out = listener() as unknown;
          if (out instanceof Promise) out.catch((e) => logger.error(`a "${event}" listener failed`, e));
        } catch (e) {
          logger.error(`a "${event}" listener failed`, e);
        }
      }
    };
  }

  /**
   * Listen to a connection event, EventEmitter-style: `connected` (the first session opened),
   * `disconnected` (an open session was lost; the client reconnects by itself), `reconnected` (a
   * session opened again after a loss), `closed` (the client stopped for good: `close()`, or the
   * bus refused the token). They come in that order; a listener that throws is logged, never fatal.
   */
  on(event: ConnectionEvent, listener: () => void | Promise<void>): this {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as () => void);
    return this;
  }

  /** Stop listening (`on`'s listener). */
  off(event: ConnectionEvent, listener: () => void | Promise<void>): this {
    this.listeners.get(event)?.delete(listener as () => void);
    return this;
  }

  /** `on`, for one event only. */
  once(event: ConnectionEvent, listener: () => void | Promise<void>): this {
    const wrapped = (): void | Promise<void> => {
      this.off(event, wrapped);
      return listener();
    };
    return this.on(event, wrapped);
  }

  get welcome(): Welcome | undefined {
    return this.session.welcome;
  }

  get sessionsOpened(): number {
    return this.session.sessionsOpened;
  }

  get duplicatesDropped(): number {
    return this.session.delivery.duplicatesDropped;
  }

  get identity(): string | undefined {
    return this.session.identity;
  }

  get connected(): boolean {
    return this.session.connected;
  }

  /** The spool, when the client has one. */
  async spool(): Promise<SpoolStore | undefined> {
    return this.spoolStore;
  }

  // -- lifecycle --------------------------------------------------------------------------

  /** Start the session supervisor and the spool replay in the background; do not wait. */
  start(): void {
    if (this.session.closing) throw new ClientClosed("the client is closed");
    if (this.session.started) return;
    this.session.start();
    this.replayer?.start();
  }

  /**
   * Start and wait for the first session's welcome. Rejects with the fatal error (bad token, ...)
   * if the bus refuses the session, or `RequestTimeout` after `timeoutMs` (default
   * connectTimeoutMs) — the client keeps trying in the background until `close()`.
   */
  async connect(timeoutMs?: number): Promise<Welcome> {
    this.start();
    return this.waitConnected(timeoutMs ?? this.connectTimeoutMs);
  }

  waitConnected(timeoutMs?: number): Promise<Welcome> {
    return this.session.waitConnected(timeoutMs);
  }

  waitDisconnected(timeoutMs?: number): Promise<void> {
    return this.session.waitDisconnected(timeoutMs);
  }

  /** Flush pending acks, close the session (1000) and stop every background task. */
  async close(): Promise<void> {
    if (this.session.closing) return;
    await this.session.beginClose();
    await this.replayer?.stop();
    await this.session.finishClose();
  }

  /** Abort the current WebSocket without a close handshake, as a network failure would; the client reconnects. */
  dropConnection(): void {
    this.session.dropConnection();
  }

  /**
   * The next pushed signal (when there is no `onSignal` handler). Ack it with `ack`. Rejects with
   * `RequestTimeout` (name `TimeoutError`) when none came within `timeoutMs`, and with `UsageError`
   * on a client with an `onSignal` handler.
   */
  receive(timeoutMs?: number): Promise<Signal> {
    return this.session.delivery.receive(timeoutMs);
  }

  /**
   * Every pushed signal, as they come: `for await (const sig of client.signals()) { ... }` (when
   * there is no `onSignal` handler; ack each with `ack`, as after `receive`). Ends when the client
   * closes. Throws `UsageError` on a client with an `onSignal` handler.
   */
  async *signals(): AsyncGenerator<Signal, void, undefined> {
    for (;;) {
      let sig: Signal;
      try {
        sig = await this.session.delivery.receive();
      } catch (e) {
        if (e instanceof ClientClosed) return;
        throw e;
      }
      yield sig;
    }
  }

  /**
   * Replay the spool once, newest first, at most `replayRate` sends per second (see
   * `Replayer.replaySpool`); an entry is deleted once the bus answered it for good.
   */
  replaySpool(): Promise<ReplayReport> {
    if (!this.replayer) return Promise.resolve({ replayed: [], rejected: [], expired: [], kept: 0, stoppedBy: null });
    return this.replayer.replaySpool();
  }

  // -- calls ------------------------------------------------------------------------------

  /**
   * Send a signal (CONTRACT §4). Every send carries a dedupe_key (a fresh one when none is
   * given), so resending it can never create a second signal. Resolves to a `SendResult`, or to
   * `Spooled` when the bus was unreachable or unavailable and the client has a spool
   * (`{spool: false}` rejects instead). A sync send (`deliveryClass: "sync"`, or a type that is
   * sync by default) is never spooled — its point is an available recipient now — so it rejects
   * at once (a bus that could not be reached: "nothing was sent"). Rejects with the typed error otherwise:
   * `RecipientUnavailable` for a bounced sync send (`recipientState`, `signalId`), ...
   *
   * To a group (`to: "@reviewers"`, CONTRACT §15) it resolves to a `FanoutResult`: one signal per
   * member but you, each member's outcome in `results` (a member's error there is not thrown);
   * `UnknownGroup` when there is no such group. A group send is never spooled. The types say
   * which answer comes: `FanoutResult` for a `@…` literal, `SendOutcome` for another, either for a
   * plain `string` (tell them apart with `isFanout`).
   *
   * Scheduled (CONTRACT §16): with `deliverAfterMs` (rounded up to whole seconds; 30 days at most)
   * or `deliverAt` (a `Date` or an RFC 3339 string, in the future) an async send is held by the
   * bus — invisible to its recipient — until then, and answered `queued` with `publishPath:
   * "scheduled"` and `deliverAt`; it can be recalled until delivered, and its TTL counts from
   * `deliverAt`. Both at once, on a sync send, or a delay that is not positive: `UsageError`
   * before anything is sent; a `deliverAt` in the past or too far ahead: the bus's
   * `InvalidRequest`. Spooled like any async send, with its `deliver_at` (a replay after it sends
   * it at once).
   */
  async send<To extends string>(to: To, type: string, payload: Json = {}, options: SendOptions = {}): Promise<SendAnswer<To>> {
    if (typeof to === "string" && to.startsWith("@")) return (await this.sendToGroup(to, type, payload, options)) as SendAnswer<To>;
    return (await this.sendOne(to, type, payload, options)) as SendAnswer<To>;
  }

  private async sendToGroup(to: string, type: string, payload: Json, options: SendOptions): Promise<FanoutResult> {
    const schedule = scheduleFields(type, options);
    const key = options.dedupeKey || `sbc-${randomId()}`;
    const request = clean({
      to,
      type,
      payload: payload ?? {},
      delivery_class: options.deliveryClass,
      ttl_seconds: options.ttlSeconds,
      correlation_id: options.correlationId,
      dedupe_key: key,
      ...schedule,
    });
    try {
      return parseFanout(await this.session.transmitSend(request), key);
    } catch (e) {
      throw forSend(e); // never spooled: each member's outcome is the answer
    }
  }

  private async sendOne(to: string, type: string, payload: Json, options: SendOptions): Promise<SendOutcome> {
    const schedule = scheduleFields(type, options);
    const key = options.dedupeKey || `sbc-${randomId()}`;
    const request = clean({
      to,
      type,
      payload: payload ?? {},
      delivery_class: options.deliveryClass,
      ttl_seconds: options.ttlSeconds,
      correlation_id: options.correlationId,
      dedupe_key: key,
      ...schedule,
    });
    try {
      return parseSendResult(await this.session.transmitSend(request), key);
    } catch (e) {
      forSend(e); // the hint of a send: retry with the same dedupe_key
      const sync = (options.deliveryClass ?? defaultClass(type)) === "sync";
      if ((e instanceof TransportError || e instanceof Unavailable) && this.replayer && options.spool !== false && !sync) {
        return this.replayer.spoolSend(request, e);
      }
      throw e;
    }
  }

  /** Answer `signal`: send to its sender with its correlationId (an `ask` waiting there gets it). */
  reply(signal: Signal, type: string, payload: Json = {}, options: SendOptions = {}): Promise<SendOutcome> {
    return this.sendOne(signal.from, type, payload, { ...options, correlationId: signal.correlationId ?? undefined });
  }

  /**
   * Send with a fresh correlationId and resolve to the first signal that comes back carrying it
   * (acked when `autoAck`). Needs an open session, for the reply: without one (never connected,
   * or lost) it rejects with `TransportError` at once and sends nothing. Never spooled: the
   * send's typed error rejects at once (`RecipientUnavailable`, `TransportError`, ...).
   * `AskTimeout` (with `signalId`) when no reply comes within `timeoutMs`. One recipient only: a
   * group (`@…`) is a `UsageError` (send to it, and read the replies yourself).
   */
  async ask(to: string, type: string, payload: Json = {}, timeoutMs = 30000, options: SendOptions = {}): Promise<Signal> {
    if (!(typeof timeoutMs === "number" && timeoutMs > 0)) {
      throw new UsageError(`ask timeoutMs must be a positive number of milliseconds, got ${String(timeoutMs)}`);
    }
    if (typeof to === "string" && to.startsWith("@")) {
      throw new UsageError(`ask takes one recipient, not a group (${to}): send to the group and read the replies (same correlationId) yourself`);
    }
    if (!this.session.connected) {
      throw new TransportError(
        `ask ${type} to ${to}: no open session with ${this.url}, and the reply could only come over one (call connect() first; a lost session comes back by itself: waitConnected())`,
        { hint: NOTHING_SENT },
      );
    }
    const cid = randomId().replace(/-/g, "");
    const reply = this.session.delivery.expectReply(cid);
    const started = Date.now();
    try {
      const sent = await this.sendOne(to, type, payload, { ...options, correlationId: cid, spool: false });
      const left = Math.max(0, timeoutMs - (Date.now() - started));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new AskTimeout(`no reply to ${type} sent to ${to} within ${timeoutMs} ms`, {
                details: { signal_id: sent.spooled ? null : sent.signalId, correlation_id: cid, dedupe_key: sent.dedupeKey },
              }),
            ),
          left,
        );
      });
      try {
        return await Promise.race([reply, timeout]);
      } finally {
        clearTimeout(timer);
      }
    } finally {
      this.session.delivery.forgetReply(cid);
    }
  }

  /** Recall a signal you sent (CONTRACT §6). */
  async recall(signalId: string): Promise<{ outcome: RecallOutcome }> {
    const data = await this.session.call(
      { op: "recall", signal_id: signalId },
      (result) => result,
      () => this.api.request("POST", `/v1/signals/${enc(signalId)}/recall`, { okStatuses: [404] }),
    );
    if (typeof data?.outcome !== "string") throw errorFromBody(data, 404);
    return { outcome: data.outcome as RecallOutcome };
  }

  /**
   * Recall, in one call, every signal of one group send (`{fanoutId}`) or every signal you sent
   * carrying a correlation id (`{correlationId}`): one entry per signal, each outcome decided as a
   * single `recall`'s. Signals that are not yours, or an unknown id, answer `[]`.
   */
  async recallMany(target: RecallManyTarget): Promise<RecallEntry[]> {
    const t = (target ?? {}) as { fanoutId?: unknown; correlationId?: unknown };
    const given = [t.fanoutId, t.correlationId].filter((v) => v !== undefined);
    if (given.length !== 1 || typeof given[0] !== "string") {
      throw new UsageError("recallMany takes exactly one of {fanoutId} or {correlationId}, a string");
    }
    const by = t.fanoutId !== undefined ? { fanout_id: t.fanoutId } : { correlation_id: t.correlationId };
    const data = await this.session.call(
      { op: "recall", ...by },
      (result) => result,
      () => this.api.request("POST", "/v1/signals/recall", { body: by }),
    );
    return parseRecallMany(data);
  }

  /** Ack delivered signals (or ids); resolves to how many the bus took. */
  async ack(...items: (Signal | string | (Signal | string)[])[]): Promise<number> {
    const ids = items.flat().map((s) => {
      if (typeof s === "string") return s;
      if (s && typeof s === "object" && typeof (s as Signal).id === "string") return s.id;
      throw new TypeError(`ack takes signals or signal ids (strings), got ${s === null ? "null" : typeof s}`);
    });
    return this.session.delivery.ack(ids);
  }

  /**
   * Pending signals for you, in drain order; delivers nothing. With `waitMs` (0 … 60000, rounded
   * up to whole seconds) the bus answers as soon as something is pending, or after that long with
   * `[]` — a long poll, over HTTP, with or without a session. `UsageError` for a `waitMs` outside
   * 0 … 60000.
   */
  inbox(options: InboxOptions = {}): Promise<Signal[]> {
    return this.inboxCall(false, options);
  }

  /** Take pending signals (`GET /v1/inbox?drain=true`): delivered to you, never pushed later. `waitMs` as `inbox`'s: what it answers is delivered too. */
  drain(options: InboxOptions = {}): Promise<Signal[]> {
    return this.inboxCall(true, options);
  }

  private async inboxCall(drain: boolean, options: InboxOptions): Promise<Signal[]> {
    const waitMs = options.waitMs;
    if (waitMs !== undefined && !(typeof waitMs === "number" && waitMs >= 0 && waitMs <= MAX_INBOX_WAIT_MS)) {
      throw new UsageError(`${drain ? "drain" : "inbox"} waitMs must be 0 … ${MAX_INBOX_WAIT_MS} milliseconds, got ${String(waitMs)}`);
    }
    const wait = waitMs ? Math.ceil(waitMs / 1000) : undefined; // the bus takes whole seconds
    const data = await this.api.request<{ signals?: Record<string, unknown>[] }>("GET", "/v1/inbox", {
      params: { drain: drain ? "true" : undefined, limit: options.limit, wait },
      timeoutMs: wait ? this.requestTimeoutMs + wait * 1000 : undefined, // the bus holds the answer up to `wait`
    });
    return (data.signals ?? []).map(parseSignal);
  }

  /**
   * A conversation (CONTRACT §16): the signals you sent and received with `correlationId`,
   * **oldest first** (never anyone else's); `cursor: page.nextCursor` continues. `UsageError` for
   * an empty `correlationId` (the bus takes 1 … 64 characters).
   */
  async conversation(correlationId: string, options: { limit?: number; cursor?: string } = {}): Promise<SignalPage> {
    if (typeof correlationId !== "string" || correlationId === "") {
      throw new UsageError(`conversation takes a correlation id (a non-empty string), got ${JSON.stringify(correlationId)}`);
    }
    const data = await this.api.request<{ signals?: Record<string, unknown>[]; next_cursor?: string | null }>("GET", "/v1/signals", {
      params: { correlation_id: correlationId, limit: options.limit, cursor: options.cursor },
    });
    return { signals: (data.signals ?? []).map(parseSignalRow), nextCursor: data.next_cursor ?? null };
  }

  /** A signal's row (you sent or received it); `NotFound` otherwise. */
  async get(signalId: string) {
    return parseSignalRow(await this.api.request("GET", `/v1/signals/${enc(signalId)}`));
  }

  /** Your signals, newest first; `nextCursor` continues. */
  async list(options: { role?: "sent" | "received"; status?: "pending" | "delivered" | "expired" | "recalled"; limit?: number; cursor?: string } = {}): Promise<SignalPage> {
    const data = await this.api.request<{ signals?: Record<string, unknown>[]; next_cursor?: string | null }>("GET", "/v1/signals", { params: options });
    return { signals: (data.signals ?? []).map(parseSignalRow), nextCursor: data.next_cursor ?? null };
  }

  /** Your tenant's roster with each agent's recipient state. */
  async agents(): Promise<Agent[]> {
    const data = await this.api.request<{ tenant?: string; agents?: Record<string, unknown>[] }>("GET", "/v1/agents");
    return (data.agents ?? []).map((a) => parseAgent(a, data.tenant ?? ""));
  }

  /** Append a plugin fact; resolves to its seq. */
  async recordFact(plugin: string, factType: string, state: Record<string, unknown>): Promise<number> {
    const data = await this.session.call(
      { op: "fact", plugin, fact_type: factType, state },
      (result) => result,
      () => this.api.request("POST", `/v1/plugins/${enc(plugin)}/facts`, { body: { fact_type: factType, state } }),
    );
    return Number(data.seq);
  }

  /** A plugin's current state (its newest fact's state). */
  async state(plugin: string): Promise<PluginState> {
    const d = await this.api.request("GET", `/v1/plugins/${enc(plugin)}/state`);
    return { plugin: d.plugin as string, state: d.state ?? null, seq: Number(d.seq ?? 0), updatedAt: (d.updated_at as string | null) ?? null };
  }

  /** A plugin's facts, newest first, one page (`nextBeforeSeq` continues). */
  async facts(plugin: string, options: { factType?: string; limit?: number; beforeSeq?: number } = {}): Promise<FactPage> {
    const d = await this.api.request<{ facts?: Record<string, unknown>[]; next_before_seq?: number | null }>("GET", `/v1/plugins/${enc(plugin)}/facts`, {
      params: { fact_type: options.factType, limit: options.limit, before_seq: options.beforeSeq },
    });
    return {
      facts: (d.facts ?? []).map((f) => ({
        seq: Number(f.seq),
        factType: f.fact_type as string,
        state: f.state ?? null,
        recordedBy: (f.recorded_by as string) ?? "",
        createdAt: (f.created_at as string | null) ?? null,
      })),
      nextBeforeSeq: d.next_before_seq ?? null,
    };
  }

  // -- directives (CONTRACT §14; over HTTP, with or without a session) ------------------------

  /**
   * Ask `to` (an identity, or any one member of a `@group`) to do a piece of work. Resolves to the
   * directive (`requested`) with `created`: true when the bus created it (201), false when its
   * `idempotencyKey` (generated `sbd-<uuid>` when absent) answered the one it made before (200,
   * the directive as it is now).
   * `IdempotencyConflict` (`directiveId`) when the key was used with another `to`, `type` or
   * `params`; `UnknownRecipient`, `UnknownGroup`; `Forbidden` when the bus's policy does not let
   * you issue that type.
   */
  createDirective(to: string, type: string, params: Record<string, unknown> = {}, options: CreateDirectiveOptions = {}): Promise<Directive> {
    return this.directives.create(to, type, params, options);
  }

  /**
   * A directive you issued or are (or whose group is) assigned; `NotFound` for anyone else. With
   * `waitMs` (≤ 60000) the bus answers once it ended, or after that long (rounded up to seconds).
   */
  getDirective(directiveId: string, options: { waitMs?: number } = {}): Promise<Directive> {
    return this.directives.get(directiveId, options);
  }

  /** Directives you issued (`role: "issued"`) or that are assigned to you and your groups, newest first; `nextBefore` continues. */
  listDirectives(options: ListDirectivesOptions = {}): Promise<DirectivePage> {
    return this.directives.list(options);
  }

  /**
   * Claim it (`requested` → `started`, `claimedBy` you): its assignee, or for a group any member.
   * `AlreadyClaimed` (`claimedBy`) when another member was first; `InvalidTransition`
   * (`directive`) when it is no longer `requested`.
   */
  startDirective(directiveId: string): Promise<Directive> {
    return this.directives.start(directiveId);
  }

  /** The claimer reports progress (replacing the last report): `{message, percent}`, a message (≤ 1,000 characters) and/or a percent (0–100). Sends no signal. */
  progressDirective(directiveId: string, report: ProgressReport = {}): Promise<Directive> {
    return this.directives.progress(directiveId, report);
  }

  /** The claimer (or, from `requested`, the assignee or a member: it claims and completes at once) completes it with a result (a JSON object ≤ 64 KiB). */
  completeDirective(directiveId: string, result: Record<string, unknown> = {}): Promise<Directive> {
    return this.directives.complete(directiveId, result);
  }

  /** As `completeDirective`, ending it `failed` with `failure` `{code, message}` (a code of 1–64 characters; a message of at most 1,000). */
  failDirective(directiveId: string, code: string, message = ""): Promise<Directive> {
    return this.directives.fail(directiveId, code, message);
  }

  /** The assignee declines a `requested` one; a group member declines for itself, and the directive is `rejected` once every member has. */
  rejectDirective(directiveId: string, reason?: string): Promise<Directive> {
    return this.directives.reject(directiveId, reason);
  }

  /** The issuer cancels an open one (`requested`, `started`); a `runDirective` of this client waiting on it rejects with `DirectiveCanceled` (the bus sends the issuer no signal of its own cancel: the client tells its run). */
  cancelDirective(directiveId: string, reason?: string): Promise<Directive> {
    return this.directives.cancel(directiveId, reason);
  }

  /**
   * `createDirective`, then wait for its end — told by its lifecycle signals over the session
   * (taken and acked here: `onSignal` and `receive()` never see them), not by polling. Resolves to
   * its result; rejects with `DirectiveFailed` (`failure`), `DirectiveRejected`, `DirectiveExpired`
   * or `DirectiveCanceled` (each a `DirectiveEnded` carrying `directive`), or `DirectiveTimeout`
   * (`name` `"TimeoutError"`) when it is still open after `timeoutMs` — without one, 30 s past
   * its deadline — (it is left as it is; before giving up it reads the directive once). Needs an
   * open session: `TransportError` at once without one (nothing created). `close()` ends the
   * wait with `ClientClosed`.
   */
  runDirective(to: string, type: string, params: Record<string, unknown> = {}, options: RunDirectiveOptions = {}): Promise<Record<string, unknown>> {
    return this.directives.run(to, type, params, options);
  }

  /**
   * Work on directives of a type (`typePattern`: exact, or ending in `*`: `"package.*"`; the
   * exact pattern, else the longest prefix, serves a type) as their `DirectiveRequested` signals
   * come (they never reach `onSignal` or `receive()`): each is started (claimed) first — one
   * another member claimed, or that ended, is skipped — then `handler(directive, progress,
   * signal)` runs; what it returns completes the directive (a plain object as the result,
   * nothing (`undefined`) as `{}`, anything else as `{value: …}`), what it throws fails it (code: the error's
   * name — for a class that sets none, its class's name; message: its message). `signal` aborts
   * when the directive is canceled or expires meanwhile, or the client closes. The request is
   * acked once settled. Register before `connect()` to handle the requests that waited for you.
   * A pattern registered twice is a `UsageError`. Returns a function that stops serving it.
   */
  onDirective(typePattern: string, handler: DirectiveHandler): () => void {
    return this.directives.on(typePattern, handler);
  }

  // -- groups (CONTRACT §15) --------------------------------------------------------------------

  /** Your tenant's groups, sorted by name, each with its members' identities. */
  async groups(): Promise<Group[]> {
    const data = await this.api.request<{ groups?: Record<string, unknown>[] }>("GET", "/v1/groups");
    return (data.groups ?? []).map(parseGroup);
  }

  /** One group (`"@reviewers"` or `"reviewers"`) with each member's recipient state; `UnknownGroup` when there is none. */
  async group(name: string): Promise<Group> {
    return parseGroup(await this.api.request("GET", `/v1/groups/${groupPath(name)}`));
  }

  /** Join a self-join group (`Forbidden` for another); its other members get `PeerJoined` when it announces. Resolves to the group. */
  async joinGroup(name: string): Promise<Group> {
    return parseGroup(await this.api.request("POST", `/v1/groups/${groupPath(name)}/join`, { body: {} }));
  }

  /** Leave a self-join group (`Forbidden` for another); its other members get `PeerLeft` when it announces. Resolves to the group. */
  async leaveGroup(name: string): Promise<Group> {
    return parseGroup(await this.api.request("POST", `/v1/groups/${groupPath(name)}/leave`, { body: {} }));
  }
}
