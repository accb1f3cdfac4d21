/** A pluggable logger: pass any object with these four methods (console, pino, winston, ...). */
export interface Logger {
  debug(message: string, ...meta: unknown[]): void;
  info(message: string, ...meta: unknown[]): void;
  warn(message: string, ...meta: unknown[]): void;
  error(message: string, ...meta: unknown[]): void;
}

const noop = (): void => {};

/** The default: warnings and errors to the console, debug and info dropped. */
export const consoleLogger: Logger = {
  debug: noop,
  info: noop,
  warn: (m, ...meta) => console.warn(`[signalbus] ${m}`, ...meta),
  error: (m, ...meta) => console.error(`[signalbus] ${m}`, ...meta),
};

/** Logs nothing (tests). */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };
