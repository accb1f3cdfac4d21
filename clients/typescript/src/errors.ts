/** Typed errors. Every error carries the bus's `code` and says what to do (`hint`). */

import { toDirective, type Directive, type DirectiveFailure } from "./directive-object.js";

export type ErrorDetails = Record<string, unknown>;

export interface ErrorInit {
  code?: string;
  status?: number;
  hint?: string;
  details?: ErrorDetails;
  cause?: unknown;
}

/**
 * Base class of every error this client throws. `code` is the bus's error code (CONTRACT §8) or a
 * client-side one (`transport`, `timeout`, `closed`, `spool_full`, `ask_timeout`,
 * `expired_in_spool`, `protocol`, `directive_failed`, `directive_rejected`, `directive_expired`,
 * `directive_canceled`, `directive_timeout`); `status` the HTTP status when the answer came over HTTP;
 * `hint` what to do about it; `details` every other field of the bus's error object.
 */
export class SignalbusError extends Error {
  static readonly code: string = "error";
  static readonly hint: string = "";
  readonly code: string;
  /** The §8 HTTP status of the code, whichever transport (HTTP or the session) carried the answer. */
  readonly status: number | undefined;
  /** What to do about it (the operation may replace the class's generic hint: `withHint`). */
  hint: string;
  readonly details: ErrorDetails;
  /** The bus's message, without the code and hint. */
  readonly detail: string;

