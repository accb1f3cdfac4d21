/** Admin calls with the admin token: register, rotate, remove, roster, rebuild. */

import { HttpApi, type FetchLike } from "./http.js";
import { parseAgent, parseRemoval, type Agent, type Registration, type Removal, type SessionKind } from "./types.js";

export interface AdminOptions {
  requestTimeoutMs?: number;
  fetch?: FetchLike;
}

const enc = encodeURIComponent;

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
}
