/**
 * Admin calls with the admin token: register, rotate, remove, roster, rebuild, groups and their
 * members, force-expire, and tokens (an agent's scoped tokens; tenant admin tokens). A tenant
 * admin token makes the same calls inside its own tenant.
 */

import { UsageError } from "./errors.js";
import { HttpApi, type FetchLike } from "./http.js";
import {
  parseAdminToken,
  parseAdminTokenInfo,
  parseIssuedToken,
  parseRevoked,
  parseTokenInfo,
  type AdminToken,
  type AdminTokenInfo,
  type IssuedToken,
  type IssueTokenOptions,
  type Revoked,
  type TokenInfo,
} from "./tokens.js";
import {
  parseAgent,
  parseExpirePreview,
  parseExpireResult,
  parseGroup,
  parseRemoval,
  type Agent,
  type ExpireFilter,
  type ExpirePreview,
  type ExpireResult,
  type Group,
  type Registration,
  type Removal,
  type SessionKind,
} from "./types.js";

export interface AdminOptions {
  requestTimeoutMs?: number;
  fetch?: FetchLike;
}

const enc = encodeURIComponent;
/** A group's name in a path: without its `@`. */
const groupPath = (name: string): string => enc(name.replace(/^@/, ""));

export class AdminClient {
  private readonly api: HttpApi;

  constructor(url: string, adminToken: string, options: AdminOptions = {}) {
    this.api = new HttpApi(url, adminToken, options.requestTimeoutMs ?? 15000, options.fetch);
  }

  /** Register an agent; its token is in the answer (shown once). `AlreadyRegistered` if it exists. */
  async register(identity: string, options: { tenant?: string; kind?: SessionKind } = {}): Promise<Registration> {
    const body: Record<string, string> = { identity };
    if (options.tenant) body.tenant = options.tenant;
    if (options.kind) body.kind = options.kind;
    const d = await this.api.request<Registration>("POST", "/v1/agents", { body });
    return { tenant: d.tenant, identity: d.identity, token: d.token };
  }

  /** A new token; the old one stops working at once (its sessions close with 1008). */
  async rotate(identity: string, options: { tenant?: string } = {}): Promise<Registration> {
    const d = await this.api.request<Partial<Registration>>("POST", `/v1/agents/${enc(identity)}/token`, { params: { tenant: options.tenant } });
    return { tenant: d.tenant ?? options.tenant ?? "default", identity: d.identity ?? identity, token: d.token as string };
  }

  /**
   * `DELETE /v1/agents/{identity}`: the token stops working, sessions close, pending signals
   * expire. A bus without the route rejects with a 404/405 error (`status`).
   */
  /** Removes `identity`: its token fails, its sessions close, its pending signals expire; resolves
   * to what the bus answered (`removedAt`, `signalsExpired`). */
  async remove(identity: string, options: { tenant?: string } = {}): Promise<Removal> {
    return parseRemoval(await this.api.request<Record<string, unknown>>("DELETE", `/v1/agents/${enc(identity)}`, { params: { tenant: options.tenant } }));
  }

  async agents(options: { tenant?: string } = {}): Promise<Agent[]> {
    const d = await this.api.request<{ tenant?: string; agents?: Record<string, unknown>[] }>("GET", "/v1/agents", { params: { tenant: options.tenant } });
    return (d.agents ?? []).map((a) => parseAgent(a, d.tenant ?? ""));
  }

  async rebuild(): Promise<Record<string, unknown>> {
    return this.api.request("POST", "/v1/admin/rebuild");
  }

  // -- groups (CONTRACT §15) --------------------------------------------------------------------

  /**
   * Create a group (`"@builders"` or `"builders"`), or update its settings: `created` is true when
   * it is new (201). `selfJoin` (the bus's default false) lets agents join and leave it
   * themselves; `announce` (default true) tells the members of each join and leave (`PeerJoined`,
   * `PeerLeft`). Settings not given are left to the bus.
   */
  async createGroup(name: string, options: { selfJoin?: boolean; announce?: boolean; tenant?: string } = {}): Promise<Group & { created: boolean }> {
    const body: Record<string, unknown> = {};
    if (options.tenant !== undefined) body.tenant = options.tenant;
    if (options.selfJoin !== undefined) body.self_join = options.selfJoin;
    if (options.announce !== undefined) body.announce = options.announce;
    const { status, data } = await this.api.answer<Record<string, unknown>>("PUT", `/v1/groups/${groupPath(name)}`, { body });
    return { ...parseGroup(data), created: status === 201 };
  }

