/**
 * Directives (CONTRACT §14) under the `Client` facade: the calls (create, get, list and the
 * transitions, over HTTP with or without a session), `runDirective`'s wait for the directive's
 * end, and the `onDirective` worker.
 *
 * Both waits are on the lifecycle signals the bus pushes over the session, never polling: a
 * `Route` of the session's `Delivery` takes them before the handler and `receive()` see them,
 * and acks them. Deliberately below the facade: it never imports `client.ts`, and it shapes no
 * signal call (send, ask, ...).
 */

import {
  AlreadyClaimed,
  DirectiveTimeout,
  Forbidden,
  InternalError,
  InvalidTransition,
  NOTHING_SENT,
  NotFound,
  RateLimited,
  SignalbusError,
  TransportError,
  Unavailable,
  UsageError,
  directiveEnded,
} from "./errors.js";
import type { HttpApi } from "./http.js";
import { randomId } from "./ids.js";
import type { Logger } from "./logger.js";
import type { Session } from "./session.js";
import {
  parseDirective,
  type CreateDirectiveOptions,
  type Directive,
  type DirectivePage,
  type ListDirectivesOptions,
  type Signal,
} from "./types.js";

/** A progress report: a message (≤ 1,000 characters) and/or a percent (0–100); both optional. */
export interface ProgressReport {
  message?: string;
  percent?: number;
}

/**
 * Reports the claimer's progress on the directive being handled (`progressDirective`); resolves
 * to the directive after it. The report goes out at once: await it to see the bus's answer, or
 * don't — the handler's result is sent only after its reports.
 */
export type ProgressReporter = (report?: ProgressReport) => Promise<Directive>;

/**
 * An `onDirective` handler: does the work of `directive` (already started: claimed by you),
 * reporting `progress` as it goes. What it returns (or resolves to) completes the directive — a
 * plain object as the result, nothing (`undefined`) as `{}`, anything else (`null` too) as
 * `{value: …}`; what it throws fails it (code: the error's name — for a class that sets none, the
 * class's name; message: its message). `signal` aborts when the directive is canceled or expires
 * meanwhile, or the client closes (its end is then not the handler's to report).
 */
export type DirectiveHandler = (directive: Directive, progress: ProgressReporter, signal: AbortSignal) => unknown;

/** `runDirective`'s options: the create's, and how long to wait. */
export interface RunDirectiveOptions extends CreateDirectiveOptions {
  /** How long to wait for the end; without it, until 30 s past the directive's deadline (the bus expires it then). */
  timeoutMs?: number;
}

export interface DirectivesOptions {
  requestTimeoutMs: number;
  /** How many `onDirective` handlers may run at once (the client's `maxConcurrentHandlers`). */
  maxConcurrent: number;
  logger: Logger;
}

/** The lifecycle signals to the issuer: what a `runDirective` waits on. */
const TO_ISSUER = new Set(["DirectiveStarted", "DirectiveCompleted", "DirectiveFailed", "DirectiveRejected", "DirectiveCanceled", "DirectiveExpired"]);
const REQUESTED = "DirectiveRequested";
/** What a worker is told of a directive it was handed that ended without it: taken and acked, so a client that only serves never piles them up unacked. */
const WORKER_ENDINGS = new Set(["DirectiveCanceled", "DirectiveExpired"]);
/** Answers after which a worker's call is worth repeating: the bus could not take it now (a repeat of a call that did land is harmless). */
const TRANSIENT = [TransportError, Unavailable, RateLimited, InternalError];
const RETRY_DELAYS_MS = [500, 1000, 2000];
/** How long past its deadline a `runDirective` without a timeout waits for the bus's `DirectiveExpired` before it reads the directive itself. */
const EXPIRY_GRACE_MS = 30000;
/** The bus's bounds on a failure (CONTRACT §14): a code of 1–64 characters, a message of at most 1,000. */
const MAX_FAILURE_CODE = 64;
const MAX_TEXT = 1000;
const MAX_WAIT_MS = 60000;
/** setTimeout's longest delay; a longer wait is taken in turns. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const enc = encodeURIComponent;
type Obj = Record<string, unknown>;

const isTransient = (e: unknown): boolean => TRANSIENT.some((cls) => e instanceof cls);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function payloadOf(sig: Signal): Obj | undefined {
  const p = sig.payload;
  return p && typeof p === "object" && !Array.isArray(p) && typeof (p as Obj).directive_id === "string" ? (p as Obj) : undefined;
}

/** `exact.type`, or a prefix ending in `*` (`package.*`; `*` alone: every type). */
function checkPattern(pattern: string): void {
  if (typeof pattern !== "string" || pattern === "" || pattern.slice(0, -1).includes("*")) {
    throw new UsageError(`a directive type pattern is a type, or a prefix ending in "*" ("package.*"), got ${JSON.stringify(pattern)}`);
  }
}