  constructor(message: string, init: ErrorInit = {}) {
    const ctor = new.target as unknown as { code: string; hint: string };
    const code = init.code ?? ctor.code;
    const hint = init.hint ?? ctor.hint;
    super(hint ? `${code}: ${message} (${hint})` : `${code}: ${message}`, init.cause !== undefined ? { cause: init.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.hint = hint;
    this.status = init.status ?? HTTP_STATUS[code];
    this.details = { ...(init.details ?? {}) };
    this.detail = message;
  }

  /** Replace the hint (the operation knows better than the class what to do); returns this. */
  withHint(hint: string): this {
    this.hint = hint;
    this.message = hint ? `${this.code}: ${this.detail} (${hint})` : `${this.code}: ${this.detail}`;
    return this;
  }
}

/**
 * CONTRACT §8 (docs/http.md): the HTTP status of each bus error code. An error that came over the
 * WebSocket session carries the same status as over HTTP, so `status` never depends on the transport.
 */
export const HTTP_STATUS: Readonly<Record<string, number>> = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  unknown_recipient: 404,
  unknown_group: 404,
  recipient_unavailable: 409,
  already_registered: 409,
  invalid_transition: 409,
  already_claimed: 409,
  idempotency_conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

/**
 * A mistake in the calling code (`receive()` on a client with an `onSignal` handler, a timeout
 * that is not positive, ...): a plain `Error` (name `UsageError`), never sent to the bus, never
 * retried. Not a `SignalbusError`: fix the code.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export class InvalidRequest extends SignalbusError {
  static override readonly code = "invalid_request";
  static override readonly hint = "fix the request: the message names the field; retrying it unchanged fails again";
}
/** The bus did not take the token: missing, wrong, rotated, revoked (`token revoked`), expired (`token expired`) or its agent removed. */
export class Unauthorized extends SignalbusError {
  static override readonly code = "unauthorized";
  static override readonly hint = "the token is missing, wrong, rotated, revoked, expired or removed: get a valid token (admin rotate or issueToken) and build a new client";
}
/**
 * The token may not make this call. `scope` names the scope it lacks (CONTRACT §17) when that is
 * why; `undefined` for the other reasons (agent vs admin, another tenant, a plugin you do not own,
 * a directive action that is not yours).
 */
export class Forbidden extends SignalbusError {
  static override readonly code = "forbidden";
  static override readonly hint = "this token may not do that (a scope it lacks: scope; agent vs admin, another tenant, a plugin you do not own)";
  get scope(): string | undefined {
    return typeof this.details.scope === "string" ? this.details.scope : undefined;
  }
}
export class NotFound extends SignalbusError {
  static override readonly code = "not_found";
  static override readonly hint = "no such resource visible to you; check the id or name";
}
export class UnknownRecipient extends SignalbusError {
  static override readonly code = "unknown_recipient";
  static override readonly hint = "the recipient is not registered in your tenant: register it (admin) or fix the name";
}
/** A sync send bounced: the recipient was stale or offline; nothing was queued, nothing will ever be delivered. */
export class RecipientUnavailable extends SignalbusError {
  static override readonly code = "recipient_unavailable";
  static override readonly hint = "nothing was queued: send async to queue it, or retry later with a new dedupe_key";
  get recipientState(): string | undefined {
    return this.details.recipient_state as string | undefined;
  }
  get signalId(): string | undefined {
    return this.details.signal_id as string | undefined;
  }
}
/** A send, a directive or a group call named a group (`@name`) that does not exist in your tenant. */
export class UnknownGroup extends SignalbusError {
  static override readonly code = "unknown_group";
  static override readonly hint = "no such group in your tenant: create it (admin) or fix the name";
}
export class AlreadyRegistered extends SignalbusError {
  static override readonly code = "already_registered";
  static override readonly hint = "the identity exists: rotate its token instead of registering it again";
}
export class PayloadTooLarge extends SignalbusError {
  static override readonly code = "payload_too_large";
  static override readonly hint = "payloads are at most 64 KiB encoded, plugin states 1 MiB: send less, or a reference to it";
}
export class RateLimited extends SignalbusError {
  static override readonly code = "rate_limited";
  static override readonly hint = "over the per-identity quota: nothing was recorded; retry after retryAfterMs";
  get retryAfterMs(): number | undefined {
    const v = this.details.retry_after_ms;
    if (typeof v === "number") return v;
    const m = /(\d+(?:\.\d+)?)\s*(ms|s)\b/.exec(this.detail);
    if (m) return m[2] === "ms" ? Number(m[1]) : Number(m[1]) * 1000;
    return undefined;
  }
}
export class Unavailable extends SignalbusError {
  static override readonly code = "unavailable";
  static override readonly hint = "the bus took nothing: retry later";
}
export class InternalError extends SignalbusError {
  static override readonly code = "internal";
  static override readonly hint = "the bus failed; retry later and report it if it persists";
}
/**
 * The bus could not be reached, or the connection dropped before an answer came. For a send the
 * outcome is unknown: retry with the same dedupe_key (`dedupeKey`), which answers the original
 * signal if it was stored.
 */
/**
 * The hint of a TransportError thrown before any byte reached the bus (no connection could be
 * made, or no session was open for an ask): unlike a dropped exchange, its outcome is known.
 */
export const NOTHING_SENT = "nothing was sent: retry once the bus is reachable";

export class TransportError extends SignalbusError {
  static override readonly code: string = "transport";
  static override readonly hint: string = "the connection failed before an answer came: repeat the call once the bus is reachable";
  get dedupeKey(): string | undefined {
    return this.details.dedupe_key as string | undefined;
  }
}
/** No answer (or no signal, no session) in time. Its `name` is `"TimeoutError"`, as a DOM timeout's. */
export class RequestTimeout extends TransportError {
  static override readonly code = "timeout";
  static override readonly hint = "no answer in time: repeat the call once the bus answers";
  constructor(message: string, init: ErrorInit = {}) {
    super(message, init);
    this.name = "TimeoutError";
  }
}

/** The hints of a send's failures: a send carries a dedupe_key, and retrying with it is safe. */
const SEND_HINTS: Record<string, string> = {
  transport: "the outcome is unknown: retry with the same dedupe_key once the bus is reachable",
  timeout: "no answer in time, the outcome is unknown: retry with the same dedupe_key",
  unavailable: "the bus took nothing: retry later with the same dedupe_key (or give the client a spool)",
  internal: "the bus failed; retry later with the same dedupe_key and report it if it persists",
};

/**
 * `e` with the send's hint (retry with the same dedupe_key) when its hint is its class's generic
 * one; a hint an operation set ("nothing was sent") is kept.
 */
export function forSend<E>(e: E): E {
  if (e instanceof SignalbusError) {
    const hint = SEND_HINTS[e.code];
    const generic = (e.constructor as unknown as { hint: string }).hint;
    if (hint !== undefined && e.hint === generic) e.withHint(hint);
  }
  return e;
}
export class ClientClosed extends SignalbusError {
  static override readonly code = "closed";
  static override readonly hint = "the client was closed: build a new one";
}
export class SpoolFull extends SignalbusError {
  static override readonly code = "spool_full";
  static override readonly hint = "the send is larger than the whole spool (maxBytes): raise the cap or send less";
}
/** A spooled send's TTL ran out before the bus was back: it was dropped, never sent. */
export class SpoolExpired extends SignalbusError {
  static override readonly code = "expired_in_spool";
  static override readonly hint = "the bus was unreachable for longer than the signal's TTL; send it again if it still matters";
}
/** No reply carrying the ask's correlation_id arrived in time (the question was sent). */
export class AskTimeout extends SignalbusError {
  static override readonly code = "ask_timeout";
  static override readonly hint = "no reply in time: the question was sent; wait longer, or recall it (signalId)";
  get signalId(): string | undefined {
    return (this.details.signal_id as string | null | undefined) ?? undefined;
  }
  get correlationId(): string | undefined {
    return this.details.correlation_id as string | undefined;
  }
}
export class ProtocolError extends SignalbusError {
  static override readonly code = "protocol";
  static override readonly hint = "the bus answered something this client does not understand: check the versions";
}

/** The directive in `details.directive` (the bus's object), read once. */
function carried(e: SignalbusError, cache: { d?: Directive }): Directive | undefined {
  const raw = e.details.directive;
  if (!raw || typeof raw !== "object") return undefined;
  return (cache.d ??= toDirective(raw as Record<string, unknown>));
}

/** The directive's state does not allow the action (completing a completed one, ...); `directive` is it as it is now. */
export class InvalidTransition extends SignalbusError {
  static override readonly code = "invalid_transition";
  static override readonly hint = "the directive moved on: read `directive` (its status now) instead of retrying";
  private readonly cache: { d?: Directive } = {};
  /** The directive as it is now (the bus's answer carries it). */
  get directive(): Directive | undefined {
    return carried(this, this.cache);
  }
}
/** Another member of the group claimed (started) the directive first. */
export class AlreadyClaimed extends SignalbusError {
  static override readonly code = "already_claimed";
  static override readonly hint = "another member has it: leave it to them";
  get claimedBy(): string | undefined {
    return this.details.claimed_by as string | undefined;
  }
}
/** The idempotency_key was used for another directive (another `to`, `type` or `params`): `directiveId` is that one. */
export class IdempotencyConflict extends SignalbusError {
  static override readonly code = "idempotency_conflict";
  static override readonly hint = "the key names another directive (directiveId): use a new key for new work";
  get directiveId(): string | undefined {
    return this.details.directive_id as string | undefined;
  }
}

/**
 * A directive `runDirective` waited for ended without a result: the base of `DirectiveFailed`,
 * `DirectiveRejected`, `DirectiveExpired` and `DirectiveCanceled`. `directive` is it as it ended.
 */
export class DirectiveEnded extends SignalbusError {
  static override readonly code: string = "directive_ended";
  static override readonly hint: string = "the directive ended without a result: read `directive`";
  private readonly cache: { d?: Directive } = {};
  get directive(): Directive {
    return carried(this, this.cache) as Directive;
  }
}
/** The worker failed the directive: `failure` is its `{code, message}`. */
export class DirectiveFailed extends DirectiveEnded {
  static override readonly code = "directive_failed";
  static override readonly hint = "the worker failed it: `failure` says why";
  get failure(): DirectiveFailure | null {
    return this.directive.failure;
  }
}
/** The assignee declined it (for a group: every member did); `reason` is the last one given. */
export class DirectiveRejected extends DirectiveEnded {
  static override readonly code = "directive_rejected";
  static override readonly hint = "the assignee declined it: send it elsewhere, or change it";
  get reason(): string | null {
    return this.directive.reason;
  }
}
/** Its deadline passed while it was open (nobody took it, or the work took too long). */
export class DirectiveExpired extends DirectiveEnded {
  static override readonly code = "directive_expired";
  static override readonly hint = "the deadline passed: create it again with a later deadline_seconds, or check the worker is running";
}
/** The issuer canceled it. */
export class DirectiveCanceled extends DirectiveEnded {
  static override readonly code = "directive_canceled";
  static override readonly hint = "the issuer canceled it";
}

const ENDED: Record<string, new (message: string, init?: ErrorInit) => DirectiveEnded> = {
  failed: DirectiveFailed,
  rejected: DirectiveRejected,
  expired: DirectiveExpired,
  canceled: DirectiveCanceled,
};

/** The `DirectiveEnded` error of a directive that ended `failed`, `rejected`, `expired` or `canceled`. */
export function directiveEnded(d: Directive): DirectiveEnded {
  const cls = ENDED[d.status] ?? DirectiveEnded;
  const why = d.failure ? `: ${d.failure.code}: ${d.failure.message}` : d.reason ? `: ${d.reason}` : "";
  return new cls(`directive ${d.directiveId} (${d.type} to ${d.assignee}) ${d.status}${why}`, { details: { directive: d.raw, directive_id: d.directiveId } });
}

/**
 * `runDirective` waited `timeoutMs` (or past the deadline) and the directive is still open; it is
 * left as it is (cancel it, or wait on with `getDirective`). Its `name` is `"TimeoutError"`, as a
 * DOM timeout's.
 */
export class DirectiveTimeout extends SignalbusError {
  static override readonly code = "directive_timeout";
  static override readonly hint = "the directive is still open, left as it is: getDirective(directiveId, {waitMs}) or cancelDirective(directiveId)";
  private readonly cache: { d?: Directive } = {};
  constructor(message: string, init: ErrorInit = {}) {
    super(message, init);
    this.name = "TimeoutError";
  }
  get directiveId(): string | undefined {
    return this.details.directive_id as string | undefined;
  }
  /** The directive as last seen (still open). */
  get directive(): Directive | undefined {
    return carried(this, this.cache);
  }
}

type ErrorClass = new (message: string, init?: ErrorInit) => SignalbusError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid_request: InvalidRequest,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  not_found: NotFound,
  unknown_recipient: UnknownRecipient,
  unknown_group: UnknownGroup,
  recipient_unavailable: RecipientUnavailable,
  already_registered: AlreadyRegistered,
  invalid_transition: InvalidTransition,
  already_claimed: AlreadyClaimed,
  idempotency_conflict: IdempotencyConflict,
  payload_too_large: PayloadTooLarge,
  rate_limited: RateLimited,
  unavailable: Unavailable,
  internal: InternalError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  413: PayloadTooLarge,
  429: RateLimited,
  503: Unavailable,
};

/** The typed error of a bus error object (`{code,message,...}`) or body (`{error:{...}}`). */
export function errorFromBody(body: unknown, status?: number): SignalbusError {
  let obj: Record<string, unknown> = {};
  if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    obj = b.error && typeof b.error === "object" ? (b.error as Record<string, unknown>) : b;
  }
  const code = typeof obj.code === "string" ? obj.code : undefined;
  const message = typeof obj.message === "string" ? obj.message : status ? `the bus answered ${status}` : "the bus answered an error";
  const details: ErrorDetails = {};
  for (const [k, v] of Object.entries(obj)) if (k !== "code" && k !== "message") details[k] = v;
  const cls = (code && BY_CODE[code]) || (status && BY_STATUS[status]) || (status && status >= 500 ? InternalError : SignalbusError);
  return new cls(message, { code: code ?? (cls as unknown as { code: string }).code, status, details });
}

/** Codes after which a spooled send is settled (the bus answered it for good): the entry is deleted. */
export const DEFINITIVE_CODES: ReadonlySet<string> = new Set([
  "invalid_request",
  "forbidden",
  "not_found",
  "unknown_recipient",
  "unknown_group",
  "recipient_unavailable",
  "payload_too_large",
]);
