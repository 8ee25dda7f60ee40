/**
 * A ref oncefetch minted (no `once.ref`, no key header) is never seen by the provider, so a lookup by
 * ref can only answer "absent" about it. Not only the call (d19b1ca): `recover()` must not ask the
 * registered lookup about such a record either. Regression: recover() asked it, took the false
 * "absent" (settled), put the record back to pending, and the call, whose lease recover() had taken
 * while its answer was on the way, followed that record and sent the order again: two effects at a
 * provider that ignores keys.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit } from '../helpers/setup.js';

let provider: Provider;
const clients: OnceClient[] = [];

function client(options: OnceClientOptions): OnceClient {
  const c = createClient({ ...options, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry } });
  clients.push(c);
  return c;
}

beforeEach(async () => {
  provider = await startProvider({ ignoreKeys: true });
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
  await provider.close();
});

describe('a minted ref and recover()', () => {
  it("recover() does not ask the registered lookup about a minted ref; the call whose lease it took sends nothing more", async () => {
    provider.fault({ kind: 'error_after_commit' });
    const store = memoryStore();
    const lookups = { 'create-order': lookupByRef(provider.url) };
    // A's transport holds the provider's answer (a 500 after the order was made) until recover() is done.
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const gated: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (provider.requests.length === 1) await gate;
      return res;
    };
    const a = client({ store, owner: 'a', leaseMs: 200, settleMs: 0, lookups, fetch: gated });
    const first = a.fetch(`${provider.url}/orders`, { ...orderInit('M-1'), once: { action: 'create-order' } }).then(
      (res) => String(res.status),
      (e: unknown) => (e instanceof Error ? e.name : String(e)),
    );
    for (let i = 0; i < 200 && provider.effects === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(provider.effects).toBe(1);
    const [listed] = await store.list({ states: ['in_flight'], limit: 10 });
    expect(listed?.keySource).toBe('minted');
    // B's clock is a minute ahead: A's lease has expired for it.
    const b = client({ store, owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, lookups });
    let left: Awaited<ReturnType<typeof store.get>>;
    const report = await b.recover().finally(async () => {
      // as recover() left it, before A's late 500 lands (a crashed A never adds it)
      left = await store.get(listed?.id ?? '');
      open();
    });
    expect(left?.state).toBe('ambiguous');
    const ended = await first;
    expect({ requests: provider.requests.length, effects: provider.effects }).toEqual({ requests: 1, effects: 1 });
    expect(ended).toBe('AmbiguousOutcomeError');
    expect(provider.lookups).toBe(0);
    expect(report.absent).toEqual([]);
    expect(report.stillAmbiguous).toHaveLength(1);
  });
});