/** A handler's return value as a directive result: a plain object as it is, nothing as `{}`, anything else `{value: …}`. */
function asResult(value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto === Object.prototype || proto === null) return value as Record<string, unknown>;
  }
  return { value };
}

/**
 * An error's name as a failure code: the name it was given (`TypeError`, a `SignalbusError`'s
 * class, `err.name = "Boom"`), or — when it only inherits a built-in's (`class PackageMissing
 * extends Error {}`) — its class's name.
 */
function errorName(e: unknown): string {
  if (!(e instanceof Error)) return "Error";
  let holder: object | null = e;
  while (holder && !Object.prototype.hasOwnProperty.call(holder, "name")) holder = Object.getPrototypeOf(holder) as object | null;
  const builtin = holder !== null && holder !== e && (globalThis as Record<string, unknown>)[String((holder as { constructor?: { name?: string } }).constructor?.name)] === (holder as { constructor?: unknown }).constructor;
  const ctorName = (e.constructor as { name?: string } | undefined)?.name;
  return (builtin ? ctorName : e.name) || ctorName || "Error";
}

function failureOf(code: string, message: string): { code: string; message: string } {
  const strip = (t: string): string => t.replace(/\0/g, "");
  return { code: strip(code).slice(0, MAX_FAILURE_CODE) || "Error", message: strip(message).slice(0, MAX_TEXT) };
}

interface Job {
  signal: Signal;
  directive: Directive;
}

/** The directive calls, `runDirective` and the `onDirective` worker of one client. */
export class Directives {
  private readonly logger: Logger;
  /** The `runDirective`s waiting, by directive id: told of each directive an action answers
   * (the issuer is sent no signal of its own cancel). */
  private readonly waiting = new Map<string, Set<(d: Directive) => void>>();
  /** The worker's handlers by type pattern; one route takes their requests. */
  private readonly workers = new Map<string, DirectiveHandler>();
  private unrouteWorker: (() => void) | undefined;
  private readonly jobs: Job[] = [];
  private readonly running = new Map<string, AbortController>();
  private active = 0;
  private closed = false;

  constructor(
    private readonly api: HttpApi,
    private readonly session: Session,
    private readonly o: DirectivesOptions,
  ) {
    this.logger = o.logger;
  }

  // -- calls ------------------------------------------------------------------------------

  async create(to: string, type: string, params: Record<string, unknown> = {}, options: CreateDirectiveOptions = {}): Promise<Directive> {
    const body: Obj = { to, type, params: params ?? {}, idempotency_key: options.idempotencyKey || `sbd-${randomId()}` };
    if (options.deadlineSeconds !== undefined) body.deadline_seconds = options.deadlineSeconds;
    if (options.correlationId !== undefined) body.correlation_id = options.correlationId;
    const { status, data } = await this.api.answer<Obj>("POST", "/v1/directives", { body });
    return { ...parseDirective(data), created: status === 201 };
  }

  async get(id: string, options: { waitMs?: number } = {}): Promise<Directive> {
    const waitMs = options.waitMs;
    if (waitMs !== undefined && !(typeof waitMs === "number" && waitMs >= 0 && waitMs <= MAX_WAIT_MS)) {
      throw new UsageError(`getDirective waitMs must be 0 … ${MAX_WAIT_MS} milliseconds, got ${String(waitMs)}`);
    }
    const wait = waitMs ? Math.ceil(waitMs / 1000) : undefined; // the bus takes whole seconds
    const data = await this.api.request<Obj>("GET", `/v1/directives/${enc(id)}`, {
      params: { wait },
      timeoutMs: wait ? this.o.requestTimeoutMs + wait * 1000 : undefined, // the bus holds the answer up to `wait`
    });
    return parseDirective(data);
  }

  async list(options: ListDirectivesOptions = {}): Promise<DirectivePage> {
    const data = await this.api.request<{ directives?: Obj[]; next_before?: string | null }>("GET", "/v1/directives", {
      params: { role: options.role, status: options.status, type: options.type, limit: options.limit, before: options.before },
    });
    return { directives: (data.directives ?? []).map(parseDirective), nextBefore: data.next_before ?? null };
  }

  start(id: string): Promise<Directive> {
    return this.act(id, "start", {});
  }

