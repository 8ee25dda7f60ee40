/**
 * An IdempotencyConflictError's message says whether the earlier payload's operation took (or may
 * have taken) effect. An agent that feeds the message back to its LLM as a tool result must not be
 * told only "nothing was sent. Use a new ref for a new intent" when the same intent, with its
 * arguments re-worded, already placed the order: a new ref would place it twice (found in a user
 * trial: an agent replaying a tool call under the same ref with regenerated arguments).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, IdempotencyConflictError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import { orderInit, eachSqliteClient } from '../helpers/setup.js';

const env = eachSqliteClient(() => ({ retry: { baseDelayMs: 10, maxDelayMs: 50, attemptTimeoutMs: 300 } }));

const order = (ref: string, qty: number) => env.client.fetch(`${env.provider.url}/orders`, { ...orderInit(ref, { qty }), once: { action: 'create-order', ref } });

async function conflictOf(p: Promise<unknown>): Promise<IdempotencyConflictError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(IdempotencyConflictError);
  return error as IdempotencyConflictError;
}

describe('IdempotencyConflictError says what the earlier payload did', () => {
  it('after a success: it took effect, and the same intent must not go under a new ref', async () => {
    expect((await order('A-1', 1)).status).toBe(201);
    const e = await conflictOf(order('A-1', 2));
    expect(e.message).toMatch(/nothing was sent/);
    expect(e.message).toMatch(/took effect/);
    expect(e.message).toMatch(/do not send it under a new ref/);
    expect(env.provider.effectsFor('A-1')).toBe(1);
  });

  it('after an ambiguous outcome (client.run): it may have taken effect', async () => {
    env.provider.fault({ kind: 'error_after_commit', match: { ref: 'A-2' } });
    const effect = async ({ key, signal }: { key: string; signal: AbortSignal }) => {
      const r = await fetch(`${env.provider.url}/orders`, { ...orderInit('A-2'), headers: { 'content-type': 'application/json', 'idempotency-key': key }, signal });
      if (!r.ok) throw Object.assign(new Error(`HTTP ${r.status}`), { status: r.status });
      return r.json();
    };
    await expect(env.client.run({ action: 'charge', ref: 'A-2', payload: { amount: 1 } }, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const e = await conflictOf(env.client.run({ action: 'charge', ref: 'A-2', payload: { amount: 2 } }, effect));
    expect(e.message).toMatch(/may have taken effect/);
    expect(e.message).toMatch(/do not send it under a new ref/);
    expect(env.provider.effectsFor('A-2')).toBe(1);
  });

  it('against a concurrent call still running: it may take effect', async () => {
    env.provider.fault({ kind: 'delay_after_commit', delayMs: 150, match: { ref: 'A-3' } });
    const first = order('A-3', 1);
    await new Promise((r) => setTimeout(r, 30));
    const e = await conflictOf(order('A-3', 2));
    expect(e.message).toMatch(/may take effect/);
    expect(e.message).toMatch(/do not send it under a new ref/);
    expect((await first).status).toBe(201);
    expect(env.provider.effectsFor('A-3')).toBe(1);
  });

  it('after a refusal (terminal 4xx, no effect): a new ref, as before', async () => {
    env.provider.fault({ kind: 'status_before_commit', status: 422, match: { ref: 'A-4' } });
    expect((await order('A-4', 1)).status).toBe(422);
    const e = await conflictOf(order('A-4', 2));
    expect(e.message).toMatch(/Use a new ref for a new intent\.$/);
    expect(e.message).not.toMatch(/effect/);
    expect(env.provider.effectsFor('A-4')).toBe(0);
  });
});

/**
 * Two workers of a job queue on one store (two clients, two owners): a redelivered message whose payload
 * changed (a producer bug) meets a record that is `pending`, not `ambiguous` or `in_flight`. Found in a
 * user trial with BullMQ: the conflict said only "nothing was sent. Use a new ref for a new intent", while
 * the earlier payload had already created the order (an attempt taken over from a SIGKILLed worker, cleared
 * for a same-key resend by the provider's dedupe, then out of attempts) or was about to (another worker
 * waiting out a 429): a dead-lettered job re-published under a new ref would make a second order.
 */
