/** Shared HTTP plumbing: typed errors, transport failures as TransportError. */

import { NOTHING_SENT, ProtocolError, RateLimited, RequestTimeout, TransportError, errorFromBody, type ErrorDetails } from "./errors.js";

/** Causes that mean no connection was made (before the request: the bus got nothing). */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface RequestOptions {
  body?: unknown;
  params?: Record<string, string | number | boolean | undefined | null>;
  okStatuses?: number[];
  dedupeKey?: string;
  /** This request's timeout, when it may take longer than the client's (a directive `get` that waits). */
  timeoutMs?: number;
}

/** A JSON answer with its HTTP status (a create tells 201 new from 200 existing). */
export interface Answer<T> {
  status: number;
  data: T;
}

export function normalizeUrl(url: string): string {
  if (!/^https?:\/\//.test(url)) throw new TypeError(`url must be the bus's http(s) base URL, got ${JSON.stringify(url)}`);
  return url.replace(/\/+$/, "");
}

export class HttpApi {
  readonly url: string;
  private readonly token: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: FetchLike;

  constructor(url: string, token: string, timeoutMs: number, fetchImpl?: FetchLike) {
    this.url = normalizeUrl(url);
    this.token = token;
    this.timeoutMs = timeoutMs;
    const f = fetchImpl ?? (globalThis.fetch as FetchLike | undefined);
    if (!f) throw new TypeError("no fetch available: pass options.fetch");
    this.fetchImpl = f;
  }

  async request<T = Record<string, unknown>>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    return (await this.answer<T>(method, path, o)).data;
  }

  /** `request`, with the answer's HTTP status. */
  async answer<T = Record<string, unknown>>(method: string, path: string, o: RequestOptions = {}): Promise<Answer<T>> {
    const timeoutMs = o.timeoutMs ?? this.timeoutMs;
    let url = this.url + path;
    if (o.params) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(o.params)) if (v !== undefined && v !== null) q.set(k, String(v));
      const s = q.toString();
      if (s) url += `?${s}`;
    }
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: "application/json" };
    if (o.body !== undefined) headers["Content-Type"] = "application/json";
    const details: ErrorDetails = o.dedupeKey ? { dedupe_key: o.dedupeKey } : {};
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers,
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      const name = (e as Error)?.name;
      if (name === "TimeoutError" || name === "AbortError") {
        throw new RequestTimeout(`${method} ${path}: no answer within ${timeoutMs} ms`, { details, cause: e });
      }
      const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
      if (cause?.code && NOT_CONNECTED.has(cause.code)) {
        throw new TransportError(`${method} ${path}: cannot connect to the bus (${cause.code})`, { hint: NOTHING_SENT, details, cause: e });
      }
      throw new TransportError(`${method} ${path}: the bus could not be reached (${cause?.code ?? cause?.message ?? (e as Error)?.message})`, {
        details,
        cause: e,
      });
    }
    let text: string;
    try {
      text = await response.text();
    } catch (e) {
      throw new TransportError(`${method} ${path}: the connection dropped while reading the answer`, { details, cause: e });
    }
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = undefined;
      }
    }
    const status = response.status;
    if ((status >= 200 && status < 300) || o.okStatuses?.includes(status)) {
      if (data === undefined && status !== 204) throw new ProtocolError(`${method} ${path}: the bus answered ${status} without a JSON body`);
      return { status, data: data as T };
    }
    if (data === undefined && (status === 502 || status === 504)) {
      throw new TransportError(`${method} ${path}: a proxy answered ${status}; the bus may not have seen the request`, { status, details });
    }
    if (data === undefined && status === 429) {
      const retry = response.headers.get("retry-after");
      throw new RateLimited(`${method} ${path}: rate limited`, { status, details: retry && /^\d+$/.test(retry) ? { retry_after_ms: Number(retry) * 1000 } : {} });
    }
    const err = errorFromBody(data, status);
    if (o.dedupeKey && err.code === "unavailable") err.details.dedupe_key ??= o.dedupeKey;
    throw err;
  }
}
