/** Admin calls with the admin token: register, rotate, remove, roster, rebuild, groups and their members, force-expire. */

import { UsageError } from "./errors.js";
import { HttpApi, type FetchLike } from "./http.js";
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
}