describe('IdempotencyConflictError on a pending record of another client', () => {
  const opened: { close: () => Promise<void> }[] = [];
  afterEach(async () => {
    for (const c of opened.splice(0).reverse()) await c.close();
  });
  const setup = async (extra: Parameters<typeof createClient>[0] = {}) => {
    const provider = await startProvider();
    const store = memoryStore();
    const retry = { baseDelayMs: 10, maxDelayMs: 50, attemptTimeoutMs: 300 };
    const a = createClient({ store, retry, ...extra });
    const b = createClient({ store, retry });
    opened.push(provider, a, b);
    const send = (c: typeof a, ref: string, qty: number) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref, { qty }), once: { action: 'create-order', ref } });
    return { provider, a, b, send };
  };

  it('another worker waits out a 429 (its lease live): the earlier payload may take effect', async () => {
    const { provider, a, b, send } = await setup({ retry: { baseDelayMs: 10, maxDelayMs: 50, attemptTimeoutMs: 300, maxRetryAfterMs: 5_000 } });
    provider.fault({ kind: 'status_before_commit', status: 429, retryAfter: '1', match: { ref: 'P-1' } });
    const first = send(a, 'P-1', 1);
    await new Promise((r) => setTimeout(r, 200));
    expect((await a.get({ action: 'create-order', ref: 'P-1' }))?.state).toBe('pending');
    const e = await conflictOf(send(b, 'P-1', 2));
    expect(e.message).toMatch(/may take effect/);
    expect(e.message).toMatch(/do not send it under a new ref/);
    expect((await first).status).toBe(201);
    expect(provider.effectsFor('P-1')).toBe(1);
  });

  it('pending after a dedupe-cleared resend ran out of attempts: the earlier payload may have taken effect', async () => {
    const { provider, b, a, send } = await setup({ providerDedupes: true, retry: { baseDelayMs: 10, maxDelayMs: 50, attemptTimeoutMs: 300, maxAttempts: 2 } });
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref: 'P-2' } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'P-2' } });
    const exhausted = await send(a, 'P-2', 1).catch((e: unknown) => e);
    expect(exhausted).toBeInstanceOf(RetriesExhaustedError);
    // a dead-letter handler reads this message: not "resumable" alone, as if nothing had happened
    expect((exhausted as Error).message).toMatch(/an earlier attempt may have taken effect/);
    expect((await a.get({ action: 'create-order', ref: 'P-2' }))?.state).toBe('pending');
    expect(provider.effectsFor('P-2')).toBe(1);
    const e = await conflictOf(send(b, 'P-2', 2));
    expect(e.message).toMatch(/may have taken effect/);
    expect(e.message).toMatch(/do not send it under a new ref/);
    expect(provider.effectsFor('P-2')).toBe(1);
  });

  it('pending after a 503 only (nothing can have taken effect, no call running): a new ref, as before', async () => {
    const { provider, b, a, send } = await setup({ retry: { baseDelayMs: 10, maxDelayMs: 50, attemptTimeoutMs: 300, maxAttempts: 1 } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'P-3' } });
    const exhausted = await send(a, 'P-3', 1).catch((e: unknown) => e);
    expect(exhausted).toBeInstanceOf(RetriesExhaustedError);
    expect((exhausted as Error).message).toMatch(/the record stays resumable$/);
    const e = await conflictOf(send(b, 'P-3', 2));
    expect(e.message).toMatch(/Use a new ref for a new intent\.$/);
    expect(e.message).not.toMatch(/effect/);
    expect(provider.effectsFor('P-3')).toBe(0);
  });
});

/**
 * The provider reports the key reused with other content on this record's first attempt: the key came
 * from elsewhere (a caller-supplied key another client or store already sent, a key given to two
 * intents). That earlier request is the provider's, not ours, and may have charged: a payments trial got
 * only "provider reported key reuse: idempotency key mismatch", which says neither that nor what to do.
 */
describe('IdempotencyConflictError reported by the provider on the first attempt', () => {
  it('says this request was not processed, that the earlier request under the key may have taken effect, and to check before a new ref', async () => {
    const provider = await startProvider();
    const a = createClient({ store: memoryStore() });
    const b = createClient({ store: memoryStore() });
    try {
      const send = (c: typeof a, qty: number) => {
        const init = orderInit('K-1', { qty });
        return c.fetch(`${provider.url}/orders`, { ...init, headers: { 'content-type': 'application/json', 'idempotency-key': 'shared-key-1' }, once: { action: 'create-order', ref: 'K-1' } });
      };
      expect((await send(a, 1)).status).toBe(201);
      const e = await conflictOf(send(b, 2));
      expect(e.message).toMatch(/^provider reported key reuse/);
      expect(e.message).toMatch(/not processed/);
      expect(e.message).toMatch(/earlier request under this key.*may have taken effect/);
      expect(e.message).toMatch(/check at the provider before sending it under a new ref/);
      // the replay says the same
      const again = await conflictOf(send(b, 2));
      expect(again.message).toBe(e.message);
      // so does explain's plan: no bare "send it with a new ref"
      const x = await b.explain({ action: 'create-order', ref: 'K-1' });
      expect(x?.diagnosis.code).toBe('payload_changed');
      expect(x?.plan.join(' ')).toMatch(/earlier request.*may have taken effect: check at the provider before sending this intent under a new ref/);
      expect(provider.effectsFor('K-1')).toBe(1);
    } finally {
      await a.close();
      await b.close();
      await provider.close();
    }
  });
});
