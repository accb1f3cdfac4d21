/** Fresh ids for the keys the client generates (`sbc-…` dedupe keys, `sbd-…` idempotency keys, ask correlation ids). A leaf: it imports nothing. */

/** A random UUID (v4): `crypto.randomUUID` where there is one. */
export function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (ch) => {
    const r = Math.floor(Math.random() * 16);
    return (ch === "x" ? r : (r & 0x3) | 0x8).toString(16);
  });
}
