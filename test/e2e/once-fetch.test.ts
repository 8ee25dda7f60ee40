/**
 * The once-only promise end to end: the public API against the real loopback
 * provider with injected faults, on a real SQLite file. Effects are counted at
 * the provider, not HTTP successes.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, IdempotencyConflictError, REPLAYED_HEADER, isOnceError } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const clients: OnceClient[] = [];

function client(options: Parameters<typeof sqliteClient>[1] = {}) {
  const made = sqliteClient(join(tmp.dir, 'once.db'), { retry: { baseDelayMs: 20, maxDelayMs: 100, ...options.retry }, ...options });
  clients.push(made.client);
  return made;
}

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider.close();
  tmp.cleanup();
});

describe('client.fetch against the loopback provider', () => {
  it('ten concurrent calls of one operation through injected timeouts create one order, and all ten get it', async () => {
    provider.fault({ kind: 'delay_after_commit', delayMs: 600 });
    const lookup = lookupByRef(provider.url);
    const a = client({ retry: { attemptTimeoutMs: 150 }, lookups: { 'create-order': lookup } });
    const b = client({ retry: { attemptTimeoutMs: 150 }, lookups: { 'create-order': lookup } });
    const calls = Array.from({ length: 10 }, (_, i) =>
      (i % 2 === 0 ? a : b).client.fetch(`${provider.url}/orders`, { ...orderInit('T-1'), once: { action: 'create-order', ref: 'T-1' } }),
    );
    const responses = await Promise.all(calls);
    const orders = await Promise.all(responses.map((r) => r.json() as Promise<{ id: string }>));
    expect(provider.effects).toBe(1);
    expect(provider.effectsFor('T-1')).toBe(1);
    expect(new Set(orders.map((o) => o.id))).toEqual(new Set([provider.orders[0]?.id]));
    // every request the provider saw carried the one key
    expect(new Set(provider.requests.map((r) => r.key)).size).toBe(1);
    const record = await a.client.get({ action: 'create-order', ref: 'T-1' });
    expect(record?.state).toBe('succeeded');
    expect(record?.attempts[0]?.class).toBe('ambiguous');
  });

  it('rejects the same ref with a changed payload before any request leaves', async () => {
    const { client: c } = client();
    const first = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-2'), once: { action: 'create-order', ref: 'T-2' } });
    expect(first.status).toBe(201);
    const sent = provider.requests.length;
    const err = await c
      .fetch(`${provider.url}/orders`, { ...orderInit('T-2', { qty: 2 }), once: { action: 'create-order', ref: 'T-2' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyConflictError);
    expect(isOnceError(err) && err.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(provider.requests.length).toBe(sent);
    expect(provider.effects).toBe(1);
  });

  it('reconciles an ambiguous drop by lookup before any new attempt, even when the provider ignores keys', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'drop_after_commit' });
    const { client: c, events } = client();
    const res = await c.fetch(`${provider.url}/orders`, {
      ...orderInit('T-3'),
      once: { action: 'create-order', ref: 'T-3', lookup: lookupByRef(provider.url) },
    });
    expect(res.status).toBe(200); // the lookup's answer stands in for the lost 201
    expect(((await res.json()) as { ref: string }).ref).toBe('T-3');
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
    expect(provider.lookups).toBe(1);
    const kinds = events.map((e) => e.type);
    expect(kinds.indexOf('lookup')).toBeGreaterThan(kinds.indexOf('attempt_finished'));
    expect(kinds.filter((k) => k === 'attempt_started')).toHaveLength(1);
  });

  it('resends with the same key when the lookup says absent, once the attempt can no longer take effect', async () => {
    provider.fault({ kind: 'reset_before_commit' });
    const { client: c } = client({ settleMs: 300 });
    const res = await c.fetch(`${provider.url}/orders`, {
      ...orderInit('T-4'),
      once: { action: 'create-order', ref: 'T-4', lookup: lookupByRef(provider.url) },
    });
    expect(res.status).toBe(201);
    expect(provider.requests.length).toBe(2);
    expect(provider.requests[0]?.key).toBe(provider.requests[1]?.key);
    // settleMs counts from the start of the ambiguous attempt, as recorded
    const attempts = (await c.get({ action: 'create-order', ref: 'T-4' }))!.attempts;
    expect(attempts[1]!.startedAt - attempts[0]!.startedAt).toBeGreaterThanOrEqual(300);
    expect(provider.effects).toBe(1);
  });

  it('does not trust an early "absent" while the provider may still be processing (provider ignores keys)', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'delay_before_commit', delayMs: 500 });
    const { client: c } = client({ settleMs: 1500, retry: { attemptTimeoutMs: 100 } });
    const res = await c.fetch(`${provider.url}/orders`, {
      ...orderInit('T-4b'),
      once: { action: 'create-order', ref: 'T-4b', lookup: lookupByRef(provider.url) },
    });
    expect(res.status).toBe(200); // found by the second lookup, after the held request committed
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
    expect(provider.lookups).toBe(2);
  });

  it('a ref minted for the call (no once.ref, no key header) is not looked up by the registered lookup, which could only answer "absent"; a lookup given with the call is asked', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'error_after_commit' });
    const { client: c } = client({ settleMs: 0, lookups: { 'create-order': lookupByRef(provider.url) } });
    const err = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-5m'), once: { action: 'create-order' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousOutcomeError);
    expect(provider.lookups).toBe(0);
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
    // the call's own lookup is its caller's choice (one by key, say): asked
    provider.fault({ kind: 'error_after_commit' });
    const byKey = async (): Promise<Response | null> => {
      await fetch(`${provider.url}/orders?ref=nobody`); // counted as a lookup by the provider
      return Response.json({ found: 'by key' });
    };
    const res = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-5n'), once: { action: 'create-order', lookup: byKey } });
    expect(await res.json()).toEqual({ found: 'by key' });
    expect(provider.lookups).toBe(1);
    expect(provider.effects).toBe(2);
    expect(provider.requests.length).toBe(2);
  });

  it('a minted ref given again (once.ref, read from the error) is still not looked up by the registered lookup', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'error_after_commit' });
    const { client: c } = client({ settleMs: 0, lookups: { 'create-order': lookupByRef(provider.url) } });
    const first = (await c.fetch(`${provider.url}/orders`, { ...orderInit('T-5p'), once: { action: 'create-order' } }).catch((e: unknown) => e)) as AmbiguousOutcomeError;
    expect(first).toBeInstanceOf(AmbiguousOutcomeError);
    const ref = first.scope?.ref ?? 'missing';
    expect(ref).not.toBe('missing');
    const again = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-5p'), once: { action: 'create-order', ref } }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(AmbiguousOutcomeError);
    expect(provider.lookups).toBe(0);
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
    // one rule for the fresh call and the ref given again: no lookup asked, none recorded (not a lookup "unknown")
    const rec = await c.get({ action: 'create-order', ref });
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.evidence.filter((e) => e.kind === 'lookup')).toEqual([]);
  });

  it('without a lookup, an ambiguous outcome against a provider that ignores keys is reported, never resent', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'error_after_commit' });
    const { client: c } = client();
    const err = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-5'), once: { action: 'create-order', ref: 'T-5' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousOutcomeError);
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
    expect((await c.get({ action: 'create-order', ref: 'T-5' }))?.state).toBe('ambiguous');
    // calling again does not resend either
    await expect(c.fetch(`${provider.url}/orders`, { ...orderInit('T-5'), once: { action: 'create-order', ref: 'T-5' } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(provider.requests.length).toBe(1);
  });

  it('three joined callers of an ambiguous 500: each gets the 500 as its cause and can read its body', async () => {
    provider.fault({ kind: 'error_after_commit' });
    const { client: c } = client();
    const call = () => c.fetch(`${provider.url}/orders`, { ...orderInit('T-5b'), once: { action: 'create-order', ref: 'T-5b' } }).catch((e: unknown) => e);
    const errors = await Promise.all([call(), call(), call()]);
    expect(provider.requests.length).toBe(1); // one execution, joined by the other two
    for (const err of errors) {
      expect(err).toBeInstanceOf(AmbiguousOutcomeError);
      const cause = (err as Error).cause as Response;
      expect(cause.status).toBe(500);
      expect(await cause.text()).toContain('error');
    }
  });

  it('with providerDedupes, an unresolved ambiguity is resent with the same key and replayed by the provider', async () => {
    provider.fault({ kind: 'error_after_commit' });
    const { client: c } = client({ providerDedupes: true });
    const res = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-6'), once: { action: 'create-order', ref: 'T-6' } });
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
    expect(provider.requests.length).toBe(2);
    expect(provider.requests[0]?.key).toBe(provider.requests[1]?.key);
    expect(provider.effects).toBe(1);
  });

  it('sends a 400 exactly once, returns it, and replays it without the network', async () => {
    provider.fault({ kind: 'status_before_commit', status: 400 });
    const { client: c } = client();
    const res = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-7'), once: { action: 'create-order', ref: 'T-7' } });
    expect(res.status).toBe(400);
    expect(provider.requests.length).toBe(1);
    const again = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-7'), once: { action: 'create-order', ref: 'T-7' } });
    expect(again.status).toBe(400);
    expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(0);
  });

  it('honours Retry-After: 1 — the next attempt comes at least one second later', async () => {
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '1' });
    const { client: c, events } = client();
    const res = await c.fetch(`${provider.url}/orders`, { ...orderInit('T-8'), once: { action: 'create-order', ref: 'T-8' } });
    expect(res.status).toBe(201);
    const [first, second] = provider.requests;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000);
    expect(events).toContainEqual(expect.objectContaining({ type: 'retry_scheduled', delayMs: 1000, source: 'retry-after' }));
    expect(provider.effects).toBe(1);
  });

  it('replays a succeeded operation after a restart without touching the network', async () => {
    const path = join(tmp.dir, 'restart.db');
    const first = sqliteClient(path);
    const res = await first.client.fetch(`${provider.url}/orders`, { ...orderInit('T-9'), once: { action: 'create-order', ref: 'T-9' } });
    const order = (await res.json()) as { id: string };
    await first.client.close();
    const second = sqliteClient(path);
    clients.push(second.client);
    const again = await second.client.fetch(`${provider.url}/orders`, { ...orderInit('T-9'), once: { action: 'create-order', ref: 'T-9' } });
    expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(((await again.json()) as { id: string }).id).toBe(order.id);
    expect(provider.requests.length).toBe(1);
    expect(provider.effects).toBe(1);
  });

  it("adopts the caller's Idempotency-Key header as the key and the ref", async () => {
    const { client: c } = client();
    const init = orderInit('T-10');
    const headers = { ...(init.headers as Record<string, string>), 'Idempotency-Key': 'caller-key-1' };
    await c.fetch(`${provider.url}/orders`, { ...init, headers });
    await c.fetch(`${provider.url}/orders`, { ...init, headers });
    expect(provider.requests.map((r) => r.key)).toEqual(['caller-key-1']);
    const record = await c.get({ action: `POST ${provider.url}/orders`, ref: 'caller-key-1' });
    expect(record?.key).toBe('caller-key-1');
    expect(record?.keySource).toBe('caller');
  });

  it('passes GET through untouched and persists nothing for it', async () => {
    const { client: c, events } = client();
    const res = await c.fetch(`${provider.url}/orders?ref=none`);
    expect(res.status).toBe(404);
    expect(events).toHaveLength(0);
    expect(await c.store.list()).toHaveLength(0);
  });
});
