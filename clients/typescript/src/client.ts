/** The agent client: one WebSocket session kept alive, plus the HTTP API, plus the spool. */

import {
  AskTimeout,
  ClientClosed,
  DEFINITIVE_CODES,
  InvalidRequest,
  ProtocolError,
  RateLimited,
  RequestTimeout,
  SignalbusError,
  SpoolExpired,
  TransportError,
  Unauthorized,
  Unavailable,
  errorFromBody,
} from "./errors.js";
import { HttpApi, normalizeUrl, type FetchLike } from "./http.js";
import { consoleLogger, type Logger } from "./logger.js";
import {
  DEFAULT_MAX_AGE_SECONDS,
  DEFAULT_MAX_BYTES,
  dedupeKeyOf,
  remainingTtl,
  type SpoolEntry,
  type SpoolRequest,
  type SpoolStore,
} from "./spool.js";
import {
  defaultTtl,
  parseAgent,
  parseSendResult,
  parseSignal,
  parseSignalRow,
  parseWelcome,
  type Agent,
  type FactPage,
  type Json,
  type PluginState,
  type RecallOutcome,
  type SendOptions,
  type SendOutcome,
  type SendResult,
  type SessionKind,
  type Signal,
  type SignalPage,
  type Spooled,
  type Welcome,
} from "./types.js";

/** The part of the WebSocket API the client uses: the browser's, Node 22's and `ws`'s all fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void; // eslint-disable-line @typescript-eslint/no-explicit-any
  terminate?(): void;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export type SignalHandler = (signal: Signal) => void | Promise<void>;
export type ReplayOutcome = SendResult | SignalbusError;
export type ReplayCallback = (entry: SpoolEntry, outcome: ReplayOutcome) => void | Promise<void>;

export interface ClientOptions {
  /** `daemon`, `shim` or `interactive` (the bus's default). */
  kind?: SessionKind;
  /** Called once per signal (redeliveries deduped by id); acked after it returns without throwing when `autoAck`. Without it, read signals with `receive()`. */
  onSignal?: SignalHandler;
  autoAck?: boolean;
  /** Node: a directory for the offline buffer (a `FileSpool`). */
  spoolDir?: string;
  /** Any SpoolStore (e.g. `MemorySpool` in browsers). */
  spool?: SpoolStore;
  spoolMaxBytes?: number;
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

export interface ReplayReport {
  replayed: SendResult[];
  rejected: SignalbusError[];
  expired: string[];
  kept: number;
  stoppedBy: SignalbusError | null;
}

interface Pending {
  resolve(frame: Record<string, unknown>): void;
  reject(error: SignalbusError): void;
  timer: ReturnType<typeof setTimeout>;
}

const FATAL = new Set(["unauthorized", "invalid_request", "forbidden"]);

function wsUrlOf(base: string): string {
  return base.replace(/^http/, "ws") + "/v1/ws";
}

function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (ch) => {
    const r = Math.floor(Math.random() * 16);
    return (ch === "x" ? r : (r & 0x3) | 0x8).toString(16);
  });
}

function clean(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}

