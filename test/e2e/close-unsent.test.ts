/**
 * `client.close({ waitMs })` that stops a call between the write that opens its attempt (the claim for
 * attempt 1, `attempt_started` for a later one) and the send: nothing left the process, and the record
 * says so (`pending`, the attempt closed `not_sent`, no lease), so the next client sends it once, with
 * the same key, without a lookup. The store here applies that write at once and acknowledges it late
 * (`ackDelayMs`), as a PostgreSQL pool whose COMMIT reply is slow, or an IndexedDB transaction that
 * completes while the database is closing; close() is called while the acknowledgement is pending.
 * Effects are counted at a loopback provider that does not dedupe. Each case runs on SQLite (a file a
 * fresh client reopens), IndexedDB (fake-indexeddb, a database a fresh client reopens) and PostgreSQL
 * (a schema of the test server a fresh pool reads): see test/helpers/close-stores.ts.
 *
 * Before: the call stopped before its send (`closed.throwIfAborted()` in sendOnce) and the store was
 * already closed, so its attempt stayed open: the record `in_flight`, read by the next client as
 * possibly delivered (no lookup: AmbiguousOutcomeError; a lookup: asked first).
 */
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { LET_GO_WAIT_MS } from '../../src/engine/acquire.js';
import type { Provider } from '../../src/testing/provider.js';
import { closeCase, describeEachStore } from '../helpers/close-stores.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lossy } from '../helpers/lossy-store.js';
import { lookupByRef, orderInit, until, wait } from '../helpers/setup.js';
import { ended, slowAck as slowAckOver } from '../helpers/slow-ack.js';

const ACTION = 'create-order';
/** how late past its mark a step may end on this shared 2-core machine */
const SLACK_MS = 300;
const LEASE_MS = 300;

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

function order(client: OnceClient, ref: string): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
}

const posts = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;

