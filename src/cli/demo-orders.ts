/**
 * What the demo sends, shared by the demo and its worker process so that both
 * send byte-identical orders (the same payload is the same operation).
 *
 * @module
 */
import type { Fault } from '../testing/provider.js';

/** The action of every demo order. */
export const DEMO_ACTION = 'create-order';

/** One attempt's timeout in both clients; the `delay` fault holds the response longer. */
export const ATTEMPT_TIMEOUT_MS = 250;

/** How long the `delay` fault holds a committed order's response. */
export const DELAY_MS = 600;

/** The fault mix, by `--faults` name. */
export const DEMO_FAULTS = {
  drop: { kind: 'drop_after_commit' },
  delay: { kind: 'delay_after_commit', delayMs: DELAY_MS },
  error500: { kind: 'error_after_commit', status: 500 },
  '503': { kind: 'status_before_commit', status: 503, retryAfter: '1' },
  '429': { kind: 'status_before_commit', status: 429, retryAfter: '1' },
  reset: { kind: 'reset_before_commit' },
} as const satisfies Record<string, Fault>;

/** A `--faults` name. */
export type DemoFaultName = keyof typeof DEMO_FAULTS;

/** Every fault name, in help order (not `Object.keys`: it puts '429' and '503' first). */
export const DEMO_FAULT_NAMES: readonly DemoFaultName[] = ['drop', 'delay', 'error500', '503', '429', 'reset'];

/**
 * How long after it arrives a request may still take effect at the demo provider: it commits
 * on receipt, so a lookup that says "absent" this long after an attempt started is final.
 */
export const SETTLE_MS = 500;

/** The ref of order `i` (1-based). */
export function orderRef(i: number): string {
  return `order-${i}`;
}

/** The JSON body of order `i`. */
export function orderBody(i: number): string {
  return JSON.stringify({ ref: orderRef(i), sku: `SKU-${100 + (i % 7)}`, qty: 1 + (i % 3) });
}

/** The lookup the oncefetch client registers: GET /orders?ref= → found (200) or absent (404). */
export function lookupByRef(baseUrl: string) {
  return async ({ scope, signal }: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
    const res = await fetch(`${baseUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    if (res.status === 404) {
      await res.arrayBuffer();
      return null;
    }
    if (!res.ok) throw new Error(`lookup answered ${res.status}`);
    return res;
  };
}