const enc = encodeURIComponent;

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
  welcome: Welcome | undefined;
  sessionsOpened = 0;
  duplicatesDropped = 0;

  private readonly api: HttpApi;
  private readonly token: string;
  private readonly o: Required<
    Pick<ClientOptions, "autoAck" | "requestTimeoutMs" | "connectTimeoutMs" | "reconnectInitialMs" | "reconnectMaxMs" | "dedupeWindow" | "replayRate" | "replayIntervalMs">
  >;
  private readonly kind: SessionKind | undefined;
  private readonly handler: SignalHandler | undefined;
  private readonly onReplay: ReplayCallback | undefined;
  private readonly logger: Logger;
  private readonly wsCtor: WebSocketConstructor | undefined;
  private spoolStore: Promise<SpoolStore> | undefined;
  private identityHint: string | undefined;

  private ws: WebSocketLike | undefined;
  private pending = new Map<string, Pending>();
  private refs = 0;
  private seen = new Map<string, boolean>(); // id -> handled (true) / in progress (false)
  private asks = new Map<string, { resolve(s: Signal): void; reject(e: SignalbusError): void }>();
  private queue: Signal[] = [];
  private receivers: { take(s: Signal): void; fail(e: SignalbusError): void }[] = [];
  private pumping = false;
  private ackBuffer: string[] = [];
  private fatal: SignalbusError | undefined;
  private closing = false;
  private started = false;
  private waiters = new Set<() => void>();
  private sleepers = new Set<() => void>();
  private replayWake: (() => void) | undefined;
  private replayRequested = false;
  private replayRunning: Promise<ReplayReport> | undefined;
  private loops: Promise<void>[] = [];
  private lastRx = Date.now();

  constructor(url: string, token: string, options: ClientOptions = {}) {
    this.api = new HttpApi(url, token, options.requestTimeoutMs ?? 15000, options.fetch);
    this.url = normalizeUrl(url);
    this.token = token;
    this.kind = options.kind;
    this.handler = options.onSignal;
    this.onReplay = options.onReplay;
    this.logger = options.logger ?? consoleLogger;
    this.identityHint = options.identity;
    const g = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    this.wsCtor = options.WebSocket ?? g;
    this.o = {
      autoAck: options.autoAck ?? true,
      requestTimeoutMs: options.requestTimeoutMs ?? 15000,
      connectTimeoutMs: options.connectTimeoutMs ?? 10000,
      reconnectInitialMs: options.reconnectInitialMs ?? 500,
      reconnectMaxMs: options.reconnectMaxMs ?? 30000,
      dedupeWindow: Math.max(1, options.dedupeWindow ?? 10000),
      replayRate: options.replayRate ?? 20,
      replayIntervalMs: options.replayIntervalMs ?? 5000,
    };
    if (!(this.o.replayRate > 0)) throw new RangeError("replayRate must be positive (sends per second)");
    const limits = {
      maxBytes: options.spoolMaxBytes ?? DEFAULT_MAX_BYTES,
      maxAgeSeconds: options.spoolMaxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS,
      logger: this.logger,
    };
    if (options.spool) this.spoolStore = Promise.resolve(options.spool);
    else if (options.spoolDir) {
      const dir = options.spoolDir;
      this.spoolStore = import("./file-spool.js").then((m) => new m.FileSpool(dir, limits));
    }
  }

  get identity(): string | undefined {
    return this.welcome?.identity ?? this.identityHint;
  }

  get connected(): boolean {
    return this.ws !== undefined;
  }

  /** The spool, when the client has one. */
  async spool(): Promise<SpoolStore | undefined> {
    return this.spoolStore;
  }

  // -- lifecycle --------------------------------------------------------------------------

  /** Start the session supervisor and the spool replay in the background; do not wait. */
  start(): void {
    if (this.closing) throw new ClientClosed("the client is closed");
    if (this.started) return;
    this.started = true;
    this.loops.push(this.supervise());
    if (this.spoolStore) this.loops.push(this.replayLoop());
  }

  /**
   * Start and wait for the first session's welcome. Rejects with the fatal error (bad token, ...)
   * if the bus refuses the session, or `RequestTimeout` after `timeoutMs` (default
   * connectTimeoutMs) — the client keeps trying in the background until `close()`.
   */
  async connect(timeoutMs?: number): Promise<Welcome> {
    this.start();
    return this.waitConnected(timeoutMs ?? this.o.connectTimeoutMs);
  }

  private notify(): void {
    const ws = [...this.waiters];
    this.waiters.clear();
    for (const w of ws) w();
  }

  private changed(timeoutMs: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = (): void => {
        if (timer) clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      this.waiters.add(done);
      if (timeoutMs !== undefined) timer = setTimeout(done, Math.max(0, timeoutMs));
    });
  }

  async waitConnected(timeoutMs?: number): Promise<Welcome> {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    for (;;) {
      if (this.fatal) throw this.fatal;
      if (this.closing) throw new ClientClosed("the client is closed");
      if (this.ws && this.welcome) return this.welcome;
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) throw new RequestTimeout(`no session with ${this.url} within ${timeoutMs} ms; still trying in the background`);
      await this.changed(left);
    }
  }

  async waitDisconnected(timeoutMs?: number): Promise<void> {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    while (this.ws) {
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) throw new RequestTimeout(`the session did not close within ${timeoutMs} ms`);
      await this.changed(left);
    }
  }

  /** Flush pending acks, close the session (1000) and stop every background task. */
  async close(): Promise<void> {
    if (this.closing) return;
    if (this.ackBuffer.length && this.ws) {
      await this.flushAcks().catch((e: SignalbusError) => this.logger.warn(`acks not sent before close (${e.message}): those signals come back on the next session`));
    }
    this.closing = true;
    const ws = this.ws;
    if (ws) {
      const closed = this.changed(2000);
      try {
        ws.close(1000, "client closed");
      } catch {
        /* already closing */
      }
      await closed;
    }
    for (const s of [...this.sleepers]) s();
    this.replayWake?.();
    this.notify();
    await Promise.allSettled(this.loops);
    this.loops = [];
    this.failPending(new ClientClosed("the client was closed before the bus answered; the outcome is unknown"));
    const receivers = this.receivers;
    this.receivers = [];
    for (const r of receivers) r.fail(new ClientClosed("the client was closed while waiting for a signal"));
    for (const a of this.asks.values()) a.reject(new ClientClosed("the client was closed while waiting for a reply"));
    this.asks.clear();
  }

  /** Abort the current WebSocket without a close handshake, as a network failure would; the client reconnects. */
  dropConnection(): void {
    const ws = this.ws;
    if (ws) this.abort(ws);
  }

  private abort(ws: WebSocketLike): void {
    if (typeof ws.terminate === "function") ws.terminate();
    else ws.close(4000, "no heartbeat");
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  // -- session ----------------------------------------------------------------------------

  private async supervise(): Promise<void> {
    let attempt = 0;
    while (!this.closing) {
      let opened = false;
      try {
        opened = await this.session();
      } catch (e) {
        const err = e instanceof SignalbusError ? e : new TransportError(String((e as Error)?.message ?? e), { cause: e });
        if (FATAL.has(err.code)) {
          this.fatal = err;
          this.logger.error(`the bus refused the session, not reconnecting: ${err.message}`);
          this.failPending(err);
          this.notify();
          return;
        }
        this.logger.warn(`session to ${this.url} failed: ${err.message}`);
      }
      if (this.closing) return;
      attempt = opened ? 0 : attempt + 1;
      const ceiling = Math.min(this.o.reconnectMaxMs, this.o.reconnectInitialMs * 2 ** Math.min(attempt, 30));
      const delay = ceiling / 2 + (Math.random() * ceiling) / 2;
      this.logger.info(`reconnecting to ${this.url} in ${Math.round(delay)} ms (attempt ${attempt + 1})`);
      await this.sleep(delay);
    }
  }

  private async openSocket(): Promise<{ ws: WebSocketLike; viaQuery: boolean }> {
    const base = wsUrlOf(this.url) + (this.kind ? `?kind=${enc(this.kind)}` : "");
    if (this.wsCtor) {
      const url = base + (base.includes("?") ? "&" : "?") + `token=${enc(this.token)}`;
      return { ws: new this.wsCtor(url), viaQuery: true };
    }
    const mod = await import("ws");
    const WS = mod.default;
    const ws = new WS(base, {
      headers: { Authorization: `Bearer ${this.token}` },
      maxPayload: 16 * 1024 * 1024,
      handshakeTimeout: this.o.connectTimeoutMs,
    });
    return { ws: ws as unknown as WebSocketLike, viaQuery: false };
  }

  /** One session: connect, welcome, read until closed. Resolves true when a welcome came. */
  private async session(): Promise<boolean> {
    const { ws } = await this.openSocket();
    const outcome = await new Promise<{ welcomed: boolean; code: number; reason: string; error: string }>((resolve) => {
      let welcomed = false;
      let lastError = "";
      let heartbeat: ReturnType<typeof setInterval> | undefined;
      const welcomeTimer = setTimeout(() => {
        lastError = `the bus sent no welcome within ${this.o.connectTimeoutMs} ms`;
        this.abort(ws);
      }, this.o.connectTimeoutMs);
      ws.addEventListener("message", (ev: { data: unknown }) => {
        this.lastRx = Date.now();
        const text = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data as ArrayBuffer);
        let frame: Record<string, unknown>;
        try {
          frame = JSON.parse(text) as Record<string, unknown>;
        } catch {
          this.logger.error(`the bus sent a frame that is not JSON; ignored: ${text.slice(0, 200)}`);
          return;
        }
        if (!welcomed) {
          if (frame?.op !== "welcome") {
            lastError = `expected a welcome frame first, got ${JSON.stringify(frame?.op)}`;
            this.abort(ws);
            return;
          }
          clearTimeout(welcomeTimer);
          welcomed = true;
          this.welcome = parseWelcome(frame);
          this.identityHint = this.welcome.identity;
          this.ws = ws;
          this.sessionsOpened += 1;
          this.logger.info(`session ${this.welcome.sessionId} open as ${this.welcome.tenant}/${this.welcome.identity}`);
          const interval = Math.max(50, this.welcome.heartbeatIntervalMs);
          const silence = Math.max(2 * interval, 5000) + interval;
          heartbeat = setInterval(() => {
            if (Date.now() - this.lastRx > silence) {
              this.logger.warn(`no frame from the bus for ${silence} ms: dropping the session and reconnecting`);
              this.abort(ws);
              return;
            }
            try {
              ws.send('{"op":"ping"}');
            } catch {
              /* closing: the close event follows */
            }
          }, interval);
          this.notify();
          this.wakeReplay();
          return;
        }
        this.onFrame(frame);
      });
      ws.addEventListener("error", (ev: { message?: string; error?: Error }) => {
        lastError = ev?.message ?? ev?.error?.message ?? "websocket error";
      });
      ws.addEventListener("close", (ev: { code?: number; reason?: string }) => {
        clearTimeout(welcomeTimer);
        if (heartbeat) clearInterval(heartbeat);
        if (this.ws === ws) {
          this.ws = undefined;
          this.logger.info(`session closed (code ${ev?.code} ${ev?.reason ?? ""})`);
        }
        this.failPending(new TransportError("the session closed before the bus answered; the outcome is unknown: retry with the same dedupe_key"));
        this.notify();
        resolve({ welcomed, code: ev?.code ?? 1006, reason: ev?.reason ?? "", error: lastError });
      });
    });
    if (!outcome.welcomed) {
      const m = /Unexpected server response: (\d+)/.exec(outcome.error);
      if (m) {
        const status = Number(m[1]);
        throw errorFromBody({ error: { message: `the bus refused the session with HTTP ${status}` } }, status);
      }
      if (this.wsCtor) await this.probeToken(); // browsers say nothing about a refused upgrade
      throw new TransportError(`cannot open a session with ${this.url}: ${outcome.error || `closed ${outcome.code}`}`);
    }
    if (outcome.code === 1008) throw new Unauthorized(`the bus closed the session with 1008 (${outcome.reason || "token rotated or agent removed"})`);
    if (outcome.code === 1009) this.logger.error("the bus closed the session with 1009: a frame was over its size limit (1 MiB); send smaller frames");
    return true;
  }

  /** Throws Unauthorized when the bus refuses the token (HTTP), nothing otherwise. */
  private async probeToken(): Promise<void> {
    try {
      await this.api.request("GET", "/v1/agents");
    } catch (e) {
      if (e instanceof SignalbusError && FATAL.has(e.code)) throw e;
    }
  }

  private onFrame(frame: Record<string, unknown>): void {
    const op = frame.op;
    if (op === "result") {
      const p = this.pending.get(String(frame.ref));
      if (p) {
        this.pending.delete(String(frame.ref));
        clearTimeout(p.timer);
        p.resolve(frame);
      } else this.logger.warn(`a result for an unknown ref ${JSON.stringify(frame.ref)}: ${JSON.stringify(frame).slice(0, 300)}`);
    } else if (op === "signal") {
      try {
        this.onPush((frame.signal ?? {}) as Record<string, unknown>);
      } catch (e) {
        this.logger.error(`a signal frame this client cannot read, not acked: ${(e as Error).message}`);
      }
    } else if (op !== "pong") this.logger.debug(`ignoring frame op ${JSON.stringify(op)}`);
  }

  private failPending(err: SignalbusError): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      clearTimeout(p.timer);
      p.reject(err);
    }
  }

  private async wsCall(frame: Record<string, unknown>, dedupeKey?: string): Promise<Record<string, unknown>> {
    const ws = this.ws;
    const details = dedupeKey ? { dedupe_key: dedupeKey } : {};
    if (!ws) throw new TransportError("no open session", { details });
    const ref = `c${++this.refs}`;
    const answer = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const withKey = (e: SignalbusError): void => {
        if (dedupeKey) e.details.dedupe_key ??= dedupeKey;
        reject(e);
      };
      const timer = setTimeout(() => {
        this.pending.delete(ref);
        withKey(new RequestTimeout(`no answer to ${String(frame.op)} within ${this.o.requestTimeoutMs} ms; the outcome is unknown`));
      }, this.o.requestTimeoutMs);
      this.pending.set(ref, { resolve, reject: withKey, timer });
      try {
        ws.send(JSON.stringify({ ...frame, ref }));
      } catch (e) {
        this.pending.delete(ref);
        clearTimeout(timer);
        withKey(new TransportError(`the session closed while sending: ${(e as Error).message}`, { cause: e }));
      }
    });
    if (answer.ok) return (answer.result ?? {}) as Record<string, unknown>;
    const err = errorFromBody(answer.error ?? {});
    if (dedupeKey) err.details.dedupe_key ??= dedupeKey;
    throw err;
  }

  /** Over the session when it is open; over HTTP when there is none or it dropped mid-call. */
  private async either<T>(viaWs: () => Promise<T>, viaHttp: () => Promise<T>): Promise<T> {
    if (this.ws) {
      try {
        return await viaWs();
      } catch (e) {
        if (!(e instanceof TransportError) || this.ws) throw e;
      }
    }
    return viaHttp();
  }

  // -- receiving --------------------------------------------------------------------------

  private remember(id: string, handled: boolean): void {
    this.seen.delete(id);
    this.seen.set(id, handled);
    while (this.seen.size > this.o.dedupeWindow) this.seen.delete(this.seen.keys().next().value as string);
  }

  private onPush(obj: Record<string, unknown>): void {
    const sig = parseSignal(obj);
    if (this.seen.has(sig.id)) {
      this.duplicatesDropped += 1;
      this.logger.debug(`duplicate signal ${sig.id} (redelivered=${sig.redelivered}) dropped`);
      if (this.seen.get(sig.id) && this.o.autoAck) this.queueAck(sig.id); // the first ack may have died with the old session
      return;
    }
    const ask = sig.correlationId ? this.asks.get(sig.correlationId) : undefined;
    if (ask && sig.correlationId) {
      this.asks.delete(sig.correlationId);
      this.remember(sig.id, true);
      ask.resolve(sig);
      if (this.o.autoAck) this.queueAck(sig.id);
      return;
    }
    this.remember(sig.id, false);
    const receiver = this.receivers.shift();
    if (receiver) receiver.take(sig);
    else this.queue.push(sig);
    if (this.handler) void this.pump();
  }

  private queueAck(id: string): void {
    this.ackBuffer.push(id);
    if (this.ackBuffer.length >= 100 || this.queue.length === 0) {
      this.flushAcks().catch((e: SignalbusError) =>
        this.logger.warn(`ack not sent (${e.message}): the signals come back on the next session and are deduped`),
      );
    }
  }

  private async flushAcks(): Promise<void> {
    const ids = this.ackBuffer;
    this.ackBuffer = [];
    if (ids.length) await this.ackIds(ids);
  }

  private async pump(): Promise<void> {
    if (this.pumping || !this.handler) return;
    this.pumping = true;
    try {
      while (this.queue.length && !this.closing) {
        const sig = this.queue.shift() as Signal;
        try {
          await this.handler(sig);
        } catch (e) {
          this.logger.error(`the signal handler failed for ${sig.id}; not acked: it comes back on the next session`, e);
          this.seen.delete(sig.id);
          continue;
        }
        this.remember(sig.id, true);
        if (this.o.autoAck) this.queueAck(sig.id);
      }
    } finally {
      this.pumping = false;
    }
  }

  /** The next pushed signal (when there is no `onSignal` handler). Ack it with `ack`. */
  receive(timeoutMs?: number): Promise<Signal> {
    if (this.handler) return Promise.reject(new InvalidRequest("this client has an onSignal handler: signals go there, not to receive()"));
    const next = this.queue.shift();
    if (next) return Promise.resolve(next);
    if (this.closing) return Promise.reject(new ClientClosed("the client is closed"));
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const receiver = {
        take: (s: Signal): void => {
          if (timer) clearTimeout(timer);
          resolve(s);
        },
        fail: (e: SignalbusError): void => {
          if (timer) clearTimeout(timer);
          reject(e);
        },
      };
      this.receivers.push(receiver);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.receivers = this.receivers.filter((r) => r !== receiver);
          reject(new RequestTimeout(`no signal within ${timeoutMs} ms`));
        }, timeoutMs);
      }
    });
  }

  // -- calls ------------------------------------------------------------------------------

  /**
   * Send a signal (CONTRACT §4). Every send carries a dedupe_key (a fresh one when none is
   * given), so resending it can never create a second signal. Resolves to a `SendResult`, or to
   * `Spooled` when the bus was unreachable or unavailable and the client has a spool
   * (`{spool: false}` rejects instead). Rejects with the typed error otherwise:
   * `RecipientUnavailable` for a bounced sync send (`recipientState`, `signalId`), ...
   */
  async send(to: string, type: string, payload: Json = {}, options: SendOptions = {}): Promise<SendOutcome> {
    const key = options.dedupeKey || `sbc-${randomId()}`;
    const request = clean({
      to,
      type,
      payload: payload ?? {},
      delivery_class: options.deliveryClass,
      ttl_seconds: options.ttlSeconds,
      correlation_id: options.correlationId,
      dedupe_key: key,
    });
    try {
      return parseSendResult(await this.transmitSend(request), key);
    } catch (e) {
      if ((e instanceof TransportError || e instanceof Unavailable) && this.spoolStore && options.spool !== false) {
        return this.spoolSend(request, e);
      }
      throw e;
    }
  }

  private async transmitSend(request: Record<string, unknown>): Promise<Record<string, unknown>> {
    const key = request.dedupe_key as string;
    return this.either(
      () => this.wsCall({ op: "send", ...request }, key),
      () => this.api.request("POST", "/v1/signals", { body: request, dedupeKey: key }),
    );
  }

  private async spoolSend(request: Record<string, unknown>, err: SignalbusError): Promise<Spooled> {
    const store = await (this.spoolStore as Promise<SpoolStore>);
    const { ttl_seconds, ...rest } = request;
    const ttl = (ttl_seconds as number | undefined) ?? defaultTtl(String(request.type));
    const entry = await store.put(rest as SpoolRequest, { ttlSeconds: ttl, identity: this.identity ?? null, reason: `${err.code}: ${err.detail}` });
    this.logger.warn(`the bus could not take the send (${err.code}): spooled as ${entry.name}, replayed when it is back`);
    this.wakeReplay();
    return { spooled: true, dedupeKey: entry.request.dedupe_key, entry: entry.name, reason: entry.reason, spooledAt: entry.spooledAt, ttlSeconds: entry.ttlSeconds };
  }

  /** Answer `signal`: send to its sender with its correlationId (an `ask` waiting there gets it). */
  reply(signal: Signal, type: string, payload: Json = {}, options: SendOptions = {}): Promise<SendOutcome> {
    return this.send(signal.from, type, payload, { ...options, correlationId: signal.correlationId ?? undefined });
  }

  /**
   * Send with a fresh correlationId and resolve to the first signal that comes back carrying it
   * (acked when `autoAck`). Needs the session (`connect()`). Rejects with `AskTimeout` (with
   * `signalId`) when no reply comes within `timeoutMs`, or the send's typed error.
   */
  async ask(to: string, type: string, payload: Json = {}, timeoutMs = 30000, options: SendOptions = {}): Promise<Signal> {
    if (!this.started) throw new InvalidRequest("ask needs the session for the reply: call connect() first");
    const cid = randomId().replace(/-/g, "");
    let resolveReply!: (s: Signal) => void;
    let rejectReply!: (e: SignalbusError) => void;
    const reply = new Promise<Signal>((resolve, reject) => {
      resolveReply = resolve;
      rejectReply = reject;
    });
    reply.catch(() => {}); // rejected only on close, while the race below may be gone
    this.asks.set(cid, { resolve: resolveReply, reject: rejectReply });
    const started = Date.now();
    try {
      const sent = await this.send(to, type, payload, { ...options, correlationId: cid });
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
      this.asks.delete(cid);
    }
  }

  /** Recall a signal you sent (CONTRACT §6). */
  async recall(signalId: string): Promise<{ outcome: RecallOutcome }> {
    const data = await this.either(
      () => this.wsCall({ op: "recall", signal_id: signalId }),
      () => this.api.request("POST", `/v1/signals/${enc(signalId)}/recall`, { okStatuses: [404] }),
    );
    if (typeof data?.outcome !== "string") throw errorFromBody(data, 404);
    return { outcome: data.outcome as RecallOutcome };
  }

  /** Ack delivered signals (or ids); resolves to how many the bus took. */
  async ack(...items: (Signal | string | (Signal | string)[])[]): Promise<number> {
    const ids = items.flat().map((s) => (typeof s === "string" ? s : s.id));
    for (const id of ids) if (this.seen.has(id)) this.remember(id, true);
    return ids.length ? this.ackIds(ids) : 0;
  }

  private async ackIds(ids: string[]): Promise<number> {
    return this.either(
      async () => Number((await this.wsCall({ op: "ack", signal_ids: ids })).acked ?? 0),
      async () => {
        let total = 0;
        for (let i = 0; i < ids.length; i += 1000) {
          total += Number((await this.api.request("POST", "/v1/inbox/ack", { body: { signal_ids: ids.slice(i, i + 1000) } })).acked ?? 0);
        }
        return total;
      },
    );
  }

  /** Pending signals for you, in drain order; delivers nothing. */
  async inbox(options: { limit?: number } = {}): Promise<Signal[]> {
    const data = await this.api.request<{ signals?: Record<string, unknown>[] }>("GET", "/v1/inbox", { params: { limit: options.limit } });
    return (data.signals ?? []).map(parseSignal);
  }

  /** Take pending signals (`GET /v1/inbox?drain=true`): delivered to you, never pushed later. */
  async drain(options: { limit?: number } = {}): Promise<Signal[]> {
    const data = await this.api.request<{ signals?: Record<string, unknown>[] }>("GET", "/v1/inbox", { params: { drain: "true", limit: options.limit } });
    return (data.signals ?? []).map(parseSignal);
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
    const data = await this.either(
      () => this.wsCall({ op: "fact", plugin, fact_type: factType, state }),
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

  // -- spool replay -----------------------------------------------------------------------

  private wakeReplay(): void {
    this.replayRequested = true;
    this.replayWake?.();
  }

  private async replayLoop(): Promise<void> {
    const store = await (this.spoolStore as Promise<SpoolStore>);
    while (!this.closing) {
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
      if (this.closing) return;
      try {
        if ((await store.count()) === 0) continue;
        const report = await this.replaySpool();
        const wait = report.stoppedBy instanceof RateLimited ? report.stoppedBy.retryAfterMs : undefined;
        if (wait) await this.sleep(wait);
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
    if (!this.spoolStore) return report;
    const store = await this.spoolStore;
    const entries = await store.entries();
    const gap = 1000 / this.o.replayRate;
    let last = 0;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as SpoolEntry;
      const key = dedupeKeyOf(entry);
      if (this.closing) {
        report.kept = entries.length - i;
        break;
      }
      if (entry.identity && this.identity && entry.identity !== this.identity) {
        this.logger.warn(`spool entry ${entry.name} was spooled by ${entry.identity}, not ${this.identity}: left for that identity`);
        report.kept += 1;
        continue;
      }
      const remaining = remainingTtl(entry);
      if (remaining < 1) {
        await store.delete(entry.name);
        this.logger.warn(`spooled send ${entry.name} (dedupe_key ${key}) expired in the spool: dropped`);
        report.expired.push(key);
        await this.report(entry, new SpoolExpired(`spooled send ${key} expired before the bus was back`, { details: { dedupe_key: key } }));
        continue;
      }
      const wait = last + gap - Date.now();
      if (wait > 0) await this.sleep(wait);
      last = Date.now();
      let result: SendResult;
      try {
        result = parseSendResult(await this.transmitSend({ ...entry.request, ttl_seconds: remaining }), key);
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
        this.logger.info(`spool replay paused, ${report.kept} entries kept: ${err.message}`);
        break;
      }
      await store.delete(entry.name);
      this.logger.info(`replayed spooled send ${key} as signal ${result.signalId} (${result.publishPath})`);
      report.replayed.push(result);
      await this.report(entry, result);
    }
    return report;
  }
}
