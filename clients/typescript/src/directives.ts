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
  InvalidRequest,
  InvalidTransition,
  NOTHING_SENT,
  NotFound,
  PayloadTooLarge,
  TransportError,
  UsageError,
  directiveEnded,
  type SignalbusError,
} from "./errors.js";
import type { HttpApi } from "./http.js";
import { randomId } from "./ids.js";
import type { Logger } from "./logger.js";
import type { Session } from "./session.js";
import {
  isTerminal,
  parseDirective,
  type CreateDirectiveOptions,
  type CreatedDirective,
  type Directive,
  type DirectivePage,
  type ListDirectivesOptions,
  type Signal,
} from "./types.js";

/** Reports the claimer's progress on the directive being handled (`progressDirective`); resolves to the directive after it. */
export type ProgressReporter = (message?: string, percent?: number) => Promise<Directive>;

/**
 * An `onDirective` handler: does the work of `directive` (already started: claimed by you),
 * reporting `progress` as it goes. What it returns (or resolves to) completes the directive — a
 * plain object as the result, anything else as `{value: …}`; what it throws fails it (code: the
 * error's name or class name, message: its message). `signal` aborts when the directive is
 * canceled or expires meanwhile (its end is then the bus's, not the handler's).
 */
export type DirectiveHandler = (directive: Directive, progress: ProgressReporter, signal: AbortSignal) => unknown;

export interface DirectivesOptions {
  requestTimeoutMs: number;
  /** How many `onDirective` handlers may run at once (the client's `maxConcurrentHandlers`). */
  maxConcurrent: number;
  logger: Logger;
}

/** The lifecycle signals to the issuer: what a `runDirective` waits on. */
const TO_ISSUER = new Set(["DirectiveStarted", "DirectiveCompleted", "DirectiveFailed", "DirectiveRejected", "DirectiveExpired"]);
/** The lifecycle signals to a worker after the request: the directive's end came from elsewhere. */
const ENDED_FOR_WORKER = new Set(["DirectiveCanceled", "DirectiveExpired"]);
/** The bus's bounds on a failure (CONTRACT §14): a code of 1–64 characters, a message of at most 1,000. */
const MAX_FAILURE_CODE = 64;
const MAX_TEXT = 1000;
const MAX_WAIT_MS = 60000;

const enc = encodeURIComponent;
type Obj = Record<string, unknown>;

function payloadOf(sig: Signal): Obj | undefined {
  const p = sig.payload;
  return p && typeof p === "object" && !Array.isArray(p) && typeof (p as Obj).directive_id === "string" ? (p as Obj) : undefined;
}

/** `exact.type`, or a prefix ending in `*` (`package.*`; `*` alone: every type). */
function typeMatcher(pattern: string): (type: string) => boolean {
  if (typeof pattern !== "string" || pattern === "" || pattern.slice(0, -1).includes("*")) {
    throw new UsageError(`onDirective takes a directive type or a prefix ending in "*" ("package.*"), got ${JSON.stringify(pattern)}`);
  }
  if (!pattern.endsWith("*")) return (type) => type === pattern;
  const prefix = pattern.slice(0, -1);
  return (type) => type.startsWith(prefix);
}

/** A handler's return value as a directive result: a plain object as it is, anything else `{value: …}`. */
function asResult(value: unknown): Record<string, unknown> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto === Object.prototype || proto === null) return value as Record<string, unknown>;
  }
  return { value: value === undefined ? null : value };
}

/** What a handler threw, as a failure: its name (`TypeError`) or, for `class Boom extends Error {}`, its class's name. */
function failureOf(e: unknown): { code: string; message: string } {
  let code = "Error";
  let message: string;
  if (e instanceof Error) {
    const ctorName = (e.constructor as { name?: string } | undefined)?.name;
    code = e.name && e.name !== "Error" ? e.name : ctorName || "Error";
    message = e.message;
  } else message = String(e);
  return { code: code.slice(0, MAX_FAILURE_CODE), message: message.slice(0, MAX_TEXT) };
}

