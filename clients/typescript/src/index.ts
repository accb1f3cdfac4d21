/**
 * @signalbus/client — the TypeScript client of signalbus (Node >= 20 and browsers).
 *
 *     import { Client, AdminClient } from "@signalbus/client";
 *
 * The Node-only directory spool is `@signalbus/client/file-spool` (or pass `spoolDir`).
 */

export { Client } from "./client.js";
export type { ClientOptions, ReplayCallback, ReplayOutcome, ReplayReport, SignalHandler, WebSocketConstructor, WebSocketLike } from "./client.js";
export { AdminClient } from "./admin.js";
export type { AdminOptions } from "./admin.js";
export * from "./errors.js";
export * from "./types.js";
export { MemorySpool, DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES, remainingTtl } from "./spool.js";
export type { PutOptions, SpoolEntry, SpoolLimits, SpoolRequest, SpoolStore } from "./spool.js";
export { consoleLogger, silentLogger } from "./logger.js";
export type { Logger } from "./logger.js";
export type { FetchLike } from "./http.js";
