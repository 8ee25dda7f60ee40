/**
 * The chaos run's store faults (`--store-faults`): a rejected call writes nothing, a lost
 * acknowledgement writes all the same, a slow call answers truly, and the faults are the same for
 * the same seed.
 */
import { describe, expect, it } from 'vitest';
import { faultyStore, lateClaims, type StoreFaultKind, type StoreMethod } from '../../chaos/store-faults.js';
import { StoreError, memoryStore } from '../../src/index.js';
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/index.js';

function record(ref: string): OperationRecord {
  return newRecord({ scope: { tenant: 't', action: 'a', ref }, key: `k-${ref}`, keySource: 'minted', fingerprint: 'f'.repeat(64), request: null, owner: 'o', now: Date.now(), leaseMs: 60_000, retentionMs: 86_400_000 });
}

/** A faulty memory store whose every call misbehaves (`rate` 1), and the faults it reported. */
function faulty(seed: number, rate = 1) {
  const inner = memoryStore();
  const seen: `${StoreFaultKind} ${StoreMethod}`[] = [];
  const store = faultyStore(inner, { rate, maxSlowMs: 20 }, seed, (kind, method) => seen.push(`${kind} ${method}`));
  return { inner, store, seen };
}

describe('faultyStore', () => {
  it('a rejected claim writes nothing; a lost acknowledgement wrote; a slow one answers truly', async () => {
    const outcomes = new Map<string, number>();
    for (let seed = 0; seed < 40; seed++) {
      const { inner, store, seen } = faulty(seed);
      const rec = record(`r${seed}`);
      const result = await store.claim(rec).then(
        (r) => ({ created: r.created }),
        (e: unknown) => ({ error: e }),
      );
      const stored = await inner.get(rec.id);
      const kind = seen[0];
      outcomes.set(kind ?? 'none', (outcomes.get(kind ?? 'none') ?? 0) + 1);
      if (kind === 'reject claim') {
        expect((result as { error: unknown }).error).toBeInstanceOf(StoreError);
        expect(stored).toBeUndefined();
      } else if (kind === 'lost_ack claim') {
        expect((result as { error: unknown }).error).toBeInstanceOf(StoreError);
        expect(stored?.generation).toBe(rec.generation);
      } else {
        expect(kind).toBe('slow claim');
        expect(result).toEqual({ created: true });
        expect(stored?.generation).toBe(rec.generation);
      }
    }
    // every kind happened
    expect([...outcomes.keys()].sort()).toEqual(['lost_ack claim', 'reject claim', 'slow claim']);
  });

  it('a compareAndSet that changed nothing (lost the race) is counted as rejected, not as a lost acknowledgement', async () => {
    const kinds = new Set<string>();
    for (let seed = 0; seed < 40; seed++) {
      const { inner, store, seen } = faulty(seed);
      const rec = record(`r${seed}`);
      await inner.claim(rec);
      const next = applyEvent(rec, { type: 'renew', leaseExpiresAt: Date.now() + 1_000 }, Date.now(), 'o');
      // expected generation 0: the write cannot apply
      await store.compareAndSet(rec.id, 0, next).catch(() => undefined);
      kinds.add(seen[0] ?? 'none');
      expect((await inner.get(rec.id))?.generation).toBe(rec.generation);
    }
    expect([...kinds].sort()).toEqual(['reject compareAndSet', 'slow compareAndSet']);
  });

  it('reads are rejected or slow, never a lost acknowledgement; rate 0 leaves every call alone', async () => {
    const kinds = new Set<string>();
    for (let seed = 0; seed < 40; seed++) {
      const { store, seen } = faulty(seed);
      await store.get('nothing').catch(() => undefined);
      await store.list({}).catch(() => undefined);
      for (const s of seen) kinds.add(s);
    }
    expect([...kinds].sort()).toEqual(['reject get', 'reject list', 'slow get', 'slow list']);
    const { store, seen } = faulty(1, 0);
    for (let i = 0; i < 50; i++) await store.claim(record(`q${i}`));
    expect(seen).toEqual([]);
  });

  it('the same seed gives the same faults', async () => {
    const run = async (seed: number): Promise<string[]> => {
      const { store, seen } = faulty(seed, 0.3);
      for (let i = 0; i < 60; i++) await store.claim(record(`s${i}`)).catch(() => undefined);
      return seen;
    };
    const a = await run(99);
    expect(a.length).toBeGreaterThan(5);
    expect(await run(99)).toEqual(a);
    expect(await run(100)).not.toEqual(a);
  });
});

describe('lateClaims (the bursts\' store)', () => {
  it('a claim is applied at once and answered late; every other call goes straight through', async () => {
    const inner = memoryStore();
    const store = lateClaims(inner, 40);
    const rec = record('late');
    const startedAt = Date.now();
    const claimed = store.claim(rec);
    // applied before it is answered: another caller reads it meanwhile
    await new Promise((done) => setTimeout(done, 5));
    expect((await inner.get(rec.id))?.id).toBe(rec.id);
    expect((await claimed).created).toBe(true);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(39);
    expect((await store.claim(rec)).created).toBe(false);
    expect((await store.get(rec.id))?.generation).toBe(rec.generation);
    expect((await store.list()).map((r) => r.id)).toEqual([rec.id]);
    const next = { ...rec, generation: rec.generation + 1 };
    expect(await store.compareAndSet(rec.id, rec.generation, next)).toEqual({ ok: true });
    expect((await store.compareAndSet(rec.id, rec.generation, next)).ok).toBe(false);
  });
});
