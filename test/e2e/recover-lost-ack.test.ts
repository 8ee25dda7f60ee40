/**
 * `client.recover()`'s takeover compare-and-set applied, its acknowledgement lost (the store reports
 * a StoreError: PostgreSQL's connection dropped after COMMIT, a wrapper's timeout). recover() reads
 * the record back and, found as its write left it, releases the lease it took, so that the record's
 * next call need not wait for it. Regression: the `<owner>/recover` lease stayed held until it
 * expired (`leaseMs`), and a call meanwhile waited for it, then gave up with OperationInFlightError.
 * Memory store wrapped by a lossy store (test/helpers/lossy-store.ts), the loopback provider (ignoring
 * keys); effects counted at the provider.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { applyEvent, recordId } from '../../src/operation/record.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lossy } from '../helpers/lossy-store.js';
import { lookupByRef, orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';

let provider: Provider;
const clients: OnceClient[] = [];

beforeEach(async () => {
  provider = await startProvider({ ignoreKeys: true });
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider.close();
});

function client(store: OnceStore, options: OnceClientOptions = {}): OnceClient {
  const made = createClient({ store, telemetry: false, ...options, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const order = (c: OnceClient, ref: string): Promise<Response> => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
const scope = (ref: string) => ({ tenant: 'default', action: ACTION, ref });

/** How the record is left for recover(), and the name of recover()'s takeover write. */
const LEFT = {
  'ambiguous, no lease': {
    write: 'lease',
    leave: async (store: OnceStore, ref: string) => {
      provider.fault({ kind: 'drop_after_commit', match: { ref } });
      await expect(order(client(store), ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    },
  },
  'ambiguous under an expired lease of another owner': {
    write: 'takeover',
    leave: async (store: OnceStore, ref: string) => {
      provider.fault({ kind: 'drop_after_commit', match: { ref } });
      await expect(order(client(store), ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
      const rec = await store.get(recordId(scope(ref)));
      if (rec === undefined) throw new Error('no record');
      const crashed = applyEvent(rec, { type: 'acquire', owner: 'crashed-worker', leaseExpiresAt: Date.now() - 1 }, Date.now(), 'crashed-worker');
      expect((await store.compareAndSet(rec.id, rec.generation, crashed)).ok).toBe(true);
    },
  },
  'pending, cleared only by a dedupe (recover() writes reconcile_first with its takeover)': {
    write: 'stop',
    leave: async (store: OnceStore, ref: string) => {
      provider.fault({ kind: 'drop_after_commit', match: { ref } });
      const down = async (): Promise<Response | null> => {
        throw new Error('lookup down');
      };
      const d = client(store, { providerDedupes: true, lookups: { [ACTION]: down }, retry: { maxAttempts: 1 } });
      await expect(order(d, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
      expect((await store.get(recordId(scope(ref))))?.state).toBe('pending');
    },
  },
} as const;

describe.each(Object.keys(LEFT) as (keyof typeof LEFT)[])("recover()'s takeover applied, its ack lost: a record %s", (how) => {
  it('the lease recover() took is released: a call right after settles it by lookup, one effect', async () => {
    const ref = 'RLA-1';
    const { store, plan } = lossy(memoryStore());
    await LEFT[how].leave(store, ref);
    expect(provider.effectsFor(ref)).toBe(1);
    const sent = provider.requests.length;

    // a long lease: without the release, the record stays held by `<owner>/recover` for a minute
    const recovering = client(store, { leaseMs: 60_000, settleMs: 0, lookups: { [ACTION]: lookupByRef(provider.url) } });
    plan.lose = LEFT[how].write;
    const report = await recovering.recover();
    expect(plan.lost).toEqual([LEFT[how].write]);
    expect(report.resolved).toEqual([]);
    expect(report.errors).toEqual([{ id: recordId(scope(ref)), scope: scope(ref), message: expect.stringMatching(/acknowledgement .* was lost/) as unknown }]);
    const after = await store.get(recordId(scope(ref)));
    expect(after?.lease).toBeNull();
    expect(after?.state).toBe('ambiguous');

    // the next call (another process) does not wait a minute: it looks the order up at once
    const next = client(store, { inFlightWaitMs: 300, settleMs: 0, lookups: { [ACTION]: lookupByRef(provider.url) } });
    const res = await order(next, ref);
    expect(res.status).toBe(200);
    expect((await next.get(scope(ref)))?.state).toBe('succeeded');
    expect(provider.requests.length).toBe(sent);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