  progress(id: string, report: ProgressReport = {}): Promise<Directive> {
    const body: Obj = {};
    if (report.message !== undefined) body.message = report.message;
    if (report.percent !== undefined) body.percent = report.percent;
    return this.act(id, "progress", body);
  }

  complete(id: string, result: Record<string, unknown> = {}): Promise<Directive> {
    return this.act(id, "complete", { result });
  }

  fail(id: string, code: string, message = ""): Promise<Directive> {
    return this.act(id, "fail", { failure: { code, message } });
  }

  reject(id: string, reason?: string): Promise<Directive> {
    return this.act(id, "reject", reason === undefined ? {} : { reason });
  }

  cancel(id: string, reason?: string): Promise<Directive> {
    return this.act(id, "cancel", reason === undefined ? {} : { reason });
  }

  /** `POST /v1/directives/{id}/{action}`: the directive after it. */
  private async act(id: string, action: string, body: Obj): Promise<Directive> {
    try {
      return this.feed(parseDirective(await this.api.request<Obj>("POST", `/v1/directives/${enc(id)}/${action}`, { body })));
    } catch (e) {
      if (e instanceof InvalidTransition && e.directive) this.feed(e.directive);
      throw e;
    }
  }

  /** A waiting `runDirective` of this client hears of every action's answer on its directive:
   * an end it was sent no signal of (its own cancel) ends it too. */
  private feed(d: Directive): Directive {
    for (const tell of this.waiting.get(d.directiveId) ?? []) tell(d);
    return d;
  }

  // -- runDirective -----------------------------------------------------------------------