  /** Delete a group; `UnknownGroup` when there is none. Resolves to the bus's answer (`group` with its `@`, `deleted`). */
  async deleteGroup(name: string, options: { tenant?: string } = {}): Promise<{ group: string; deleted: boolean }> {
    const d = await this.api.request<Record<string, unknown>>("DELETE", `/v1/groups/${groupPath(name)}`, { params: { tenant: options.tenant } });
    return { group: (d.group as string | undefined) ?? `@${name.replace(/^@/, "")}`, deleted: Boolean(d.deleted) };
  }

  /** Add a member (idempotent); `UnknownRecipient` for an identity that is not registered. Resolves to the group. */
  async addMember(name: string, identity: string, options: { tenant?: string } = {}): Promise<Group> {
    return parseGroup(await this.api.request("PUT", `/v1/groups/${groupPath(name)}/members/${enc(identity)}`, { params: { tenant: options.tenant } }));
  }

  /** Remove a member (idempotent). Resolves to the group. */
  async removeMember(name: string, identity: string, options: { tenant?: string } = {}): Promise<Group> {
    return parseGroup(await this.api.request("DELETE", `/v1/groups/${groupPath(name)}/members/${enc(identity)}`, { params: { tenant: options.tenant } }));
  }

  /** One group of a tenant (default: the default tenant), with each member's recipient state; `UnknownGroup` when there is none. */
  async group(name: string, options: { tenant?: string } = {}): Promise<Group> {
    return parseGroup(await this.api.request("GET", `/v1/groups/${groupPath(name)}`, { params: { tenant: options.tenant } }));
  }

  /** A tenant's groups (default: the default tenant), sorted by name. */
  async groups(options: { tenant?: string } = {}): Promise<Group[]> {
    const d = await this.api.request<{ groups?: Record<string, unknown>[] }>("GET", "/v1/groups", { params: { tenant: options.tenant } });
    return (d.groups ?? []).map(parseGroup);
  }

  // -- force-expire (CONTRACT §16) --------------------------------------------------------------

  /**
   * Expire a tenant's pending signals now (`POST /v1/admin/signals/expire`): those matching every
   * filter given — recipient `to`, sender `from`, `signalType`, `olderThanMs` (since `createdAt`,
   * rounded up to whole seconds), the ids in `signalIds` — scheduled ones included. Resolves to
   * `ExpireResult` (`expired`, `skipped`: matched but delivered, recalled or expired first); their
   * rows read `expiredReason: "forced"`. With `dryRun: true` nothing is expired: `ExpirePreview`
   * (`wouldExpire`, `count`). A tenant alone (no filter) is a `UsageError` (the bus refuses it too:
   * it would expire everything).
   */
  expireSignals(filter: ExpireFilter & { dryRun: true }): Promise<ExpirePreview>;
  expireSignals(filter: ExpireFilter & { dryRun?: false }): Promise<ExpireResult>;
  expireSignals(filter: ExpireFilter): Promise<ExpireResult | ExpirePreview>;
  async expireSignals(filter: ExpireFilter): Promise<ExpireResult | ExpirePreview> {
    const f = (filter ?? {}) as Partial<ExpireFilter>;
    if (typeof f.tenant !== "string" || f.tenant === "") {
      throw new UsageError(`expireSignals takes a tenant (a non-empty string), got ${JSON.stringify(f.tenant)}`);
    }
    if (f.signalIds !== undefined && !Array.isArray(f.signalIds)) throw new UsageError("signalIds is an array of signal ids");
    const body: Record<string, unknown> = { tenant: f.tenant };
    if (f.to !== undefined) body.to = f.to;
    if (f.from !== undefined) body.from = f.from;
    if (f.signalType !== undefined) body.signal_type = f.signalType;
    if (f.olderThanMs !== undefined) {
      if (!(typeof f.olderThanMs === "number" && Number.isFinite(f.olderThanMs) && f.olderThanMs > 0)) {
        throw new UsageError(`olderThanMs must be a positive number of milliseconds, got ${String(f.olderThanMs)}`);
      }
      body.older_than_seconds = Math.ceil(f.olderThanMs / 1000);
    }
    if (f.signalIds !== undefined) body.signal_ids = f.signalIds;
    if (Object.keys(body).length === 1) {
      throw new UsageError("expireSignals needs a filter besides the tenant ({to, from, signalType, olderThanMs, signalIds}): a tenant alone would expire every pending signal in it");
    }
    if (f.dryRun) {
      body.dry_run = true;
      return parseExpirePreview(await this.api.request("POST", "/v1/admin/signals/expire", { body }));
    }
    return parseExpireResult(await this.api.request("POST", "/v1/admin/signals/expire", { body }));
  }

