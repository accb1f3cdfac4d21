/**
 * The directive object (CONTRACT §14): every directive answer, the payload of every lifecycle
 * signal, and what a directive error (`InvalidTransition`, `DirectiveFailed`, ...) carries.
 *
 * Deliberately a leaf: it imports nothing, so `errors.ts` (which carries directives) and
 * `types.ts` (which checks the bus's answers, `parseDirective`) both build on it without a circle.
 */

/** `requested` → `started` → `completed` | `failed`; `requested` may end `rejected`; an open one `canceled` or `expired`. */
export type DirectiveStatus = "requested" | "started" | "completed" | "failed" | "rejected" | "canceled" | "expired";

/** The statuses a directive never leaves. */
export const TERMINAL_STATUSES: ReadonlySet<DirectiveStatus> = new Set(["completed", "failed", "rejected", "canceled", "expired"]);

/** True when `status` is final (`completed`, `failed`, `rejected`, `canceled`, `expired`). */
export const isTerminal = (status: DirectiveStatus): boolean => TERMINAL_STATUSES.has(status);

/** The claimer's last progress report (replaced by each `progress`). */
export interface DirectiveProgress {
  message: string | null;
  percent: number | null;
  at: string;
}

/** Why a directive failed, as the worker said (`failDirective(id, code, message)`). */
export interface DirectiveFailure {
  code: string;
  message: string;
}

/**
 * A directive as the bus answered it. Timestamps are ISO 8601 UTC strings, as the bus sent them.
 * `assignee` is an identity or a `@group`; `claimedBy` the member that started it (or completed,
 * failed it from `requested`). `redacted` lists the dotted paths (`params.db.password`) the bus
 * replaced with `[REDACTED]`.
 */
export interface Directive {
  directiveId: string;
  type: string;
  issuer: string;
  assignee: string;
  claimedBy: string | null;
  params: Record<string, unknown>;
  status: DirectiveStatus;
  createdAt: string;
  deadline: string;
  startedAt: string | null;
  finishedAt: string | null;
  progress: DirectiveProgress | null;
  result: Record<string, unknown> | null;
  failure: DirectiveFailure | null;
  reason: string | null;
  declinedBy: string[];
  correlationId: string | null;
  idempotencyKey: string;
  redacted: string[];
  /** True when the bus created it just now (a create answered 201); false for an idempotent repeat (200) and every other answer. */
  created: boolean;
  /** True when its status is final (`completed`, `failed`, `rejected`, `canceled`, `expired`). */
  terminal: boolean;
  /** The directive object as the bus sent it. */
  raw: Record<string, unknown>;
}

type Obj = Record<string, unknown>;
const str = (o: Obj, key: string): string => (typeof o[key] === "string" ? (o[key] as string) : "");
const strOrNull = (o: Obj, key: string): string | null => (typeof o[key] === "string" ? (o[key] as string) : null);
const objOrNull = (v: unknown): Obj | null => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : null);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/**
 * The camelCase `Directive` of a directive object. Lenient (a missing field reads as empty or
 * null): `types.ts`'s `parseDirective` first checks that an answer is one.
 */
export function toDirective(o: Obj): Directive {
  const progress = objOrNull(o.progress);
  const failure = objOrNull(o.failure);
  const status = str(o, "status") as DirectiveStatus;
  return {
    directiveId: str(o, "directive_id"),
    type: str(o, "type"),
    issuer: str(o, "issuer"),
    assignee: str(o, "assignee"),
    claimedBy: strOrNull(o, "claimed_by"),
    params: objOrNull(o.params) ?? {},
    status,
    createdAt: str(o, "created_at"),
    deadline: str(o, "deadline"),
    startedAt: strOrNull(o, "started_at"),
    finishedAt: strOrNull(o, "finished_at"),
    progress: progress
      ? { message: strOrNull(progress, "message"), percent: typeof progress.percent === "number" ? progress.percent : null, at: str(progress, "at") }
      : null,
    result: objOrNull(o.result),
    failure: failure ? { code: str(failure, "code"), message: str(failure, "message") } : null,
    reason: strOrNull(o, "reason"),
    declinedBy: strings(o.declined_by),
    correlationId: strOrNull(o, "correlation_id"),
    idempotencyKey: str(o, "idempotency_key"),
    redacted: strings(o.redacted),
    created: false,
    terminal: TERMINAL_STATUSES.has(status),
    raw: o,
  };
}
