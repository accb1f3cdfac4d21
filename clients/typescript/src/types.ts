/** Typed answers of the bus (CONTRACT §4, §5, §6, §8, §10, §14, §15, §16). Timestamps are RFC 3339 strings. */

import { toDirective, type Directive, type DirectiveStatus } from "./directive-object.js";
import { errorFromBody, ProtocolError, type SignalbusError } from "./errors.js";

export { TERMINAL_STATUSES, isTerminal } from "./directive-object.js";
export type { Directive, DirectiveFailure, DirectiveProgress, DirectiveStatus } from "./directive-object.js";

export type DeliveryClass = "sync" | "async";
export type RecipientState = "available" | "not_available_stale" | "not_available_offline";
export type PublishPath = "pushed_to_ws" | "buffered_for_piggyback" | "queued_offline" | "scheduled";
/** CONTRACT §16: why a signal expired — its TTL ran out (the sweeper), or an admin forced it. */
export type ExpiredReason = "ttl" | "forced";
export type RecallOutcome = "recalled" | "already_delivered" | "already_expired" | "not_found";
export type SessionKind = "daemon" | "shim" | "interactive";
export type Json = unknown;

export interface Welcome {
  sessionId: string;
  tenant: string;
  identity: string;
  heartbeatIntervalMs: number;
}

/** A signal as pushed or drained (CONTRACT §5 push frame). Timestamps (`createdAt`, `expiresAt`)
 * here and in every answer are ISO 8601 UTC strings as the bus sent them — `new Date(s)` when you
 * need a Date (Python: aware `datetime`; Rust: `DateTime<Utc>`). */
export interface Signal {
  id: string;
  from: string;
  to: string;
  type: string;
  category: string;
  priority: number;
  payload: Json;
  deliveryClass: DeliveryClass;
  createdAt: string;
  expiresAt: string;
  correlationId: string | null;
  redelivered: boolean;
  /** The frame's signal object as the bus sent it. */
  raw: Record<string, unknown>;
}

/**
 * The bus accepted the send. `dedupeKey` is the key it carried (the caller's or a generated one).
 * A scheduled send (CONTRACT §16) is answered `queued`, `publishPath: "scheduled"`, with
 * `deliverAt`: when the bus hands it over (null for a send that was not scheduled).
 */
export interface SendResult {
  spooled: false;
  signalId: string;
  delivered: boolean;
  queued: boolean;
  recipientState: RecipientState;
  deliveryClass: DeliveryClass;
  createdAt: string;
  expiresAt: string;
  resolvedToSession: string | null;
  publishPath: PublishPath;
  redacted: string[];
  dedupeKey: string;
  /** When a scheduled send is handed over (ISO 8601 UTC); null when it was not scheduled. */
  deliverAt: string | null;
  raw: Record<string, unknown>;
}

/**
 * The bus was unreachable or answered 503: the send waits in the spool and is replayed (with
 * `dedupeKey`, so it can never create a second signal) once the bus is back.
 */
export interface Spooled {
  spooled: true;
  /** No signal yet: the bus gives it an id when the replay is accepted (`onReplay`). */
  signalId: null;
  dedupeKey: string;
  /** The spool entry's name. */
  entry: string;
  reason: string;
  spooledAt: string;
  ttlSeconds: number;
}

export type SendOutcome = SendResult | Spooled;

export interface SendOptions {
  deliveryClass?: DeliveryClass;
  ttlSeconds?: number;
  correlationId?: string;
  dedupeKey?: string;
  /**
   * Scheduled delivery (CONTRACT §16, async sends only): hold the signal this long (rounded up to
   * whole seconds; at most 30 days) before the bus hands it over. Not with `deliverAt`.
   */
  deliverAfterMs?: number;
  /** Scheduled delivery: hand it over at this instant (a `Date`, or an RFC 3339 string), in the future. Not with `deliverAfterMs`. */
  deliverAt?: Date | string;
  /** false: throw instead of spooling when the bus cannot take it. */
  spool?: boolean;
}

