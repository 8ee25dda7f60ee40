/**
 * One durable write before the first send: a new operation is claimed already
 * `in_flight` with attempt 1 open. A cancel or abort that comes before the
 * send closes that attempt as `not_sent`, so the record never claims a send
 * that did not happen.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceStore, OperationRecord } from '../../src/index.js';

/** A memory store that logs every write and can hold claims until released. */
function spyStore(): { store: OnceStore; writes: Array<{ op: string; state: string }>; holdClaims: () => () => void } {
  const inner = memoryStore();
  const writes: Array<{ op: string; state: string }> = [];
  let gate: Promise<void> | undefined;
  const store: OnceStore = {
    name: 'spy',
    claim: async (record: OperationRecord) => {
      writes.push({ op: 'claim', state: record.state });
      await gate;
      return inner.claim(record);
    },
    get: (id) => inner.get(id),
    compareAndSet: (id, generation, next) => {
      writes.push({ op: 'cas', state: next.state });
      return inner.compareAndSet(id, generation, next);
    },
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  const holdClaims = (): (() => void) => {
    let release!: () => void;
    gate = new Promise<void>((done) => (release = done));
    return () => {
      gate = undefined;
      release();
    };
  };
  return { store, writes, holdClaims };
}

const created = (async () => new Response('{"id":"o-1"}', { status: 201 })) as typeof globalThis.fetch;

describe('the first durable write', () => {
  it('a new operation is claimed in_flight with attempt 1 open: two writes in all, one before the send', async () => {
    const { store, writes } = spyStore();
    let writesAtSend = -1;
    const fetch = (async (...args: Parameters<typeof globalThis.fetch>) => {
      writesAtSend = writes.length;
      return created(...args);
    }) as typeof globalThis.fetch;
    const client = createClient({ store, fetch, telemetry: false });
    const res = await client.fetch('http://provider.test/orders', { method: 'POST', body: '{}', once: { action: 'create', ref: 'r1' } });
    expect(res.status).toBe(201);
    expect(writesAtSend).toBe(1);
    expect(writes).toEqual([
      { op: 'claim', state: 'in_flight' },
      { op: 'cas', state: 'succeeded' },
    ]);
    const record = await client.get({ action: 'create', ref: 'r1' });
    expect(record?.attempts).toHaveLength(1);
    expect(record?.attempts[0]).toMatchObject({ number: 1, class: 'success', status: 201 });
  });

  it('a cancel signalled while the claim is being written: attempt 1 closes not_sent, the operation ends cancelled, nothing sent', async () => {
    const { store, writes, holdClaims } = spyStore();
    let sent = 0;
    const fetch = (async (...args: Parameters<typeof globalThis.fetch>) => {
      sent++;
      return created(...args);
    }) as typeof globalThis.fetch;
    const client = createClient({ store, fetch, telemetry: false });
    const cancel = new AbortController();
    const release = holdClaims();
    const call = client.fetch('http://provider.test/orders', { method: 'POST', body: '{}', once: { action: 'create', ref: 'r2', signal: cancel.signal } });
    await new Promise((done) => setTimeout(done, 5));
    cancel.abort();
    release();
    await expect(call).rejects.toMatchObject({ code: 'OPERATION_CANCELLED' });
    expect(sent).toBe(0);
    const record = await client.get({ action: 'create', ref: 'r2' });
    expect(record?.state).toBe('cancelled');
    expect(record?.attempts).toHaveLength(1);
    expect(record?.attempts[0]).toMatchObject({ class: 'not_sent' });
    expect(writes[0]).toEqual({ op: 'claim', state: 'in_flight' });
  });

  it('a cancel signalled before the call: claimed pending, no attempt at all', async () => {
    const { store, writes } = spyStore();
    const client = createClient({ store, fetch: created, telemetry: false });
    const cancel = new AbortController();
    cancel.abort();
    await expect(
      client.fetch('http://provider.test/orders', { method: 'POST', body: '{}', once: { action: 'create', ref: 'r3', signal: cancel.signal } }),
    ).rejects.toMatchObject({ code: 'OPERATION_CANCELLED' });
    expect(writes[0]).toEqual({ op: 'claim', state: 'pending' });
    const record = await client.get({ action: 'create', ref: 'r3' });
    expect(record?.state).toBe('cancelled');
    expect(record?.attempts).toHaveLength(0);
  });

  it('an abort while the claim is being written: the record is left pending (not in flight) with its lease released', async () => {
    const { store, holdClaims } = spyStore();
    let sent = 0;
    const fetch = (async (...args: Parameters<typeof globalThis.fetch>) => {
      sent++;
      return created(...args);
    }) as typeof globalThis.fetch;
    const client = createClient({ store, fetch, telemetry: false });
    const abort = new AbortController();
    const reason = new Error('caller gave up');
    const release = holdClaims();
    const call = client.fetch('http://provider.test/orders', { method: 'POST', body: '{}', signal: abort.signal, once: { action: 'create', ref: 'r4' } });
    await new Promise((done) => setTimeout(done, 5));
    abort.abort(reason);
    release();
    await expect(call).rejects.toBe(reason);
    expect(sent).toBe(0);
    const record = await client.get({ action: 'create', ref: 'r4' });
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
    expect(record?.attempts[0]).toMatchObject({ class: 'not_sent' });
    // and the next call resumes it with the same key
    const again = await client.fetch('http://provider.test/orders', { method: 'POST', body: '{}', once: { action: 'create', ref: 'r4' } });
    expect(again.status).toBe(201);
    expect((await client.get({ action: 'create', ref: 'r4' }))?.key).toBe(record?.key);
  });
});
