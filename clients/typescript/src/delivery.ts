/**
 * Delivery of pushed signals: each one once (redeliveries dropped by id in a bounded window,
 * re-acked when already handled), to a route that takes it (the directive worker, a
 * `runDirective`), to a waiting `ask`, to the handler or to `receive()`; and the acks after the
 * handler returns, batched.
 *
 * Deliberately no I/O of its own: the session engine (`session.ts`) hands it each pushed signal
 * and gives it the function that sends an ack batch, so it imports neither the session nor the
 * facade.
 */

import { ClientClosed, RequestTimeout, UsageError, type SignalbusError } from "./errors.js";
import type { Logger } from "./logger.js";
import { parseSignal, type Signal } from "./types.js";

export type SignalHandler = (signal: Signal) => void | Promise<void>;

/**
 * Takes the signals it wants before the handler and `receive()` see them (the directive worker
 * takes `DirectiveRequested`, a `runDirective` its directive's lifecycle signals). A route that
 * takes a signal owns it: it calls `Delivery.settle` when done (acked, or left to come back).
 */
export interface Route {
  /** True: the signal is this route's. Called once per signal (redeliveries deduped first). */
  take(signal: Signal): boolean;
  /** The client closed: nothing more will come. */
  close?(error: SignalbusError): void;
}

export interface DeliveryOptions {
  handler: SignalHandler | undefined;
  autoAck: boolean;
  /** How many signal ids are remembered to drop redeliveries. */
  dedupeWindow: number;
  /** How many handler calls may run at once (default 1: one after the other, in arrival order). */
  maxConcurrentHandlers?: number;
  logger: Logger;
  /** Sends one ack batch (over the session or HTTP); resolves to how many the bus took. */
  sendAcks: (ids: string[]) => Promise<number>;
}

/** The dedupe window, the inbox, the asks waiting for replies and the ack buffer. */
export class Delivery {
  duplicatesDropped = 0;
  private readonly logger: Logger;
  private closed = false;
  private seen = new Map<string, boolean>(); // id -> handled (true) / in progress (false)
  private asks = new Map<string, { resolve(s: Signal): void; reject(e: SignalbusError): void }>();
  private routes: Route[] = [];
  private queue: Signal[] = [];
  private receivers: { take(s: Signal): void; fail(e: SignalbusError): void }[] = [];
  private running = 0;
  private readonly maxConcurrent: number;
  private ackBuffer: string[] = [];

