/**
 * The session engine: one WebSocket session kept open (jittered exponential backoff, heartbeats,
 * a silent bus dropped), calls over it with their `result` frames (or over HTTP when there is no
 * session), and each pushed signal handed to its `Delivery` (dedupe, the handler, acks).
 *
 * Deliberately below the facade: it never imports `client.ts` nor knows the spool. It shapes no
 * call (the `Client` does) and decides nothing about spooling; the facade hears of a new session
 * through `onOpen`.
 */

import { Delivery, type SignalHandler } from "./delivery.js";
import { ClientClosed, NOTHING_SENT, RequestTimeout, SignalbusError, TransportError, Unauthorized, errorFromBody } from "./errors.js";
import type { HttpApi } from "./http.js";
import type { Logger } from "./logger.js";
import { parseWelcome, type SessionKind, type Welcome } from "./types.js";

/** The part of the WebSocket API the client uses: the browser's, Node 22's and `ws`'s all fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void; // eslint-disable-line @typescript-eslint/no-explicit-any
  terminate?(): void;
}
/** The connection events a `Client` emits (`client.on(event, listener)`), in this order. */
export type ConnectionEvent = "connected" | "disconnected" | "reconnected" | "closed";

export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** What the engine needs of the client's options, with the defaults applied by the facade. */
export interface SessionOptions {
  kind: SessionKind | undefined;
  handler: SignalHandler | undefined;
  identity: string | undefined;
  autoAck: boolean;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
  reconnectInitialMs: number;
  reconnectMaxMs: number;
  dedupeWindow: number;
  maxConcurrentHandlers?: number;
  logger: Logger;
  WebSocket: WebSocketConstructor | undefined;
}

interface Pending {
  resolve(frame: Record<string, unknown>): void;
  reject(error: SignalbusError): void;
  timer: ReturnType<typeof setTimeout>;
}

const FATAL = new Set(["unauthorized", "invalid_request", "forbidden"]);
const enc = encodeURIComponent;

function wsUrlOf(base: string): string {
  return base.replace(/^http/, "ws") + "/v1/ws";
}

/** The engine under `Client`: owns the socket and the calls waiting for results; pushed signals
 * go to its `delivery`. */
export class Session {
  welcome: Welcome | undefined;
  sessionsOpened = 0;
  closing = false;
  started = false;
  /** Told when a session opens (the facade wakes the spool replay). */
  onOpen: () => void = () => {};
  /** Told each connection event, in order: connected, disconnected, reconnected, closed. */
  onEvent: (event: ConnectionEvent) => void = () => {};
  private closedTold = false;

  readonly url: string;
  readonly delivery: Delivery;
  private readonly wsCtor: WebSocketConstructor | undefined;
  private readonly logger: Logger;
  private identityHint: string | undefined;
  private ws: WebSocketLike | undefined;
  private pending = new Map<string, Pending>();
  private refs = 0;
  private fatal: SignalbusError | undefined;
  private waiters = new Set<() => void>();
  private sleepers = new Set<() => void>();
  private loops: Promise<void>[] = [];
  private lastRx = Date.now();

  constructor(
    private readonly api: HttpApi,
    private readonly token: string,
    private readonly o: SessionOptions,
  ) {
    this.url = api.url;
    this.delivery = new Delivery({ handler: o.handler, autoAck: o.autoAck, dedupeWindow: o.dedupeWindow, maxConcurrentHandlers: o.maxConcurrentHandlers, logger: o.logger, sendAcks: (ids) => this.ackIds(ids) });
    this.wsCtor = o.WebSocket;
    this.logger = o.logger;
    this.identityHint = o.identity;
  }

  get identity(): string | undefined {
    return this.welcome?.identity ?? this.identityHint;
  }

  get connected(): boolean {
    return this.ws !== undefined;
  }