  // -- tokens (CONTRACT §17) --------------------------------------------------------------------

  /**
   * Issue another token for `identity` (`POST /v1/agents/{identity}/tokens`): it holds `scopes`
   * (default: every scope), stops working `expiresInMs` after now (rounded up to whole seconds;
   * default: never) and is told apart by `label`. Resolves to `IssuedToken`, whose `token` is shown
   * this once. `NotFound` for no such agent, `InvalidRequest` for an unknown or empty scope list,
   * `Forbidden` for a tenant admin of another tenant.
   */
  async issueToken(identity: string, options: IssueTokenOptions = {}): Promise<IssuedToken> {
    const body: Record<string, unknown> = {};
    if (options.scopes !== undefined) {
      if (!Array.isArray(options.scopes)) throw new UsageError(`scopes is an array of scopes, got ${JSON.stringify(options.scopes)}`);
      body.scopes = options.scopes;
    }
    if (options.expiresInMs !== undefined) {
      const ms = options.expiresInMs;
      if (!(typeof ms === "number" && Number.isFinite(ms) && ms > 0)) {
        throw new UsageError(`expiresInMs must be a positive number of milliseconds, got ${String(ms)}`);
      }
      body.expires_in_seconds = Math.ceil(ms / 1000);
    }
    if (options.label !== undefined) body.label = options.label;
    return parseIssuedToken(await this.api.request("POST", `/v1/agents/${enc(identity)}/tokens`, { body, params: { tenant: options.tenant } }));
  }

  /** `identity`'s tokens without their secrets: the registration token first (`tokenId` `"registration"`), then the issued ones not revoked. */
  async tokens(identity: string, options: { tenant?: string } = {}): Promise<TokenInfo[]> {
    const d = await this.api.request<{ tokens?: Record<string, unknown>[] }>("GET", `/v1/agents/${enc(identity)}/tokens`, { params: { tenant: options.tenant } });
    return (d.tokens ?? []).map(parseTokenInfo);
  }

  /**
   * Revoke one of `identity`'s issued tokens: it stops working at once and its sessions close
   * (1008 `token revoked`). Revoking it again answers the same; `NotFound` for an id never issued
   * to it; `InvalidRequest` for `"registration"` (`rotate` replaces that one).
   */
  async revokeToken(identity: string, tokenId: string, options: { tenant?: string } = {}): Promise<Revoked> {
    const d = await this.api.request<Record<string, unknown>>("DELETE", `/v1/agents/${enc(identity)}/tokens/${enc(tokenId)}`, { params: { tenant: options.tenant } });
    return parseRevoked(d, tokenId);
  }

  /**
   * A tenant admin token (the global admin only): an admin inside `tenant` only — any call naming
   * another tenant is `Forbidden`, as are `rebuild` and the admin-token calls but `adminTokens`.
   * Resolves to `AdminToken`, whose `token` is shown this once.
   */
  async createAdminToken(tenant: string, options: { label?: string } = {}): Promise<AdminToken> {
    if (typeof tenant !== "string" || tenant === "") throw new UsageError(`createAdminToken takes a tenant (a non-empty string), got ${JSON.stringify(tenant)}`);
    const body: Record<string, unknown> = { tenant };
    if (options.label !== undefined) body.label = options.label;
    return parseAdminToken(await this.api.request("POST", "/v1/admin/tokens", { body }));
  }

  /** The tenant admin tokens (of `tenant` only, when given), without their secrets; a tenant admin lists its own tenant's. */
  async adminTokens(options: { tenant?: string } = {}): Promise<AdminTokenInfo[]> {
    const d = await this.api.request<{ tokens?: Record<string, unknown>[] }>("GET", "/v1/admin/tokens", { params: { tenant: options.tenant } });
    return (d.tokens ?? []).map(parseAdminTokenInfo);
  }

  /** Revoke a tenant admin token (the global admin only): it stops working at once; `NotFound` for an unknown id. */
  async revokeAdminToken(tokenId: string): Promise<Revoked> {
    return parseRevoked(await this.api.request("DELETE", `/v1/admin/tokens/${enc(tokenId)}`), tokenId);
  }
}
