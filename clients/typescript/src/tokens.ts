/**
 * Typed answers of the token calls (CONTRACT §17): an agent's issued tokens and the tenant admin
 * tokens, and the scopes a token may hold. Timestamps are RFC 3339 strings, as the bus sent them.
 *
 * Deliberately only shapes read from the bus's JSON: which scope a call needs, who may issue what
 * and when a token stops working are the bus's decisions (`AdminClient` makes the calls).
 */

import { ProtocolError } from "./errors.js";

export type Scope = "send" | "receive" | "recall" | "facts" | "directives" | "read";

/** CONTRACT §17, in the order the bus lists them: a token issued without `scopes` holds all six. */
export const SCOPES: readonly Scope[] = ["send", "receive", "recall", "facts", "directives", "read"];

/** The id under which an agent's token list shows its registration token (rotated, never revoked). */
export const REGISTRATION_TOKEN_ID = "registration";

/** `issueToken` options: what the token may do, when it stops, how it is told apart. */
export interface IssueTokenOptions {
  tenant?: string;
  /** Default: every scope. */
  scopes?: Scope[];
  /** It stops working this long after now (rounded up to whole seconds). Default: never. */
  expiresInMs?: number;
  label?: string;
}

/** `issueToken` answer: `token` is the secret, shown this once. */
export interface IssuedToken {
  tokenId: string;
  token: string;
  scopes: Scope[];
  /** `null`: it does not expire. */
  expiresAt: string | null;
  label: string | null;
}

/** One of an agent's tokens as `tokens` lists it (never its secret); `expired` once `expiresAt` passed. */
export interface TokenInfo {
  tokenId: string;
  label: string | null;
  scopes: Scope[];
  expiresAt: string | null;
  issuedAt: string | null;
  expired: boolean;
}

/** `createAdminToken` answer: an admin inside `tenant` only; `token` is the secret, shown this once. */
export interface AdminToken {
  tokenId: string;
  token: string;
  tenant: string;
  label: string | null;
}

/** A tenant admin token as `adminTokens` lists it (never its secret). */
export interface AdminTokenInfo {
  tokenId: string;
  tenant: string;
  label: string | null;
  issuedAt: string | null;
}

/** The answer of a revoke (revoking again answers the same). */
export interface Revoked {
  tokenId: string;
  revoked: boolean;
}

type Obj = Record<string, unknown>;

function req<T>(o: Obj, key: string): T {
  if (!(key in o)) throw new ProtocolError(`the bus's answer lacks ${JSON.stringify(key)}: ${JSON.stringify(o).slice(0, 300)}`);
  return o[key] as T;
}

const text = (v: unknown): string | null => (typeof v === "string" ? v : null);
const scopes = (v: unknown): Scope[] => (Array.isArray(v) ? (v as Scope[]) : []);

export function parseIssuedToken(o: Obj): IssuedToken {
  return { tokenId: req(o, "token_id"), token: req(o, "token"), scopes: scopes(o.scopes), expiresAt: text(o.expires_at), label: text(o.label) };
}

export function parseTokenInfo(o: Obj): TokenInfo {
  return {
    tokenId: req(o, "token_id"),
    label: text(o.label),
    scopes: scopes(o.scopes),
    expiresAt: text(o.expires_at),
    issuedAt: text(o.issued_at),
    expired: Boolean(o.expired),
  };
}

export function parseAdminToken(o: Obj): AdminToken {
  return { tokenId: req(o, "token_id"), token: req(o, "token"), tenant: req(o, "tenant"), label: text(o.label) };
}

export function parseAdminTokenInfo(o: Obj): AdminTokenInfo {
  return { tokenId: req(o, "token_id"), tenant: req(o, "tenant"), label: text(o.label), issuedAt: text(o.issued_at) };
}

export function parseRevoked(o: Obj, tokenId: string): Revoked {
  return { tokenId: text(o.token_id) ?? tokenId, revoked: Boolean(o.revoked) };
}
