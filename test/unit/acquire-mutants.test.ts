/**
 * Tests written to kill hand-made mutants of src/engine/acquire.ts that the focused suites let
 * survive: a record held under this client's own owner id is resumed at once (not waited for as
 * another owner's), a lease that ends exactly now is taken over, and what the claim writes and
 * reports (the minted key, the key's source, created/resumed/takeover counts and events).
 * Memory store seeded with a record, an injected clock, effects counted as calls of the injected fetch.
 */
import { describe, expect, it } from 'vitest';

import { OperationInFlightError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions, OnceEvent, OnceStore } from '../../src/index.js';
import { fingerprintRequest, normaliseUrl } from '../../src/operation/fingerprint.js';
import { differentPart } from '../../src/engine/acquire.js';
import { newRecord, recordId } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';

const NOW = 1_900_000_000_000;
const URL_ORDERS = 'https://api.example.test/orders';
const BODY = '{"sku":"book"}';
const SCOPE = { tenant: 'default', action: 'create-order', ref: 'A-1' };
const post = { method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } };

/** A fetch that answers 201 and counts its calls (the business effects) and the keys they carried. */
function provider() {
  const keys: (string | null)[] = [];
  const fetch = ((_input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    keys.push(new Headers(init?.headers).get('idempotency-key'));
    return Promise.resolve(new Response('{"id":"o-1"}', { status: 201 }));
  }) as typeof globalThis.fetch;
  return { fetch, keys, calls: () => keys.length };
}

/** A fetch that answers 201 and keeps the record as the store holds it at each send. */
function seenAtSend(store: OnceStore): { seen: (OperationRecord | undefined)[]; fetch: typeof globalThis.fetch } {
  const seen: (OperationRecord | undefined)[] = [];
  const fetch = (async (): Promise<Response> => {
    seen.push(await store.get(recordId(SCOPE)));
    return new Response('{"id":"o-1"}', { status: 201 });
  }) as typeof globalThis.fetch;
  return { seen, fetch };
}

/** A pending record of the request above (same fingerprint), its lease held by `owner` until `expiresAt`. */
async function seeded(store: OnceStore, owner: string, expiresAt: number): Promise<OperationRecord> {
  const fingerprint = await fingerprintRequest({ method: 'POST', url: normaliseUrl(URL_ORDERS), body: new TextEncoder().encode(BODY), contentType: 'application/json' });
  const rec = newRecord({
    scope: SCOPE,
    key: 'k-seeded',
    keySource: 'minted',
    fingerprint,
    request: { method: 'POST', url: URL_ORDERS },
    owner,
    now: expiresAt - 5_000,
    leaseMs: 5_000,
    retentionMs: 3_600_000,
  });
  const { created } = await store.claim(rec);
  expect(created).toBe(true);
  return rec;
}

function client(store: OnceStore, fetch: typeof globalThis.fetch, events: OnceEvent[], options: OnceClientOptions = {}) {
  return createClient({ store, fetch, now: () => NOW, random: () => 0.5, inFlightWaitMs: 0, retry: { budget: false }, onEvent: (e) => void events.push(e), ...options });
}

describe('a record whose lease this owner holds', () => {
  it('is resumed at once, not waited for: one send with the seeded key, resumed (no takeover, no wait)', async () => {
    const store = memoryStore();
    await seeded(store, 'w', NOW + 10_000);
    const p = provider();
    const events: OnceEvent[] = [];
    const c = client(store, p.fetch, events, { owner: 'w' });
    const res = await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } });
    expect(res.status).toBe(201);
    expect(p.calls()).toBe(1);
    expect(p.keys).toEqual(['k-seeded']);
    expect(events.map((e) => e.type)).toContain('operation_resumed');
    expect(events.map((e) => e.type)).not.toContain('waiting');
    expect(events.map((e) => e.type)).not.toContain('takeover');
    expect(c.stats().takeovers).toBe(0);
    expect(c.stats().operationsCreated).toBe(0);
    await c.close();
  });
});

describe("another owner's lease", () => {
  it('that ends exactly now is taken over: one send with the seeded key, counted as a takeover', async () => {
    const store = memoryStore();
    await seeded(store, 'other', NOW);
    const p = provider();
    const events: OnceEvent[] = [];
    const c = client(store, p.fetch, events, { owner: 'me' });
    const res = await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } });
    expect(res.status).toBe(201);
    expect(p.keys).toEqual(['k-seeded']);
    expect(c.stats().takeovers).toBe(1);
    const takeover = events.find((e) => e.type === 'takeover');
    expect(takeover).toMatchObject({ previousOwner: 'other', previousState: 'pending' });
    expect(events.map((e) => e.type)).not.toContain('waiting');
    await c.close();
  }, 5_000);

  it('still live 1 ms more is waited for (inFlightWaitMs 0: OperationInFlightError), nothing sent', async () => {
    const store = memoryStore();
    await seeded(store, 'other', NOW + 1);
    const p = provider();
    const events: OnceEvent[] = [];
    const c = client(store, p.fetch, events, { owner: 'me' });
    await expect(c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } })).rejects.toBeInstanceOf(OperationInFlightError);
    expect(p.calls()).toBe(0);
    expect(events.find((e) => e.type === 'waiting')).toMatchObject({ owner: 'other' });
    const after = await store.get(recordId(SCOPE));
    expect(after?.lease?.owner).toBe('other');
    await c.close();
  }, 5_000);
});