/**
 * The answer to a send to a group (`to: "@name"`, CONTRACT §15): one entry per member other than
 * the sender (sorted by identity), each true on its own, all under one `fanoutId`. Repeating the
 * send with its `dedupeKey` answers the same signals and the same `fanoutId`.
 */
export interface FanoutResult {
  fanoutId: string;
  /** The group, with its `@`. */
  to: string;
  /** No single signal: each member's is in `results` (`signalIds`). */
  signalId: null;
  results: MemberResult[];
  /** The accepted members' signal ids, in `results`' order. */
  signalIds: string[];
  /** The key the send carried (the caller's or a generated one). */
  dedupeKey: string;
  raw: Record<string, unknown>;
}

/**
 * One member's part of a group send. Accepted: `signalId`, `delivered`, `queued`,
 * `recipientState`, `publishPath`, and the whole §4 answer in `result`; `error` null. Not
 * accepted: `error` is the typed error the same send to that member alone would have thrown —
 * `RecipientUnavailable` (a bounced sync send: its `recipientState`, and the bounce's
 * `signalId`), `UnknownRecipient`, `Unavailable` (nothing taken), `InternalError` — and
 * `signalId`, `publishPath` and `result` are null.
 */
export interface MemberResult {
  to: string;
  signalId: string | null;
  delivered: boolean;
  queued: boolean;
  recipientState: RecipientState | null;
  publishPath: PublishPath | null;
  result: SendResult | null;
  error: SignalbusError | null;
}

/** What `send` resolves to for a recipient `To`: a group (`@…`) answers a `FanoutResult`, an
 * identity a `SendOutcome`; a `to` whose value is not known to the types may be either (`isFanout`). */
export type SendAnswer<To extends string> = string extends To ? SendOutcome | FanoutResult : To extends `@${string}` ? FanoutResult : SendOutcome;

/** True when a send's answer is a group's (`FanoutResult`). */
export function isFanout(answer: SendOutcome | FanoutResult): answer is FanoutResult {
  return "fanoutId" in answer;
}

/** One signal of a `recallMany`, with its outcome (decided per signal, as a single `recall`'s). */
export interface RecallEntry {
  signalId: string;
  to: string;
  outcome: RecallOutcome;
}

/**
 * A group (CONTRACT §15). `group(name)`, `joinGroup`, `leaveGroup` and the admin calls answer it
 * with each member's recipient state; `groups()` lists members by identity only (their
 * `recipientState`, `addedAt`, `addedBy` null there, as the group's `createdAt`).
 */
export interface Group {
  /** The name, with its `@` (`"@reviewers"`). */
  name: string;
  selfJoin: boolean;
  announce: boolean;
  createdAt: string | null;
  members: GroupMember[];
  /** The members' identities, sorted as the bus sent them. */
  identities: string[];
  raw: Record<string, unknown>;
}

export interface GroupMember {
  identity: string;
  recipientState: RecipientState | null;
  addedAt: string | null;
  addedBy: string | null;
}

export interface CreateDirectiveOptions {
  /** Repeating a key answers the existing directive and creates nothing; generated (`sbd-<uuid>`) when absent. */
  idempotencyKey?: string;
  /** 1 … 2,592,000; the bus's default is 86,400 (24 h). */
  deadlineSeconds?: number;
  correlationId?: string;
}

export interface ListDirectivesOptions {
  /** `issued` by you, or `assigned` to you (with the directives of your groups). */
  role?: "issued" | "assigned";
  /** A status, or `open` (`requested` or `started`). */
  status?: DirectiveStatus | "open";
  type?: string;
  limit?: number;
  /** A page's `nextBefore`, to read the next (older) page. */
  before?: string;
}

/** One page of directives, newest first; `nextBefore` continues (null: the last page). */
export interface DirectivePage {
  directives: Directive[];
  nextBefore: string | null;
}

/**
 * A signal's row (CONTRACT §10 columns), from `get`, `list` and `conversation`. `deliverAt` is set
 * for a scheduled signal (CONTRACT §16); `expiredReason` says why an expired one expired: `"ttl"`
 * (its TTL ran out) or `"forced"` (an admin's `expireSignals`), null while it has not.
 */
