/**
 * The chaos run's key mismatches (`--key-mismatch`, chaos/key-mismatch.ts): for a seeded share of
 * the refs of the provider that dedupes, an answer showing the provider held the key (its replay,
 * its 409 "in progress") reaches the client as a key mismatch the engine classifies `conflict`;
 * the request still reached the provider; nothing else is touched. With `--crash-after-key`, a
 * seeded share of those refs have their key held by the provider without an effect.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { orderBody } from '../../chaos/call.js';
import { NEVER_MS, heldKeyFaults, holdsKeyWithoutEffect, mismatchesKey, mismatchingTransport, type MismatchInstead } from '../../chaos/key-mismatch.js';
import { refName, type RunPlan } from '../../chaos/plan.js';
import { classifyResponse } from '../../src/classify/classify.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';

const plan: RunPlan = { seed: 20261130, ops: 1000, workers: 4, refs: 500, concurrency: 8, strictShare: 0.25, window: 6 };
const refs = (prefix: 'D' | 'S', n = 2000) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);

describe('mismatchesKey', () => {
  it('picks a seeded share of the refs of the provider that dedupes, never one of the provider that ignores keys', () => {
    const picked = refs('D').filter((r) => mismatchesKey(plan, r, 0.5)).length;
    expect(picked).toBeGreaterThan(900);
    expect(picked).toBeLessThan(1100);
    expect(refs('S').filter((r) => mismatchesKey(plan, r, 1))).toEqual([]);
    expect(refs('D').filter((r) => mismatchesKey(plan, r, 0))).toEqual([]);
    expect(refs('D').filter((r) => mismatchesKey(plan, r, 1))).toHaveLength(2000);
    // the same for the same seed, another for another
    expect(refs('D').map((r) => mismatchesKey(plan, r, 0.5))).toEqual(refs('D').map((r) => mismatchesKey({ ...plan }, r, 0.5)));
    expect(refs('D').map((r) => mismatchesKey(plan, r, 0.5))).not.toEqual(refs('D').map((r) => mismatchesKey({ ...plan, seed: 7 }, r, 0.5)));
  });
});

describe('mismatchingTransport', () => {
  let provider: Provider;
  let seen: { instead: MismatchInstead; ref: string }[];
  let transport: typeof fetch;

  beforeEach(async () => {
    provider = await startProvider({ processingMs: 2 });
    seen = [];
    transport = mismatchingTransport(fetch, provider.url, plan, 0.5, (instead, ref) => seen.push({ instead, ref }));
  });
  afterEach(async () => provider.close());

  // as the engine sends it: the body as bytes
  const post = (ref: string, key: string, signal?: AbortSignal) =>
    transport(`${provider.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: new TextEncoder().encode(orderBody(ref)),
      ...(signal === undefined ? {} : { signal }),
    });

  async function classOf(res: Response): Promise<string> {
    return classifyResponse({ status: res.status, headers: res.headers, bodyText: await res.text() }, Date.now()).class;
  }

  it('answers a replay with a key mismatch (every answer body classified conflict); the request reached the provider, one effect', async () => {
    const picked = refs('D', 40).filter((r) => mismatchesKey(plan, r, 0.5));
    const statuses = new Set<number>();
    for (const ref of picked) {
      const first = await post(ref, `k-${ref}`);
      expect(first.status).toBe(201);
      await first.text();
      const resend = await post(ref, `k-${ref}`);
      statuses.add(resend.status);
      expect(await classOf(resend)).toBe('conflict');
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(2);
    }
    expect([...statuses].sort()).toEqual([400, 417, 422]);
    expect(seen).toEqual(picked.map((ref) => ({ instead: 'replay', ref })));
  });

  it('answers a 409 "in progress" with a key mismatch, after which the held request commits', async () => {
    const ref = refs('D').find((r) => mismatchesKey(plan, r, 0.5))!;
    provider.fault({ kind: 'delay_before_commit', delayMs: 200, match: { ref } });
    const first = post(ref, 'k-1');
    await new Promise((r) => setTimeout(r, 50));
    const resend = await post(ref, 'k-1');
    expect(await classOf(resend)).toBe('conflict');
    expect(seen).toEqual([{ instead: 'in_progress', ref }]);
    expect((await first).status).toBe(201);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('leaves alone: the first request, the refs not picked, the provider that ignores keys, lookups; rate 0 is the plain transport', async () => {
    const other = refs('D').find((r) => !mismatchesKey(plan, r, 0.5))!;
    expect((await post(other, 'k-o')).status).toBe(201);
    const replay = await post(other, 'k-o');
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const lookup = await transport(`${provider.url}/orders?ref=${other}`);
    expect(lookup.status).toBe(200);
    const strict = await startProvider({ ignoreKeys: true });
    try {
      const s = mismatchingTransport(fetch, provider.url, plan, 1, () => expect.fail('injected'));
      const init = { method: 'POST', headers: { 'idempotency-key': 'k-s' }, body: orderBody('D-00001') };
      expect((await s(`${strict.url}/orders`, init)).status).toBe(201);
      expect((await s(`${strict.url}/orders`, init)).status).toBe(201);
    } finally {
      await strict.close();
    }
    expect(seen).toEqual([]);
    expect(mismatchingTransport(fetch, provider.url, plan, 0, () => undefined)).toBe(fetch);
  });

  describe('a key held without an effect (--crash-after-key)', () => {
    it('the first request records the key and never commits; every later one with the key meets a mismatch; no effect, the lookup says absent', async () => {
      const faults = heldKeyFaults(plan, 0.5, 0.2);
      const ref = faults[0]?.match?.ref;
      expect(ref).toBeDefined();
      provider.faults(faults);
      // the attempt times out, as the engine's would (ambiguous: it reached the provider)
      await expect(post(ref!, 'k-h', AbortSignal.timeout(150))).rejects.toThrow();
      for (let i = 0; i < 3; i++) {
        const resend = await post(ref!, 'k-h');
        expect(await classOf(resend)).toBe('conflict');
      }
      expect(seen).toEqual(Array.from({ length: 3 }, () => ({ instead: 'in_progress', ref })));
      await new Promise((r) => setTimeout(r, 100));
      expect(provider.effectsFor(ref!)).toBe(0);
      expect((await fetch(`${provider.url}/orders?ref=${ref!}`)).status).toBe(404);
      // the other refs' scripted faults wait for their first request
      expect(provider.pendingFaults).toBe(faults.length - 1);
      expect(provider.faultsInjected.delay_before_commit).toBe(1);
    });
  });
});

describe('holdsKeyWithoutEffect, heldKeyFaults (--crash-after-key)', () => {
  it('picks a seeded share of the refs that get the mismatch, and no other', () => {
    const mismatched = refs('D').filter((r) => mismatchesKey(plan, r, 0.5));
    const held = refs('D').filter((r) => holdsKeyWithoutEffect(plan, r, 0.5, 0.2));
    expect(held.length).toBeGreaterThan(mismatched.length * 0.12);
    expect(held.length).toBeLessThan(mismatched.length * 0.28);
    for (const ref of held) expect(mismatched).toContain(ref);
    expect(refs('D').filter((r) => holdsKeyWithoutEffect(plan, r, 0, 1))).toEqual([]);
    expect(refs('D').filter((r) => holdsKeyWithoutEffect(plan, r, 0.5, 0))).toEqual([]);
    expect(refs('D').filter((r) => holdsKeyWithoutEffect(plan, r, 0.5, 1))).toEqual(mismatched);
    expect(refs('S').filter((r) => holdsKeyWithoutEffect(plan, r, 1, 1))).toEqual([]);
  });

  it('one scripted fault per picked ref of the pool, held before the commit for longer than any run', () => {
    const faults = heldKeyFaults(plan, 0.5, 0.2);
    const pool = Array.from({ length: plan.refs }, (_, i) => refName(plan, i));
    expect(faults.map((f) => f.match?.ref)).toEqual(pool.filter((r) => holdsKeyWithoutEffect(plan, r, 0.5, 0.2)));
    expect(faults.length).toBeGreaterThan(0);
    for (const f of faults) expect(f).toMatchObject({ kind: 'delay_before_commit', delayMs: NEVER_MS });
    expect(heldKeyFaults(plan, 0.5, 0)).toEqual([]);
  });
});