describe('a new operation', () => {
  it('with no ref and no key: the minted ref is the key sent and recorded, its source minted; counted as created', async () => {
    const store = memoryStore();
    const p = provider();
    const events: OnceEvent[] = [];
    const c = client(store, p.fetch, events);
    await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action } });
    expect(p.calls()).toBe(1);
    const [rec] = await store.list({});
    expect(rec?.key).toBe(rec?.ref);
    expect(rec?.keySource).toBe('minted');
    expect(p.keys).toEqual([rec?.ref]);
    expect(c.stats().operationsCreated).toBe(1);
    expect(events.map((e) => e.type)).toContain('operation_created');
    await c.close();
  });

  it("with the caller's Idempotency-Key: that key is sent and recorded, its source caller; a second call replays, nothing more created", async () => {
    const store = memoryStore();
    const p = provider();
    const events: OnceEvent[] = [];
    const c = client(store, p.fetch, events);
    const init = { ...post, headers: { ...post.headers, 'idempotency-key': 'caller-key-1' }, once: { action: SCOPE.action, ref: SCOPE.ref } };
    await c.fetch(URL_ORDERS, init);
    const again = await c.fetch(URL_ORDERS, init);
    expect(again.status).toBe(201);
    expect(p.keys).toEqual(['caller-key-1']);
    const rec = await store.get(recordId(SCOPE));
    expect(rec?.key).toBe('caller-key-1');
    expect(rec?.keySource).toBe('caller');
    expect(c.stats().operationsCreated).toBe(1);
    await c.close();
  });
});

describe('what the claim or takeover writes before the send', () => {
  it("a takeover holds a full lease (now + leaseMs) under the new owner while its attempt is on the wire", async () => {
    const store = memoryStore();
    await seeded(store, 'other', NOW - 1);
    const { seen, fetch } = seenAtSend(store);
    const c = client(store, fetch, [], { owner: 'me', leaseMs: 30_000 });
    await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.lease).toEqual({ owner: 'me', expiresAt: NOW + 30_000 });
    expect(seen[0]?.state).toBe('in_flight');
    await c.close();
  });

  it('the takeover write itself gives the new owner a full lease (now + leaseMs), not one that ends at once', async () => {
    const inner = memoryStore();
    await seeded(inner, 'other', NOW - 1);
    const writes: OperationRecord[] = [];
    const store: OnceStore = { ...inner, name: 'recording', compareAndSet: (id, g, next) => (writes.push(next), inner.compareAndSet(id, g, next)) };
    const p = provider();
    const c = client(store, p.fetch, [], { owner: 'me', leaseMs: 30_000 });
    await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } });
    expect(p.calls()).toBe(1);
    expect(writes[0]?.lease).toEqual({ owner: 'me', expiresAt: NOW + 30_000 });
    await c.close();
  });

  it('a new operation is claimed with its first attempt open (in_flight) under a full lease, before the send', async () => {
    const store = memoryStore();
    const { seen, fetch } = seenAtSend(store);
    const c = client(store, fetch, [], { owner: 'me', leaseMs: 30_000 });
    await c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref } });
    expect(seen[0]?.state).toBe('in_flight');
    expect(seen[0]?.attempts).toHaveLength(1);
    expect(seen[0]?.lease).toEqual({ owner: 'me', expiresAt: NOW + 30_000 });
    await c.close();
  });

  it('a call whose cancel signal is already aborted is recorded cancelled with no attempt, nothing sent', async () => {
    const store = memoryStore();
    const p = provider();
    const c = client(store, p.fetch, [], { owner: 'me' });
    const cancel = new AbortController();
    cancel.abort();
    await expect(c.fetch(URL_ORDERS, { ...post, once: { action: SCOPE.action, ref: SCOPE.ref, signal: cancel.signal } })).rejects.toThrow();
    expect(p.calls()).toBe(0);
    const rec = await store.get(recordId(SCOPE));
    expect(rec?.state).toBe('cancelled');
    expect(rec?.attempts).toHaveLength(0);
    await c.close();
  });
});

describe("a conflict's message names the part that differs", () => {
  it('methods that differ only in case are the same method: the body or Content-Type differs', () => {
    expect(differentPart({ method: 'post', url: 'https://a.test/x' }, { method: 'POST', url: 'https://a.test/x' })).toBe('a different body or Content-Type');
  });

  it('a stored query string (?…) is not a different URL: the body, Content-Type or query string differs', () => {
    expect(differentPart({ method: 'POST', url: 'https://a.test/x?…' }, { method: 'POST', url: 'https://a.test/x' })).toBe('a different body, Content-Type or query string');
  });

  it('different paths and methods are both named; no request line is a different payload', () => {
    expect(differentPart({ method: 'PUT', url: 'https://a.test/x' }, { method: 'POST', url: 'https://a.test/y' })).toBe('a different method and URL');
    expect(differentPart(null, { method: 'POST', url: 'https://a.test/x' })).toBe('a different payload');
  });
});
