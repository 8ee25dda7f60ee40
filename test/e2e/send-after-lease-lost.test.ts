/**
 * The write that opens an attempt is applied at once but acknowledged only after the lease it took
 * has run out (a PostgreSQL COMMIT whose reply is slow, a store wrapper that waits): meanwhile another
 * client takes the operation over, reconciles (a settled "absent": nothing had been sent) and sends.
 * The first client must not then send its attempt: its lease ran out before the send, by its own clock,
 * so the record may be another's. It takes the lease back by compare-and-set first; lost, it closes
 * the attempt as never sent and follows the new owner. Two clients of one store (one SQLite file, one
 * IndexedDB database, one PostgreSQL schema), a loopback provider that does not dedupe (effects counted
 * there), a lookup by ref.
 *
 * Before: the late-acknowledged client sent all the same: 2 orders at the provider for one ref.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { describeEachStore } from '../helpers/close-stores.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lossy } from '../helpers/lossy-store.js';
import { lookupByRef, orderInit, until, wait } from '../helpers/setup.js';
import { slowAck } from '../helpers/slow-ack.js';

const ACTION = 'create-order';
const LEASE_MS = 200;
const SETTLE_MS = 300;

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

function clientOf(store: OnceStore, owner: string): OnceClient {
  const client = createClient({ store, owner, leaseMs: LEASE_MS, settleMs: SETTLE_MS, telemetry: false, retry: { budget: false } });
  cleanups.push(() => client.close());
  return client;
}

function order(client: OnceClient, ref: string, lookup = true): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(lookup ? { lookup: lookupByRef(provider.url) } : {}) } });
}

const settled = (p: Promise<Response>) => p.then((r) => String(r.status), (e: unknown) => (e instanceof Error ? e.name : String(e)));

describeEachStore('an attempt whose opening write is acknowledged after its lease ran out', cleanups, (at) => {
  const cases = [
    { which: 'claim+attempt', when: 'after the new owner sent', ackDelayMs: LEASE_MS + SETTLE_MS + 900 },
    { which: 'attempt_started', when: 'after the new owner sent', ackDelayMs: LEASE_MS + SETTLE_MS + 900 },
    // (the new owner takes over at ~LEASE_MS + 50 and waits out SETTLE_MS before trusting its "absent")
    { which: 'claim+attempt', when: 'while the new owner waits out settleMs', ackDelayMs: LEASE_MS + 150 },
  ] as const;
  for (const { which, when, ackDelayMs } of cases) {
    it(`${which}, acknowledged ${when}: the late-acknowledged client does not send over the new owner: one effect`, async () => {
      const ref = `SL-${which}-${ackDelayMs}`;
      const { store, plan } = slowAck(at().open());
      plan.only = [which];
      plan.ackDelayMs = ackDelayMs;
      const a = clientOf(store, 'a');
      const b = clientOf(at().open(), 'b');
      // attempt 1 answered 503 (retryable, nothing done): the retry's attempt_started is the slow write
      if (which === 'attempt_started') provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
      const first = settled(order(a, ref));
      await until(() => plan.pending);
      // A's lease runs out while its write's acknowledgement is held
      await wait(LEASE_MS + 50);
      expect(await settled(order(b, ref))).toBe('201');
      const outcome = await first;
      // it sent nothing more, and follows the new owner: the recorded success
      expect(provider.effectsFor(ref), `a ended ${outcome}`).toBe(1);
      expect(outcome).toBe('201');
      await wait(50);
      expect(provider.effectsFor(ref)).toBe(1);
    });
  }

  it('with no other client: the lease is taken back by compare-and-set and the attempt sent, once', async () => {
    const ref = 'SL-alone';
    const { store, plan } = slowAck(at().open());
    plan.ackDelayMs = LEASE_MS + 200;
    const a = clientOf(store, 'a');
    expect(await settled(order(a, ref))).toBe('201');
    expect(provider.effectsFor(ref)).toBe(1);
    expect(await a.get({ action: ACTION, ref })).toMatchObject({ state: 'succeeded', attempts: [{ owner: 'a', class: 'success' }] });
  });

  for (const how of ['fail', 'lose'] as const) {
    it(`the write that takes the lease back ${how === 'fail' ? 'fails' : 'is applied, its acknowledgement lost'}: nothing sent, the attempt closed not_sent; the next client (no lookup) sends once`, async () => {
      const ref = `SL-renew-${how}`;
      const faulty = lossy(at().open());
      const { store, plan } = slowAck(faulty.store);
      plan.only = ['claim+attempt'];
      plan.ackDelayMs = LEASE_MS + 100;
      // the renewal (a lease-only write) is the next write after the claim
      if (how === 'fail') faulty.plan.fail = 'lease';
      else faulty.plan.lose = 'lease';
      const a = clientOf(store, 'a');
      const first = await order(a, ref, false).then(
        (r) => r.status,
        (e: unknown) => e,
      );
      expect(first).toBeInstanceOf(StoreError);
      expect(provider.effectsFor(ref)).toBe(0);
      // a new client, no lookup: nothing can have been delivered, so it sends, once
      const b = clientOf(at().open(), 'b');
      const rec = await b.get({ action: ACTION, ref });
      expect(rec).toMatchObject({ state: 'pending', attempts: [{ class: 'not_sent' }] });
      // released, or the lease that ran out (nobody waits for it)
      expect(rec?.lease === null || (rec?.lease?.expiresAt ?? 0) <= Date.now()).toBe(true);
      expect(await settled(order(b, ref, false))).toBe('201');
      expect(provider.effectsFor(ref)).toBe(1);
    });
  }
});