  constructor(private readonly o: DeliveryOptions) {
    this.logger = o.logger;
    const max = o.maxConcurrentHandlers ?? 1;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxConcurrentHandlers must be an integer of at least 1, got ${String(max)}`);
    this.maxConcurrent = max;
  }

  get acksWaiting(): boolean {
    return this.ackBuffer.length > 0;
  }

  /** No more signals: the handler stops after the one it runs. */
  close(): void {
    this.closed = true;
  }

  /** Whoever still waits (a `receive()`, an `ask`) fails with ClientClosed. */
  failWaiters(): void {
    const receivers = this.receivers;
    this.receivers = [];
    for (const r of receivers) r.fail(new ClientClosed("the client was closed while waiting for a signal"));
    for (const a of this.asks.values()) a.reject(new ClientClosed("the client was closed while waiting for a reply"));
    this.asks.clear();
    const routes = this.routes;
    this.routes = [];
    for (const r of routes) r.close?.(new ClientClosed("the client was closed while waiting for a directive"));
  }

  /**
   * Add a route, tried before asks, the handler and `receive()`: in the order added, or before
   * the others with `first` (a `runDirective` waiting goes before the worker); returns its remover.
   */
  route(route: Route, first = false): () => void {
    if (first) this.routes.unshift(route);
    else this.routes.push(route);
    return () => {
      this.routes = this.routes.filter((r) => r !== route);
    };
  }

  /**
   * A route is done with a signal it took: `ack` true acks it (whatever `autoAck` says: the
   * caller never saw it) and a redelivery is re-acked; false forgets it, so it is taken again
   * when the bus redelivers it on the next session.
   */
  settle(id: string, ack: boolean): void {
    if (!ack) {
      this.seen.delete(id);
      return;
    }
    this.remember(id, true);
    this.queueAck(id, true); // now: the queue of signals for receive() may wait on the caller for long
  }

  /** Ack `ids`, marking the ones seen as handled (so a redelivery is re-acked). */
  async ack(ids: string[]): Promise<number> {
    for (const id of ids) if (this.seen.has(id)) this.remember(id, true);
    return ids.length ? this.o.sendAcks(ids) : 0;
  }

  /** A promise resolved by the first pushed signal carrying `correlationId` (rejected on close). */
  expectReply(correlationId: string): Promise<Signal> {
    const reply = new Promise<Signal>((resolve, reject) => this.asks.set(correlationId, { resolve, reject }));
    reply.catch(() => {}); // rejected only on close, while the caller's race may be gone
    return reply;
  }

  forgetReply(correlationId: string): void {
    this.asks.delete(correlationId);
  }

  private remember(id: string, handled: boolean): void {
    this.seen.delete(id);
    this.seen.set(id, handled);
    while (this.seen.size > this.o.dedupeWindow) this.seen.delete(this.seen.keys().next().value as string);
  }

  onPush(obj: Record<string, unknown>): void {
    const sig = parseSignal(obj);
    if (this.seen.has(sig.id)) {
      this.duplicatesDropped += 1;
      this.logger.debug(`duplicate signal ${sig.id} (redelivered=${sig.redelivered}) dropped`);
      if (this.seen.get(sig.id) && this.o.autoAck) this.queueAck(sig.id); // the first ack may have died with the old session
      return;
    }
    for (const route of this.routes) {
      let taken = false;
      try {
        taken = route.take(sig);
      } catch (e) {
        this.logger.error(`a route failed on signal ${sig.id}; handed on`, e);
      }
      if (taken) {
        if (!this.seen.has(sig.id)) this.remember(sig.id, false); // until the route settles it (unless it did already)
        return;
      }
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
    if (this.o.handler) this.pump();
  }

  private queueAck(id: string, now = false): void {
    this.ackBuffer.push(id);
    if (now || this.ackBuffer.length >= 100 || this.queue.length === 0) {
      this.flushAcks().catch((e: SignalbusError) =>
        this.logger.warn(`ack not sent (${e.message}): the signals come back on the next session and are deduped`),
      );
    }
  }

  async flushAcks(): Promise<void> {
    const ids = this.ackBuffer;
    this.ackBuffer = [];
    if (ids.length) await this.o.sendAcks(ids);
  }

  /**
   * Start handlers on queued signals, in arrival order, while fewer than `maxConcurrentHandlers`
   * run (1: one after the other). Each is acked when its own handler returns.
   */
  private pump(): void {
    const handler = this.o.handler;
    if (!handler) return;
    while (this.queue.length && !this.closed && this.running < this.maxConcurrent) {
      const sig = this.queue.shift() as Signal;
      this.running += 1;
      void this.handle(handler, sig).finally(() => {
        this.running -= 1;
        this.pump();
      });
    }
  }

  private async handle(handler: SignalHandler, sig: Signal): Promise<void> {
    try {
      await handler(sig);
    } catch (e) {
      this.logger.error(`the signal handler failed for ${sig.id}; not acked: it comes back on the next session`, e);
      this.seen.delete(sig.id);
      return;
    }
    this.remember(sig.id, true);
    if (this.o.autoAck) this.queueAck(sig.id);
  }

  /** The next pushed signal (when there is no `onSignal` handler). Ack it with `ack`. */
  receive(timeoutMs?: number): Promise<Signal> {
    if (this.o.handler) return Promise.reject(new UsageError("this client has an onSignal handler: signals go there, not to receive()"));
    const next = this.queue.shift();
    if (next) return Promise.resolve(next);
    if (this.closed) return Promise.reject(new ClientClosed("the client is closed"));
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
          reject(new RequestTimeout(`no signal within ${timeoutMs} ms`, { hint: "nothing arrived in time: call receive() again" }));
        }, timeoutMs);
      }
    });
  }
}