export interface SignalRow {
  id: string;
  tenant: string;
  fromIdentity: string;
  toIdentity: string;
  signalType: string;
  category: string;
  priority: number;
  payload: Json;
  deliveryClass: DeliveryClass;
  recipientState: string | null;
  publishPath: string | null;
  correlationId: string | null;
  createdAt: string;
  expiresAt: string;
  deliveredAt: string | null;
  expiredAt: string | null;
  recalledAt: string | null;
  deliveredVia: string | null;
  resolvedToSession: string | null;
  ackedAt: string | null;
  deliverAt: string | null;
  expiredReason: ExpiredReason | null;
  status: "pending" | "delivered" | "expired" | "recalled";
  raw: Record<string, unknown>;
}

/** One page of `list` (newest first) or `conversation` (oldest first); `cursor: nextCursor` continues (null: the last page). */
export interface SignalPage {
  signals: SignalRow[];
  nextCursor: string | null;
}

export interface Agent {
  identity: string;
  tenant: string;
  kind: string;
  state: RecipientState;
  liveSessions: number;
  lastHeartbeat: string | null;
  registeredAt: string | null;
}

/** `register`/`rotate` answer: the agent's token (shown once). */
export interface Registration {
  tenant: string;
  identity: string;
  token: string;
}

/** `remove` answer: what the bus did. `signalsExpired` counts the pending signals to the agent
 * that expired with it; `removedAt` is an ISO 8601 UTC string, as the bus sent it. */
export interface Removal {
  tenant: string;
  identity: string;
  removedAt: string;
  signalsExpired: number;
}

/** What `AdminClient.expireSignals` matches (CONTRACT §16): a tenant and at least one filter; filters combine with AND. */
export interface ExpireFilter {
  tenant: string;
  /** The recipient. */
  to?: string;
  /** The sender. */
  from?: string;
  signalType?: string;
  /** Only signals created longer ago than this (rounded up to whole seconds). */
  olderThanMs?: number;
  signalIds?: string[];
  /** true: expire nothing, list what would be (`ExpirePreview`). */
  dryRun?: boolean;
}

/** `expireSignals` answer: `expired` pending signals were expired (`expiredReason: "forced"`); `skipped` matched but were delivered, recalled or expired first. */
export interface ExpireResult {
  dryRun: false;
  expired: number;
  skipped: number;
  raw: Record<string, unknown>;
}

/** A pending signal an `expireSignals({dryRun: true})` matched. */
export interface ExpireCandidate {
  signalId: string;
  to: string;
  from: string;
  type: string;
  createdAt: string;
}

/** `expireSignals({dryRun: true})` answer: what would be expired (nothing was). */
export interface ExpirePreview {
  dryRun: true;
  wouldExpire: ExpireCandidate[];
  count: number;
  raw: Record<string, unknown>;
}

export interface PluginState {
  plugin: string;
  state: Json;
  seq: number;
  updatedAt: string | null;
}

export interface Fact {
  seq: number;
  factType: string;
  state: Json;
  recordedBy: string;
  createdAt: string | null;
}

export interface FactPage {
  facts: Fact[];
  nextBeforeSeq: number | null;
}

type Obj = Record<string, unknown>;

function req<T>(obj: Obj, key: string): T {
  if (!(key in obj)) throw new ProtocolError(`the bus's answer lacks ${JSON.stringify(key)}: ${JSON.stringify(obj).slice(0, 300)}`);
  return obj[key] as T;
}
const opt = <T>(obj: Obj, key: string): T | null => (obj[key] ?? null) as T | null;

export function parseWelcome(o: Obj): Welcome {
  return {
    sessionId: req(o, "session_id"),
    tenant: req(o, "tenant"),
    identity: req(o, "identity"),
    heartbeatIntervalMs: Number(o.heartbeat_interval_ms ?? 15000),
  };
}

