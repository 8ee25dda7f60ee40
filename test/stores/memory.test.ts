import { describe, expect, it } from 'vitest';
import { newRecord, type OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { corruptMemoryRecord, memoryStore } from '../../src/stores/memory.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';

describeStoreContract('memoryStore', {
  durable: false,
  setup() {
    let store: OnceStore | undefined;
    return {
      open: () => (store = memoryStore()),
      corrupt: (id, raw) => {
        if (store === undefined) throw new Error('corrupt before open');
        corruptMemoryRecord(store, id, raw);
      },
    };
  },
});

function sample(): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'a', ref: 'r' },
    key: 'k',
    keySource: 'minted',
    fingerprint: '0'.repeat(64),
    request: null,
    owner: 'o',
    now: 1,
    leaseMs: 10,
    retentionMs: 100,
  });
}

describe('memoryStore arguments', () => {
  it('refuses to write an invalid record (TypeError), so no unreadable row is ever stored', async () => {
    const store = memoryStore();
    const bad = { ...sample(), fingerprint: 'nope' };
    await expect(store.claim(bad)).rejects.toBeInstanceOf(TypeError);
    expect(await store.get(bad.id)).toBeUndefined();
    const good = sample();
    await store.claim(good);
    await expect(store.compareAndSet(good.id, 1, { ...good, generation: 2, updatedAt: Number.NaN })).rejects.toBeInstanceOf(
      TypeError,
    );
    expect(await store.get(good.id)).toEqual(good);
  });

  it('rejects bad list and purge arguments with RangeError/TypeError', async () => {
    const store = memoryStore();
    await expect(store.list({ limit: -1 })).rejects.toBeInstanceOf(RangeError);
    await expect(store.list({ limit: 1.5 })).rejects.toBeInstanceOf(RangeError);
    await expect(store.list({ leaseExpiredBefore: Number.NaN })).rejects.toBeInstanceOf(RangeError);
    await expect(store.list({ states: ['nope' as never] })).rejects.toBeInstanceOf(TypeError);
    await expect(store.purge(Number.NaN)).rejects.toBeInstanceOf(RangeError);
  });

  it('close() twice is harmless', async () => {
    const store = memoryStore();
    await store.close();
    await expect(store.close()).resolves.toBeUndefined();
  });
});