  /** Start the supervisor; idempotent. */
  start(): void {
    if (this.closing) throw new ClientClosed("the client is closed");
    if (this.started) return;
    this.started = true;
    this.loops.push(this.supervise());
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
      if (left !== undefined && left <= 0) throw new RequestTimeout(`no session with ${this.url} within ${timeoutMs} ms`, {
          hint: "the client keeps trying in the background: check the url and that the bus is up, or waitConnected() again",
        });
      await this.changed(left);
    }
  }

  async waitDisconnected(timeoutMs?: number): Promise<void> {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    while (this.ws) {
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) throw new RequestTimeout(`the session did not close within ${timeoutMs} ms`, { hint: "the session is still open" });
      await this.changed(left);
    }
  }

  /** Flush pending acks, close the session (1000) and stop every background task. */
  /** Flush pending acks, then mark the engine closing and close the socket (1000); every sleep
   * ends. `finishClose` waits for the supervisor and fails what still waits. */
  async beginClose(): Promise<void> {
    if (this.delivery.acksWaiting && this.ws) {
      await this.delivery.flushAcks().catch((e: SignalbusError) => this.logger.warn(`acks not sent before close (${e.message}): those signals come back on the next session`));
    }
    this.closing = true;
    this.delivery.close();
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
    this.notify();
  }

  async finishClose(): Promise<void> {
    await Promise.allSettled(this.loops);
    this.loops = [];
    this.failPending(new ClientClosed("the client was closed before the bus answered; the outcome is unknown"));
    this.delivery.failWaiters();
    this.tellClosed();
  }

  /** Hand a connection event to the facade; a listener that throws is logged, never fatal. */
  tell(event: ConnectionEvent): void {
    try {
      this.onEvent(event);
    } catch (e) {
      this.logger.error(`a "${event}" listener failed`, e);
    }
  }

  private tellClosed(): void {
    if (this.closedTold) return;
    this.closedTold = true;
    this.tell("closed");
  }

  dropConnection(): void {
    const ws = this.ws;
    if (ws) this.abort(ws);
  }

  private abort(ws: WebSocketLike): void {
    if (typeof ws.terminate === "function") ws.terminate();
    else ws.close(4000, "no heartbeat");
  }

  /** A sleep that `close()` ends early. */
  sleep(ms: number): Promise<void> {
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

  /**
   * Keep a session open. Logging is quiet: one warning when an open session is lost, debug per
   * failed attempt, one info line when a session opens again; a refusal that `connect()` rejects
   * with is not also logged above debug.
   */
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
          this.tellClosed(); // given up for good
          // In the background (a session was open): nobody is waiting to be told. Else connect() rejects with it.
          if (this.sessionsOpened > 0) this.logger.warn(`the bus refused the session, not reconnecting: ${err.message}`);
          else this.logger.debug(`the bus refused the session, not reconnecting: ${err.message}`);
          this.failPending(err);
          this.notify();
          return;
        }
        this.logger.debug(`session to ${this.url} failed: ${err.message}`);
      }
      if (this.closing) return;
      if (opened) this.logger.warn(`lost the session to ${this.url}: reconnecting in the background`);
      attempt = opened ? 0 : attempt + 1;
      const ceiling = Math.min(this.o.reconnectMaxMs, this.o.reconnectInitialMs * 2 ** Math.min(attempt, 30));
      const delay = ceiling / 2 + (Math.random() * ceiling) / 2;
      this.logger.debug(`reconnecting to ${this.url} in ${Math.round(delay)} ms (attempt ${attempt + 1})`);
      await this.sleep(delay);
    }
  }

  private async openSocket(): Promise<{ ws: WebSocketLike; viaQuery: boolean }> {
    const base = wsUrlOf(this.url) + (this.o.kind ? `?kind=${enc(this.o.kind)}` : "");
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
          if (this.closing) {
            // close() came while this socket was still opening (beginClose closes only an adopted
            // one): never adopt it, or nobody would close it and finishClose would wait forever.
            lastError = "the client closed while the session was opening";
            try {
              ws.close(1000, "client closed");
            } catch {
              /* already closing */
            }
            return;
          }
          welcomed = true;
          this.welcome = parseWelcome(frame);
          this.identityHint = this.welcome.identity;
          this.ws = ws;
          this.sessionsOpened += 1;
          if (this.sessionsOpened > 1) this.logger.info(`reconnected to ${this.url}: session ${this.welcome.sessionId} as ${this.welcome.tenant}/${this.welcome.identity}`);
          else this.logger.debug(`session ${this.welcome.sessionId} open as ${this.welcome.tenant}/${this.welcome.identity}`);
          const interval = Math.max(50, this.welcome.heartbeatIntervalMs);
          const silence = Math.max(2 * interval, 5000) + interval;
          heartbeat = setInterval(() => {
            if (Date.now() - this.lastRx > silence) {
              this.logger.debug(`no frame from the bus for ${silence} ms: dropping the session and reconnecting`);
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
          this.tell(this.sessionsOpened > 1 ? "reconnected" : "connected");
          this.onOpen();
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
          if (!this.closing) this.tell("disconnected");
          this.logger.debug(`session closed (code ${ev?.code} ${ev?.reason ?? ""})`);
        }
        this.failPending(new TransportError("the session closed before the bus answered"));
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

  /**
   * Throws Unauthorized when the bus refuses the token (HTTP), nothing otherwise. A 403 is not a
   * refusal: the roster needs the `read` scope, which a valid token may lack (CONTRACT §17).
   */
  private async probeToken(): Promise<void> {
    try {
      await this.api.request("GET", "/v1/agents");
    } catch (e) {
      if (e instanceof SignalbusError && e.code === "unauthorized") throw e;
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
        this.delivery.onPush((frame.signal ?? {}) as Record<string, unknown>);
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
    let wentOut = false;
    if (this.ws) {
      try {
        return await viaWs();
      } catch (e) {
        if (!(e instanceof TransportError) || this.ws) throw e;
        wentOut = true;
      }
    }
    try {
      return await viaHttp();
    } catch (e) {
      if (wentOut && e instanceof TransportError && e.hint === NOTHING_SENT) {
        // HTTP sent nothing, but the frame may have arrived before the session dropped.
        throw new TransportError(`${e.detail}, after the session dropped with the call on it`, { details: e.details, cause: e });
      }
      throw e;
    }
  }

  // -- calls over the session, or HTTP ----------------------------------------------------

  /** Over the session when it is open; over HTTP when there is none or it dropped mid-call (the
   * retry is safe: sends carry a dedupe_key, the other ops are idempotent). */
  async call<T>(frame: Record<string, unknown>, extract: (result: Record<string, unknown>) => T, viaHttp: () => Promise<T>, dedupeKey?: string): Promise<T> {
    return this.either(async () => extract(await this.wsCall(frame, dedupeKey)), viaHttp);
  }

  /** One attempt at a send (the caller's, or a spool replay's); the answer's JSON. */
  async transmitSend(request: Record<string, unknown>): Promise<Record<string, unknown>> {
    const key = request.dedupe_key as string;
    return this.call(
      { op: "send", ...request },
      (result) => result,
      () => this.api.request("POST", "/v1/signals", { body: request, dedupeKey: key }),
      key,
    );
  }

  /** One ack batch over the session or HTTP (1000 ids a request). */
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
}