interface Job {
  signal: Signal;
  directive: Directive;
  handler: DirectiveHandler;
  canceled: boolean;
}

/** The directive calls, `runDirective` and the `onDirective` worker of one client. */
export class Directives {
  private readonly logger: Logger;
  /** The `runDirective`s waiting, by directive id: told when an answer shows it canceled (the one end its issuer gets no signal of). */
  private readonly waiting = new Map<string, Set<(d: Directive) => void>>();
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

  async create(to: string, type: string, params: Record<string, unknown>, options: CreateDirectiveOptions = {}): Promise<CreatedDirective> {
    const body: Obj = { to, type, params: params ?? {}, idempotency_key: options.idempotencyKey || `sbd-${randomId()}` };
    if (options.deadlineSeconds !== undefined) body.deadline_seconds = options.deadlineSeconds;
    if (options.correlationId !== undefined) body.correlation_id = options.correlationId;
    const { status, data } = await this.api.answer<Obj>("POST", "/v1/directives", { body });
    const d = this.seen(parseDirective(data));
    return { ...d, created: status === 201 };
  }

  async get(id: string, options: { waitMs?: number } = {}): Promise<Directive> {
    const waitMs = options.waitMs;
    if (waitMs !== undefined && !(typeof waitMs === "number" && waitMs >= 0 && waitMs <= MAX_WAIT_MS)) {
      throw new UsageError(`getDirective waitMs must be 0 … ${MAX_WAIT_MS} milliseconds, got ${String(waitMs)}`);
    }
    const wait = waitMs ? Math.ceil(waitMs / 1000) : undefined;
    const data = await this.api.request<Obj>("GET", `/v1/directives/${enc(id)}`, {
      params: { wait },
      timeoutMs: wait ? this.o.requestTimeoutMs + wait * 1000 : undefined,
    });
    return this.seen(parseDirective(data));
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

  progress(id: string, message?: string, percent?: number): Promise<Directive> {
    const body: Obj = {};
    if (message !== undefined) body.message = message;
    if (percent !== undefined) body.percent = percent;
    return this.act(id, "progress", body);
  }

  complete(id: string, result: Record<string, unknown>): Promise<Directive> {
    return this.act(id, "complete", { result });
  }

  fail(id: string, code: string, message: string): Promise<Directive> {
    return this.act(id, "fail", { failure: { code, message } });
  }

  reject(id: string, reason?: string): Promise<Directive> {
    return this.act(id, "reject", reason === undefined ? {} : { reason });
  }

  cancel(id: string, reason?: string): Promise<Directive> {
    return this.act(id, "cancel", reason === undefined ? {} : { reason });
  }

  private async act(id: string, action: string, body: Obj): Promise<Directive> {
    try {
      return this.seen(parseDirective(await this.api.request<Obj>("POST", `/v1/directives/${enc(id)}/${action}`, { body })));
    } catch (e) {
      if (e instanceof InvalidTransition && e.directive) this.seen(e.directive);
      throw e;
    }
  }

  /**
   * Every directive answer passes here: a `runDirective` waiting on one that was canceled (by
   * this client: the issuer gets no signal of a cancel) is told. Its other ends come as signals,
   * which the run waits for, so that it takes (and acks) them all.
   */
  private seen(d: Directive): Directive {
    if (d.status === "canceled") for (const tell of this.waiting.get(d.directiveId) ?? []) tell(d);
    return d;
  }

  // -- runDirective -----------------------------------------------------------------------

  /**
   * Create a directive and wait for its end, told by its lifecycle signals over the session
   * (taken and acked here, never handed to `onSignal` or `receive()`): resolves to its result,
   * rejects with `DirectiveFailed`, `DirectiveRejected`, `DirectiveExpired` or `DirectiveCanceled`,
   * or `DirectiveTimeout` when it is still open after `timeoutMs` (left as it is).
   */
  async run(to: string, type: string, params: Record<string, unknown>, timeoutMs: number, options: CreateDirectiveOptions = {}): Promise<Record<string, unknown>> {
    if (!(typeof timeoutMs === "number" && timeoutMs > 0)) {
      throw new UsageError(`runDirective timeoutMs must be a positive number of milliseconds, got ${String(timeoutMs)}`);
    }
    if (!this.session.connected) {
      throw new TransportError(
        `runDirective ${type} to ${to}: no open session with ${this.session.url}, and its end could only be told over one (call connect() first; a lost session comes back by itself: waitConnected())`,
        { hint: NOTHING_SENT },
      );
    }
    const started = Date.now();
    const key = options.idempotencyKey || `sbd-${randomId()}`;
    const me = this.session.identity;
    let id: string | undefined;
    let end!: (d: Directive) => void;
    let abandon!: (e: SignalbusError) => void;
    const ended = new Promise<Directive>((resolve, reject) => {
      end = resolve;
      abandon = reject;
    });
    ended.catch(() => {}); // rejected only on close, while the race below may be gone
    const delivery = this.session.delivery;
    // Taken before the worker's routes; by the idempotency key until the create answers, since
    // the signals of a fast worker may come before that answer does.
    const unroute = delivery.route(
      {
        take: (sig) => {
          const p = TO_ISSUER.has(sig.type) ? payloadOf(sig) : undefined;
          if (!p || !(id !== undefined ? p.directive_id === id : p.idempotency_key === key && p.issuer === me)) return false;
          const d = parseDirective(p);
          delivery.settle(sig.id, true);
          if (isTerminal(d.status)) end(d);
          return true;
        },
        close: (e) => abandon(e),
      },
      true,
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const created = await this.create(to, type, params, { ...options, idempotencyKey: key });
      id = created.directiveId;
      let tells = this.waiting.get(id);
      if (!tells) this.waiting.set(id, (tells = new Set()));
      tells.add(end);
      if (isTerminal(created.status)) end(created); // the key answered one that ended already
      const left = Math.max(0, timeoutMs - (Date.now() - started));
      const timedOut = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), left)));
      let d = await Promise.race([ended, timedOut]);
      if (d === undefined) {
        // Not told in time; the truth is the bus's (ended by a party this client never hears from?).
        let now: Directive = created;
        try {
          now = await this.get(id);
        } catch (e) {
          this.logger.debug(`runDirective: could not read directive ${id} after the timeout: ${(e as Error).message}`);
        }
        if (!isTerminal(now.status)) {
          throw new DirectiveTimeout(`directive ${id} (${type} to ${to}) is still ${now.status} after ${timeoutMs} ms`, {
            details: { directive_id: id, directive: now.raw },
          });
        }
        d = now;
      }
      if (d.status === "completed") return d.result ?? {};
      throw directiveEnded(d);
    } finally {
      clearTimeout(timer);
      unroute();
      if (id !== undefined) {
        const tells = this.waiting.get(id);
        tells?.delete(end);
        if (tells?.size === 0) this.waiting.delete(id);
      }
    }
  }

  // -- onDirective ------------------------------------------------------------------------

  /**
   * Work on the directives of a type (`typePattern`: exact, or a prefix ending in `*`) assigned
   * to this client's identity or its groups, as their `DirectiveRequested` signals come. Each is
   * started (claimed) first; one that ended or another member claimed is skipped. The signal is
   * acked once the directive is settled either way. Returns a function that stops taking them.
   */
  on(typePattern: string, handler: DirectiveHandler): () => void {
    const matches = typeMatcher(typePattern);
    if (typeof handler !== "function") throw new TypeError("onDirective takes a handler function");
    const delivery = this.session.delivery;
    return delivery.route({
      take: (sig) => {
        const p = payloadOf(sig);
        if (!p || typeof p.type !== "string" || !matches(p.type)) return false;
        if (sig.type === "DirectiveRequested") {
          this.jobs.push({ signal: sig, directive: parseDirective(p), handler, canceled: false });
          this.pump();
          return true;
        }
        // Its end, told to the worker (an issuer's own DirectiveExpired is the issuer's business).
        if (ENDED_FOR_WORKER.has(sig.type) && p.issuer !== this.session.identity) {
          this.ended(p.directive_id as string, sig.type);
          delivery.settle(sig.id, true);
          return true;
        }
        return false;
      },
      close: () => {
        this.closed = true;
      },
    });
  }

  /** The directive ended elsewhere (canceled, expired): a queued job is dropped, a running handler aborted. */
  private ended(id: string, how: string): void {
    for (const job of this.jobs) if (job.directive.directiveId === id) job.canceled = true;
    const running = this.running.get(id);
    if (running) {
      this.logger.debug(`directive ${id}: ${how} while its handler runs; aborting it`);
      running.abort(new Error(`${how}`));
    }
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

  /** Start, handle, complete or fail one request; settle its signal. */
  private async work(job: Job): Promise<void> {
    const delivery = this.session.delivery;
    const id = job.directive.directiveId;
    if (job.canceled) return delivery.settle(job.signal.id, true);
    let d: Directive;
    try {
      d = await this.start(id);
    } catch (e) {
      const now = e instanceof InvalidTransition ? e.directive : undefined;
      if (now && now.status === "started" && now.claimedBy === this.session.identity) {
        d = now; // claimed by this identity already: a redelivery after the worker stopped mid-way, handled again
      } else if (e instanceof AlreadyClaimed || e instanceof InvalidTransition || e instanceof NotFound || e instanceof Forbidden) {
        this.logger.debug(`directive ${id} skipped: ${(e as Error).message}`);
        return delivery.settle(job.signal.id, true);
      } else {
        this.logger.warn(`directive ${id} not started (${(e as Error).message}): its request comes back on the next session`);
        return delivery.settle(job.signal.id, false);
      }
    }
    const abort = new AbortController();
    this.running.set(id, abort);
    let outcome: { result: Record<string, unknown> } | { failure: { code: string; message: string } };
    try {
      outcome = { result: asResult(await job.handler(d, (message, percent) => this.progress(id, message, percent), abort.signal)) };
    } catch (e) {
      outcome = { failure: failureOf(e) };
      if (!abort.signal.aborted) this.logger.warn(`the directive handler failed on ${id} (${d.type}); failing it`, e);
    } finally {
      this.running.delete(id);
    }
    try {
      if (abort.signal.aborted) this.logger.debug(`directive ${id} ended while its handler ran; nothing to report`);
      else if ("result" in outcome) await this.completeOrFail(id, outcome.result);
      else await this.fail(id, outcome.failure.code, outcome.failure.message);
    } catch (e) {
      if (e instanceof TransportError) {
        this.logger.warn(`directive ${id}: its end was not told (${e.message}); the request comes back on the next session`);
        return delivery.settle(job.signal.id, false);
      }
      if (e instanceof InvalidTransition) this.logger.debug(`directive ${id} ended meanwhile (${e.directive?.status ?? "?"}): ${e.message}`);
      else this.logger.error(`directive ${id}: its end was refused`, e);
    }
    delivery.settle(job.signal.id, true);
  }

  /** Complete; a result the bus will not take (too large, not JSON) fails the directive instead, saying why. */
  private async completeOrFail(id: string, result: Record<string, unknown>): Promise<Directive> {
    try {
      JSON.stringify(result);
    } catch (e) {
      return this.fail(id, "TypeError", `the handler's result is not JSON: ${(e as Error).message}`.slice(0, MAX_TEXT));
    }
    try {
      return await this.complete(id, result);
    } catch (e) {
      if (!(e instanceof PayloadTooLarge || e instanceof InvalidRequest)) throw e;
      this.logger.warn(`directive ${id}: the bus refused the handler's result (${e.message}); failing it`);
      return this.fail(id, e.name, e.detail.slice(0, MAX_TEXT));
    }
  }
}