export function parseSignal(o: Obj): Signal {
  return {
    id: req(o, "id"),
    from: req(o, "from"),
    to: req(o, "to"),
    type: req(o, "type"),
    category: (o.category as string) ?? "",
    priority: Number(o.priority ?? 0),
    payload: o.payload ?? null,
    deliveryClass: (o.delivery_class as DeliveryClass) ?? "async",
    createdAt: req(o, "created_at"),
    expiresAt: req(o, "expires_at"),
    correlationId: opt(o, "correlation_id"),
    redelivered: Boolean(o.redelivered),
    raw: o,
  };
}

export function parseSendResult(o: Obj, dedupeKey: string): SendResult {
  return {
    spooled: false,
    signalId: req(o, "signal_id"),
    delivered: Boolean(o.delivered),
    queued: Boolean(o.queued),
    recipientState: req(o, "recipient_state"),
    deliveryClass: req(o, "delivery_class"),
    createdAt: req(o, "created_at"),
    expiresAt: req(o, "expires_at"),
    resolvedToSession: opt(o, "resolved_to_session"),
    publishPath: req(o, "publish_path"),
    redacted: Array.isArray(o.redacted) ? (o.redacted as string[]) : [],
    dedupeKey,
    deliverAt: opt(o, "deliver_at"),
    raw: o,
  };
}

/** A directive object (every directive answer, a lifecycle signal's payload). */
export function parseDirective(o: Obj): Directive {
  for (const key of ["directive_id", "type", "issuer", "assignee", "status"]) req(o, key);
  return toDirective(o);
}

export function parseFanout(o: Obj, dedupeKey: string): FanoutResult {
  const results = req<unknown[]>(o, "results");
  if (!Array.isArray(results)) throw new ProtocolError(`a group send's "results" is not a list: ${JSON.stringify(o).slice(0, 300)}`);
  const members = results.map((r) => parseMemberResult(r as Obj, dedupeKey));
  return {
    fanoutId: req(o, "fanout_id"),
    to: req(o, "to"),
    signalId: null,
    results: members,
    signalIds: members.flatMap((m) => (m.signalId === null ? [] : [m.signalId])),
    dedupeKey,
    raw: o,
  };
}

function parseMemberResult(o: Obj, dedupeKey: string): MemberResult {
  const to = req<string>(o, "to");
  if (o.error && typeof o.error === "object") {
    const error = errorFromBody(o.error);
    const state = error.details.recipient_state;
    return { to, signalId: null, delivered: false, queued: false, recipientState: typeof state === "string" ? (state as RecipientState) : null, publishPath: null, result: null, error };
  }
  const result = parseSendResult(o, dedupeKey);
  return { to, signalId: result.signalId, delivered: result.delivered, queued: result.queued, recipientState: result.recipientState, publishPath: result.publishPath, result, error: null };
}

export function parseRecallMany(o: Obj): RecallEntry[] {
  const results = Array.isArray(o.results) ? (o.results as Obj[]) : [];
  return results.map((r) => ({ signalId: req(r, "signal_id"), to: (r.to as string) ?? "", outcome: req(r, "outcome") }));
}

/** A group as any group answer carries it: members as objects (with their recipient state) or as identities (`GET /v1/groups`). */
export function parseGroup(o: Obj): Group {
  const members: GroupMember[] = (Array.isArray(o.members) ? o.members : []).map((m) =>
    typeof m === "string"
      ? { identity: m, recipientState: null, addedAt: null, addedBy: null }
      : { identity: req<string>(m as Obj, "identity"), recipientState: opt<RecipientState>(m as Obj, "recipient_state"), addedAt: opt<string>(m as Obj, "added_at"), addedBy: opt<string>(m as Obj, "added_by") },
  );
  return {
    name: req(o, "group"),
    selfJoin: Boolean(o.self_join),
    announce: o.announce === undefined ? true : Boolean(o.announce),
    createdAt: opt(o, "created_at"),
    members,
    identities: members.map((m) => m.identity),
    raw: o,
  };
}