describeEachStore('close({ waitMs }) stops a call between recording its attempt and sending it', cleanups, (at) => {
  /** The test's store, its writes that open an attempt acknowledged late (see slow-ack.ts). */
  const slowAck = () => slowAckOver(at().open());

  const { clientOf, stored, sentOnceByNextClient, ranOnceByNextClient } = closeCase(at, cleanups, () => provider, { action: ACTION, leaseMs: LEASE_MS });

  describe('close({ waitMs }) while the write that opens attempt 1 (the claim) is pending', () => {
    it('fetch: nothing sent; the record is pending with the attempt closed not_sent; the next client (no lookup) sends it once with the same key', async () => {
      const ref = 'CU-claim';
      const { store, plan } = slowAck();
      const a = clientOf({ store });
      const t0 = performance.now();
      const call = ended(order(a, ref), t0);
      await until(() => plan.pending);
      const d = await ended(a.close({ waitMs: 50 }), t0);
      const c = await call;
      expect(d.outcome).toBe('ok');
      // close() waited for the acknowledgement (~300 ms) and the never_sent, no longer than waitMs + LET_GO_WAIT_MS
      expect(d.at).toBeLessThan(50 + LET_GO_WAIT_MS + SLACK_MS);
      expect(c.outcome).toBe('StoreError');
      expect(c.value).toBeInstanceOf(StoreError);
      expect(posts(ref)).toBe(0);
      expect(plan.writesAfterClose).toEqual([]);

      await sentOnceByNextClient(ref);
      expect(posts(ref)).toBe(1);
    });

    it('client.run(): the effect never ran; the record is pending, not_sent; the next client runs it once', async () => {
      const ref = 'CU-run';
      const { store, plan } = slowAck();
      const a = clientOf({ store });
      const runs: string[] = [];
      const effect = async ({ key }: { key: string }) => {
        runs.push(key);
        return { id: 'o-1' };
      };
      const call = ended(a.run({ action: ACTION, ref }, effect), performance.now());
      await until(() => plan.pending);
      await a.close({ waitMs: 50 });
      expect((await call).outcome).toBe('StoreError');
      expect(runs).toEqual([]);

      await ranOnceByNextClient(ref, effect, runs);
    });
  });

  describe('close({ waitMs }) while 8 calls each have their claim pending', () => {
    it('every one: nothing sent, pending with its attempt closed not_sent; close() waits for them together, not one after another', async () => {
      const refs = Array.from({ length: 8 }, (_, i) => `CU-many-${i}`);
      const { store, plan } = slowAck();
      plan.slow = refs.length;
      const a = clientOf({ store });
      const t0 = performance.now();
      const calls = refs.map((ref) => ended(order(a, ref), t0));
      await until(() => plan.slow === 0);
      const d = await ended(a.close({ waitMs: 50 }), t0);
      expect(d.at).toBeLessThan(50 + LET_GO_WAIT_MS + SLACK_MS);
      expect((await Promise.all(calls)).map((c) => c.outcome)).toEqual(refs.map(() => 'StoreError'));
      expect(provider.requests).toHaveLength(0);
      expect(plan.writesAfterClose).toEqual([]);
      for (const ref of refs) expect(await stored(ref)).toMatchObject({ state: 'pending', lease: null, attempts: ['not_sent'] });
    });
  });

  describe('close({ waitMs }) while the attempt_started of attempt 2 (after a 503) is pending', () => {
    it('fetch: one POST (the 503), nothing more; the record is pending; the next client, with a lookup, sends at once without asking it', async () => {
      const ref = 'CU-second';
      provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '0', match: { ref } });
      const { store, plan } = slowAck();
      plan.only = ['attempt_started'];
      const a = clientOf({ store, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false } });
      const t0 = performance.now();
      const call = ended(order(a, ref), t0);
      await until(() => plan.pending);
      expect(posts(ref)).toBe(1);
      const d = await ended(a.close({ waitMs: 50 }), t0);
      const c = await call;
      expect(c.outcome).toBe('StoreError');
      expect(d.at).toBeLessThan(c.at + 50 + LET_GO_WAIT_MS + SLACK_MS);
      expect(posts(ref)).toBe(1);
      expect(provider.effectsFor(ref)).toBe(0);
      expect(plan.writesAfterClose).toEqual([]);

      const rec = await stored(ref);
      expect(rec).toMatchObject({ state: 'pending', lease: null, attempts: ['retryable', 'not_sent'] });

      const events: string[] = [];
      const b = clientOf({ lookups: { [ACTION]: lookupByRef(provider.url) }, onEvent: (e) => events.push(e.type) });
      expect((await order(b, ref)).status).toBe(201);
      expect(events).not.toContain('lookup');
      expect(b.stats().lookups).toBe(0);
      expect(posts(ref)).toBe(2);
      expect(new Set(provider.requests.filter((r) => r.ref === ref).map((r) => r.key))).toEqual(new Set([rec.key]));
      expect(provider.effectsFor(ref)).toBe(1);
    });
  });

  describe('the bound: an acknowledgement slower than LET_GO_WAIT_MS', () => {
    // (the call ends at the close, as its deadline would end it, not when the store acknowledges: `bounded`
    // listens to the close too; before, it waited for the acknowledgement, LET_GO_WAIT_MS + 600 ms)
    it('close() resolves by waitMs + LET_GO_WAIT_MS; the call ends at waitMs with the close\'s StoreError; acknowledged after, nothing is sent', async () => {
      const ref = 'CU-slower';
      const { store, plan } = slowAck();
      plan.ackDelayMs = LET_GO_WAIT_MS + 600;
      const a = clientOf({ store });
      const t0 = performance.now();
      const call = ended(order(a, ref), t0);
      await until(() => plan.pending);
      const d = await ended(a.close({ waitMs: 50 }), t0);
      expect(d.outcome).toBe('ok');
      expect(d.at).toBeLessThan(50 + LET_GO_WAIT_MS + SLACK_MS);
      const c = await call;
      expect(c.outcome).toBe('StoreError');
      expect((c.value as Error).message).toMatch(/client\.close\(\{ waitMs: 50 \}\)/);
      expect(c.at).toBeLessThan(50 + SLACK_MS);
      // past the acknowledgement: still nothing sent
      await wait(Math.max(0, LET_GO_WAIT_MS + 700 - (performance.now() - t0)));
      expect(posts(ref)).toBe(0);
    });
  });

  // The read-back of an opening write that failed (applied, its acknowledgement lost) tries again while
  // the read fails; close() cut its wait between two reads short and it gave up without another read,
  // though close() keeps the store open for this call: the attempt, never sent, stayed open (in_flight,
  // the lease held), read by the next client as possibly sent (AmbiguousOutcomeError without a lookup).
  describe('close({ waitMs: 0 }) while the read-back of a claim whose acknowledgement was lost waits to read again', () => {
    it('one last read at the close: pending with the attempt not_sent, no lease; the next client (no lookup) sends once with the same key', async () => {
      const ref = 'CU-readback';
      const { store, plan } = lossy(at().open());
      plan.lose = 'claim+attempt';
      plan.failReads = 2;
      const a = clientOf({ store, leaseMs: 2_000 });
      const t0 = performance.now();
      const call = ended(order(a, ref), t0);
      // the second read failed: the read-back waits 50 ms before the next
      await until(() => plan.reads >= 2, 2_000);
      const d = await ended(a.close({ waitMs: 0 }), t0);
      const c = await call;
      expect(c.outcome).toBe('StoreError');
      expect(d.at).toBeLessThan(c.at + LET_GO_WAIT_MS + SLACK_MS);
      expect(plan.lost).toEqual(['claim+attempt']);
      expect(posts(ref)).toBe(0);

      await sentOnceByNextClient(ref);
    });
  });

  // The same, with the claim held up at the store itself rather than by the wrapper: on PostgreSQL a
  // real INSERT waits for another transaction's table lock (pg's pool.end() waits for it as well), on
  // IndexedDB the claim's transaction waits behind another connection's.
  describe('close({ waitMs: 50 }) while the claim is held up 300 ms by another writer at the store', () => {
    it('nothing sent; pending with the attempt not_sent, no lease; the next client sends once with the same key', async (ctx) => {
      const hold = at().holdWrites;
      if (hold === undefined) return ctx.skip();
      const ref = 'CU-held';
      const a = clientOf();
      await a.get({ action: ACTION, ref: 'warm-up' });
      const { released } = await hold(300);
      const t0 = performance.now();
      const call = ended(order(a, ref), t0);
      await wait(30);
      const d = await ended(a.close({ waitMs: 50 }), t0);
      const c = await call;
      await released;
      expect(c.outcome).toBe('StoreError');
      expect(d.at).toBeLessThan(50 + LET_GO_WAIT_MS + SLACK_MS);
      expect(posts(ref)).toBe(0);

      await sentOnceByNextClient(ref);
    });
  });
});
