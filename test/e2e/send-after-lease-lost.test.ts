/**
 * The write that opens an attempt is applied at once but acknowledged only after the lease it took
 * has run out (a PostgreSQL COMMIT whose reply is slow, a store wrapper that waits): meanwhile another
 * client takes the operation over, reconciles (a settled "absent": nothing had been sent) and sends.
 * The first client must not then send its attempt: its lease ran out before the send, by its own clock,
 * so the record may be another's. Two clients of one memory store, a loopback provider that does not
 * dedupe (effects counted there), a lookup by ref.
 *
 * Before: the late-acknowledged client sent all the same: 2 orders at the provider for one ref.
 */
import { describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lookupByRef, orderInit, until, wait } from '../helpers/setup.js';
import { lossy } from '../helpers/lossy-store.js';
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

describe('an attempt whose opening write is acknowledged after its lease ran out', () => {
  for (const which of ['claim+attempt', 'attempt_started'] as const) {
    it(`${which}: the late-acknowledged client does not send over the new owner's send: one effect`, async () => {
      const ref = `SL-${which}`;
      const inner = memoryStore();
      const { store, plan } = slowAck(inner);
      plan.only = [which];
      plan.ackDelayMs = LEASE_MS + SETTLE_MS + 900;
      const a = clientOf(store, 'a');
      const b = clientOf(inner, 'b');
      if (which === 'attempt_started') {
        // attempt 1 answered 503 (retryable, nothing done): the retry's attempt_started is the slow write
        provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
      }
      const first = settled(order(a, ref));
      await until(() => plan.pending);
      // A's lease runs out while its write's acknowledgement is held
      await wait(LEASE_MS + 50);
      const second = await settled(order(b, ref));
      expect(second).toBe('201');
      expect(provider.effectsFor(ref)).toBe(1);
      const outcome = await first;
      // whatever A answers, it sent nothing more: one order for the ref
      expect(provider.effectsFor(ref), `a ended ${outcome}`).toBe(1);
      // it follows the new owner: the recorded success
      expect(outcome).toBe('201');
      await wait(50);
      expect(provider.effectsFor(ref)).toBe(1);
    });
  }

  it('with no other client: the lease is taken back by compare-and-set and the attempt sent, once', async () => {
    const ref = 'SL-alone';
    const { store, plan } = slowAck(memoryStore());
    plan.ackDelayMs = LEASE_MS + 200;
    const a = clientOf(store, 'a');
    expect(await settled(order(a, ref))).toBe('201');
    expect(provider.effectsFor(ref)).toBe(1);
    const rec = await a.get({ action: ACTION, ref });
    expect(rec).toMatchObject({ state: 'succeeded', attempts: [{ owner: 'a', class: 'success' }] });
  });

  for (const how of ['fail', 'lose'] as const) {
    it(`the write that takes the lease back ${how === 'fail' ? 'fails' : 'is applied, its acknowledgement lost'}: nothing sent, the attempt closed not_sent; the next client (no lookup) sends once`, async () => {
      const ref = `SL-renew-${how}`;
      const inner = memoryStore();
      const faulty = lossy(inner);
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
      const rec = await inner.get(JSON.stringify(['default', ACTION, ref]));
      expect(rec).toMatchObject({ state: 'pending', attempts: [{ class: 'not_sent' }] });
      // released, or the lease that ran out (nobody waits for it)
      expect(rec?.lease === null || (rec?.lease?.expiresAt ?? 0) <= Date.now()).toBe(true);
      // a new client, no lookup: nothing can have been delivered, so it sends, once
      const b = clientOf(inner, 'b');
      expect(await settled(order(b, ref, false))).toBe('201');
      expect(provider.effectsFor(ref)).toBe(1);
    });
  }
});