export function parseSignalRow(o: Obj): SignalRow {
  const row = {
    id: req<string>(o, "id"),
    tenant: (o.tenant as string) ?? "",
    fromIdentity: req<string>(o, "from_identity"),
    toIdentity: req<string>(o, "to_identity"),
    signalType: req<string>(o, "signal_type"),
    category: (o.category as string) ?? "",
    priority: Number(o.priority ?? 0),
    payload: o.payload ?? null,
    deliveryClass: (o.delivery_class as DeliveryClass) ?? "async",
    recipientState: opt<string>(o, "recipient_state"),
    publishPath: opt<string>(o, "publish_path"),
    correlationId: opt<string>(o, "correlation_id"),
    createdAt: req<string>(o, "created_at"),
    expiresAt: req<string>(o, "expires_at"),
    deliveredAt: opt<string>(o, "delivered_at"),
    expiredAt: opt<string>(o, "expired_at"),
    recalledAt: opt<string>(o, "recalled_at"),
    deliveredVia: opt<string>(o, "delivered_via"),
    resolvedToSession: opt<string>(o, "resolved_to_session"),
    ackedAt: opt<string>(o, "acked_at"),
    deliverAt: opt<string>(o, "deliver_at"),
    expiredReason: opt<ExpiredReason>(o, "expired_reason"),
    raw: o,
  };
  const status = row.deliveredAt ? "delivered" : row.recalledAt ? "recalled" : row.expiredAt ? "expired" : "pending";
  return { ...row, status };
}

export function parseRemoval(o: Obj): Removal {
  return {
    tenant: (o.tenant as string | undefined) ?? "",
    identity: (o.identity as string | undefined) ?? "",
    removedAt: req<string>(o, "removed_at"),
    signalsExpired: Number(o.signals_expired ?? 0),
  };
}

export function parseExpireResult(o: Obj): ExpireResult {
  return { dryRun: false, expired: Number(req(o, "expired")), skipped: Number(o.skipped ?? 0), raw: o };
}

export function parseExpirePreview(o: Obj): ExpirePreview {
  const wouldExpire = (Array.isArray(o.would_expire) ? (o.would_expire as Obj[]) : []).map((c) => ({
    signalId: req<string>(c, "signal_id"),
    to: req<string>(c, "to"),
    from: req<string>(c, "from"),
    type: req<string>(c, "type"),
    createdAt: req<string>(c, "created_at"),
  }));
  return { dryRun: true, wouldExpire, count: Number(o.count ?? wouldExpire.length), raw: o };
}

export function parseAgent(o: Obj, tenant = ""): Agent {
  return {
    identity: req(o, "identity"),
    tenant: (o.tenant as string) ?? tenant,
    kind: (o.kind as string) ?? "",
    state: (o.state as RecipientState) ?? "not_available_offline",
    liveSessions: Number(o.live_sessions ?? 0),
    lastHeartbeat: opt(o, "last_heartbeat"),
    registeredAt: opt(o, "registered_at"),
  };
}

/** CONTRACT §3 default TTLs: a spooled send without ttlSeconds keeps what is left of its type's. */
export const DEFAULT_TTL_SECONDS: Readonly<Record<string, number>> = {
  Blocker: 4 * 3600,
  Question: 3600,
  ReviewRequested: 24 * 3600,
  TaskAssigned: 7 * 24 * 3600,
  TaskCompleted: 24 * 3600,
  StatusUpdate: 24 * 3600,
  Acknowledgment: 3600,
  MasterPreempted: 120,
  PeerJoined: 300,
  PeerLeft: 300,
};
export const FALLBACK_TTL_SECONDS = 24 * 3600;
export const defaultTtl = (type: string): number => DEFAULT_TTL_SECONDS[type] ?? FALLBACK_TTL_SECONDS;

/** CONTRACT §3: the types whose default delivery class is sync (every other type is async). */
const SYNC_BY_DEFAULT = new Set(["Blocker", "Question"]);

/** The delivery class the bus gives a send of `type` that names none. */
export const defaultClass = (type: string): DeliveryClass => (SYNC_BY_DEFAULT.has(type) ? "sync" : "async");