  /**
   * Create a directive and wait for its end, told by its lifecycle signals over the session
   * (taken and acked here, never handed to `onSignal` or `receive()`) — never polling: resolves
   * to its result, rejects with `DirectiveFailed`, `DirectiveRejected`, `DirectiveExpired` or
   * `DirectiveCanceled`, or `DirectiveTimeout` when it is still open after `timeoutMs` (left as
   * it is). Without a `timeoutMs` it waits until 30 s past the deadline. Either way it reads the
   * directive once before giving up: an end no signal told this client is still its answer.
   */
  async run(to: string, type: string, params: Record<string, unknown> = {}, options: RunDirectiveOptions = {}): Promise<Record<string, unknown>> {
    const { timeoutMs, ...createOptions } = options;
    if (timeoutMs !== undefined && !(typeof timeoutMs === "number" && timeoutMs > 0)) {
      throw new UsageError(`runDirective timeoutMs must be a positive number of milliseconds (or absent), got ${String(timeoutMs)}`);
    }
    if (!this.session.connected) {
      throw new TransportError(
        `runDirective ${type} to ${to}: no open session with ${this.session.url}, and its end could only be told over one (call connect() first; a lost session comes back by itself: waitConnected())`,
        { hint: NOTHING_SENT },
      );
    }
    const started = Date.now();
    const key = createOptions.idempotencyKey || `sbd-${randomId()}`;
    const me = this.session.identity;
    let id: string | undefined;
    // News of the directive (signals, answers) or why to stop waiting, in the order they came.
    const news: (Directive | SignalbusError)[] = [];
    let wake: (() => void) | undefined;
    const tell = (item: Directive | SignalbusError): void => {
      news.push(item);
      wake?.();
    };
    const delivery = this.session.delivery;
    // Taken before the worker's route; by the issuer and idempotency key until the create
    // answers, since the signals of a fast worker may come before that answer does.
    const unroute = delivery.route(
      {
        take: (sig) => {
          const p = TO_ISSUER.has(sig.type) ? payloadOf(sig) : undefined;
          if (!p) return false;
          if (!(id !== undefined && sig.correlationId === id) && !(p.idempotency_key === key && p.issuer === me)) return false;
          delivery.settle(sig.id, true);
          tell(parseDirective(p));
          return true;
        },
        close: tell,
      },
      true,
    );
    try {
      let current = await this.create(to, type, params, { ...createOptions, idempotencyKey: key });
      const directiveId = current.directiveId;
      id = directiveId;
      let tells = this.waiting.get(directiveId);
      if (!tells) this.waiting.set(directiveId, (tells = new Set()));
      tells.add(tell);
      for (;;) {
        for (const item of news.splice(0)) {
          if (item instanceof SignalbusError) throw item;
          if (item.directiveId === directiveId && !current.terminal) current = item;
        }
        if (current.terminal) break; // an idempotent repeat of an ended one answers at once
        const remaining = timeoutMs === undefined ? Date.parse(current.deadline) + EXPIRY_GRACE_MS - Date.now() : timeoutMs - (Date.now() - started);
        if (remaining <= 0) {
          current = await this.lastLook(current);
          if (current.terminal) break;
          throw new DirectiveTimeout(
            `directive ${type} ${directiveId} to ${to} had not ended ${timeoutMs !== undefined ? `within ${timeoutMs} ms` : "by its deadline"} (status ${current.status})`,
            { details: { directive_id: directiveId, directive: current.raw } },
          );
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(remaining, MAX_TIMER_MS));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
          if (news.length) wake();
        });
        wake = undefined;
      }
      if (current.status === "completed") return current.result ?? {};
      throw directiveEnded(current);
    } finally {
      unroute();
      if (id !== undefined) {
        const tells = this.waiting.get(id);
        tells?.delete(tell);
        if (tells?.size === 0) this.waiting.delete(id);
      }
    }
  }

  /** One read of the directive before a wait gives up: it may have ended in a way no signal told
   * this client (canceled by another client of the issuer). */
  private async lastLook(current: Directive): Promise<Directive> {
    try {
      return await this.get(current.directiveId);
    } catch (e) {
      this.logger.debug(`could not read directive ${current.directiveId} before giving up: ${(e as Error).message}`);
      return current;
    }
  }

  // -- onDirective ------------------------------------------------------------------------

  /**
   * Serve the directives of a type (`typePattern`: exact, or a prefix ending in `*`; for a type
   * several match, the exact one, else the longest prefix) assigned to this identity or its
   * groups, as their `DirectiveRequested` signals come. Each is started (claimed) first; one that
   * ended or another member claimed is skipped. The request is acked once the directive is
   * settled either way. A pattern registered twice is a `UsageError`. Returns a function that
   * stops serving the pattern.
   */
  on(typePattern: string, handler: DirectiveHandler): () => void {
    checkPattern(typePattern);
    if (typeof handler !== "function") throw new TypeError("onDirective takes a handler function: (directive, progress, signal) => result");
    if (this.workers.has(typePattern)) throw new UsageError(`a handler for directive type pattern ${JSON.stringify(typePattern)} is already registered`);
    this.workers.set(typePattern, handler);
    this.unrouteWorker ??= this.session.delivery.route({ take: (sig) => this.takeForWorker(sig), close: () => this.close() });
    return () => {
      if (this.workers.get(typePattern) === handler) this.workers.delete(typePattern);
    };
  }

  /** The most specific pattern's handler: the exact type, else the longest prefix. */
  private handlerFor(type: string): DirectiveHandler | undefined {
    const exact = this.workers.get(type);
    if (exact) return exact;
    let best: string | undefined;
    for (const pattern of this.workers.keys()) {
      if (pattern.endsWith("*") && type.startsWith(pattern.slice(0, -1)) && (best === undefined || pattern.length > best.length)) best = pattern;
    }
    return best === undefined ? undefined : this.workers.get(best);
  }

  /** A request of a type served here, or the end of one handed to this identity (not one it
   * issued: those are a `runDirective`'s, or the caller's). */
  private takeForWorker(sig: Signal): boolean {
    if (sig.type !== REQUESTED && !WORKER_ENDINGS.has(sig.type)) return false;
    const p = payloadOf(sig);
    if (!p || typeof p.type !== "string" || !this.handlerFor(p.type)) return false;
    if (sig.type === REQUESTED) {
      this.jobs.push({ signal: sig, directive: parseDirective(p) });
      this.pump();
      return true;
    }
    if (p.issuer === this.session.identity) return false;
    this.ended(p.directive_id as string, sig.type);
    this.session.delivery.settle(sig.id, true);
    return true;
  }

  /** The directive ended elsewhere (canceled, expired): a queued request is skipped when its turn
   * comes (`start` answers `InvalidTransition`), a running handler's `signal` aborts. */
  private ended(id: string, how: string): void {
    const running = this.running.get(id);
    if (running) {
      this.logger.debug(`directive ${id}: ${how} while its handler runs; aborting it`);
      running.abort(new Error(how));
    }
  }

  /** The client closed: no more requests; running handlers are aborted and their requests left
   * unacked (they come back on the next session, where this identity's started ones resume). */
  private close(): void {
    this.closed = true;
    this.unrouteWorker = undefined;
    for (const c of this.running.values()) c.abort(new Error("the client closed"));
  }

  private pump(): void {
    while (this.jobs.length && !this.closed && this.active < this.o.maxConcurrent) {
      const job = this.jobs.shift() as Job;
      this.active += 1;
      void this.work(job).finally(() => {
        this.active -= 1;
        this.pump();
      });
    }
  }

  /** One request: serve it, then settle its signal — acked, unless the bus still could not take
   * a call after the retries or the client closed mid-way (it comes back on the next session). */
  private async work(job: Job): Promise<void> {
    let ack = true;
    try {
      ack = await this.serve(job.directive);
    } catch (e) {
      if (isTransient(e)) {
        this.logger.warn(`directive request ${job.signal.id} left for the next session: ${(e as Error).message}`);
        ack = false;
      } else this.logger.error(`the directive worker failed on request ${job.signal.id}`, e);
    }
    this.session.delivery.settle(job.signal.id, ack && !this.closed);
  }

  /** Start, handle, complete or fail one directive; false when the client closed mid-way. */
  private async serve(requested: Directive): Promise<boolean> {
    const handler = this.handlerFor(requested.type);
    if (!handler) return true; // unregistered meanwhile: settled
    const id = requested.directiveId;
    const me = this.session.identity;
    let d: Directive;
    try {
      d = await this.retrying(() => this.start(id));
    } catch (e) {
      const now = e instanceof InvalidTransition ? e.directive : undefined;
      if (e instanceof InvalidTransition && now?.status === "started" && now.claimedBy === me) {
        d = now; // this identity started it before (a session ago): resume the work
      } else if (e instanceof AlreadyClaimed || e instanceof InvalidTransition || e instanceof NotFound || e instanceof Forbidden) {
        this.logger.debug(`directive ${id} skipped: ${(e as Error).message}`); // another member has it, it ended, or it is not ours any more
        return true;
      } else throw e;
    }
    const abort = new AbortController();
    this.running.set(id, abort);
    const reports: Promise<unknown>[] = [];
    const progress: ProgressReporter = (report) => {
      const sent = this.progress(id, report);
      reports.push(sent.catch((err: Error) => this.logger.debug(`a progress report on ${id} failed: ${err.message}`)));
      return sent;
    };
    let value: unknown;
    let thrown: { error: unknown } | undefined;
    try {
      value = await handler(d, progress, abort.signal);
    } catch (e) {
      thrown = { error: e };
    } finally {
      this.running.delete(id);
    }
    await Promise.all(reports);
    if (this.closed) return false;
    if (thrown) {
      if (!abort.signal.aborted) this.logger.warn(`the directive handler failed on ${id} (${d.type}); failing it`, thrown.error);
      const e = thrown.error;
      await this.failQuietly(id, errorName(e), e instanceof Error ? e.message : String(e));
      return true;
    }
    const result = asResult(value);
    try {
      JSON.stringify(result);
      await this.retrying(() => this.complete(id, result));
    } catch (e) {
      if (e instanceof InvalidTransition || e instanceof NotFound || e instanceof Forbidden) this.tooLate(id, "result", e);
      else if (isTransient(e)) throw e;
      else if (e instanceof SignalbusError || e instanceof TypeError) {
        // a result the bus refuses (too large, not an object) or that is not JSON
        await this.failQuietly(id, errorName(e), `the handler's result was refused: ${e instanceof SignalbusError ? e.detail : e.message}`);
      } else throw e;
    }
    return true;
  }

  /** `fail`; an end that came first (canceled, expired) is logged, not thrown. */
  private async failQuietly(id: string, code: string, message: string): Promise<void> {
    const failure = failureOf(code, message);
    try {
      await this.retrying(() => this.fail(id, failure.code, failure.message));
    } catch (e) {
      if (e instanceof InvalidTransition || e instanceof NotFound || e instanceof Forbidden) this.tooLate(id, "failure", e);
      else throw e;
    }
  }

  private tooLate(id: string, what: string, e: SignalbusError): void {
    const now = e instanceof InvalidTransition ? e.directive : undefined;
    if (now && now.claimedBy === this.session.identity && (now.status === "completed" || now.status === "failed")) {
      this.logger.debug(`directive ${id} was already ${now.status} (a repeated call)`);
    } else this.logger.info(`directive ${id} ended before its ${what} could be sent: ${e.message}`);
  }

  /** `call()`, repeated after 0.5, 1 and 2 s while the bus cannot take it (unreachable, `unavailable`, `rate_limited`, `internal`). */
  private async retrying<T>(call: () => Promise<T>): Promise<T> {
    for (const delay of RETRY_DELAYS_MS) {
      try {
        return await call();
      } catch (e) {
        if (!isTransient(e) || this.closed) throw e;
        this.logger.debug(`a directive call failed (${(e as Error).message}): retrying in ${delay} ms`);
        await sleep(delay);
      }
    }
    return call();
  }
}
