/**
 * The example page: a "place order" button that survives a reload mid-request.
 *
 * The one rule it follows: the order's `ref` (think: the checkout id) is
 * decided once, before the first send, and kept where a reload finds it
 * (sessionStorage). Calling `client.fetch` again with the same ref and body
 * after a reload is safe: oncefetch finds the record in IndexedDB, waits out
 * the dead tab's lease, looks the order up, and only sends if it is absent —
 * with the same idempotency key.
 *
 * Bundled by examples/browser/serve.ts with esbuild. In an app, import from
 * 'oncefetch': bundlers pick the browser entry (IndexedDB store, Web Locks).
 */
import { createClient, isOnceError, type LookupFn, type OnceEvent } from '../../src/browser.js';

interface PendingOrder {
  ref: string;
  item: string;
}

const PENDING = 'oncefetch-example:pending-order';
const $ = (id: string): HTMLElement => document.getElementById(id)!;
const log = (line: string): void => {
  $('log').textContent += `${new Date().toLocaleTimeString()}  ${line}\n`;
};

/** Reconciliation: does the API have an order with this ref? */
const findOrderByRef: LookupFn = async ({ scope, signal }) => {
  const res = await fetch(`/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`lookup failed: ${res.status}`);
  return res;
};

const client = createClient({
  tenant: 'example-shop',
  // A short lease: after a reload, the new page takes over from the dead one within 2 s.
  leaseMs: 2_000,
  lookups: { 'place-order': findOrderByRef },
  onEvent: (e: OnceEvent) => log(`event ${e.type}`),
});

async function refreshEffects(): Promise<void> {
  const res = await fetch('/__control/state').catch(() => undefined);
  if (res?.ok) $('effects').textContent = String(((await res.json()) as { effects: number }).effects);
}

async function placeOrder(order: PendingOrder, resumed: boolean): Promise<void> {
  const button = $('place') as HTMLButtonElement;
  button.disabled = true;
  $('status').textContent = resumed ? 'resuming after a reload…' : 'sending…';
  log(`${resumed ? 'resuming' : 'placing'} order ref=${order.ref}`);
  try {
    const res = await client.fetch('/orders', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(order),
      once: { action: 'place-order', ref: order.ref },
    });
    const placed = (await res.json()) as { id: string };
    sessionStorage.removeItem(PENDING);
    $('order').textContent = placed.id;
    $('status').textContent = res.headers.get('oncefetch-replayed') === 'true' ? 'done (answered from the record)' : 'done';
    log(`order ${placed.id} (HTTP ${res.status})`);
  } catch (error) {
    // Ambiguous and unresolved, or out of time: the order stays pending; a reload tries again.
    $('status').textContent = `not finished: ${isOnceError(error) ? error.code : String(error)}`;
    log(`error ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    button.disabled = false;
    await refreshEffects();
  }
}

$('place').addEventListener('click', () => {
  // Decide the ref once and keep it before sending: that is what makes a reload safe.
  const order: PendingOrder = { ref: crypto.randomUUID(), item: 'one blue teapot' };
  sessionStorage.setItem(PENDING, JSON.stringify(order));
  void placeOrder(order, false);
});

const pending = sessionStorage.getItem(PENDING);
if (pending !== null) void placeOrder(JSON.parse(pending) as PendingOrder, true);
else void refreshEffects();
document.body.dataset['ready'] = 'true';
