/**
 * @signalbus/client — the TypeScript client of signalbus (Node >= 20 and browsers).
 *
 *     import { Client, AdminClient } from "@signalbus/client";
 *
 * The Node-only directory spool is `@signalbus/client/file-spool` (or pass `spoolDir`).
 *
 * Layout, top to bottom (each module imports only modules below it): `client` (the `Client`
 * facade) → `directives` (directive calls, `runDirective`, the `onDirective` worker) → `replay`
 * (spooling and replay) → `session` (the session engine: transport, supervisor, calls) →
 * `delivery` (dedupe, routes, dispatch, acks) → `admin` → `http` → `file-spool` → `spool`,
 * `types`, `tokens`, `logger`, `ids`, `errors` → `directive-object` (the directive object, a leaf).
 */

export { Client } from "./client.js";
export type { ClientOptions, InboxOptions, RecallManyTarget } from "./client.js";
export type { DirectiveHandler, ProgressReport, ProgressReporter, RunDirectiveOptions } from "./directives.js";
export type { ReplayCallback, ReplayOutcome, ReplayReport } from "./replay.js";
export type { SignalHandler } from "./delivery.js";
export type { ConnectionEvent, WebSocketConstructor, WebSocketLike } from "./session.js";
export { AdminClient } from "./admin.js";
export type { AdminOptions } from "./admin.js";
export * from "./errors.js";
export * from "./types.js";
export * from "./tokens.js";
export { MemorySpool, DEFAULT_MAX_AGE_MS, DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES, remainingTtl, replayRequest } from "./spool.js";
export type { PutOptions, SpoolEntry, SpoolLimits, SpoolRequest, SpoolStore } from "./spool.js";
export { consoleLogger, silentLogger } from "./logger.js";
export type { Logger } from "./logger.js";
export type { FetchLike } from "./http.js";
