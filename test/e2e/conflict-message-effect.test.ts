/**
 * An IdempotencyConflictError's message says whether the earlier payload's operation took (or may
 * have taken) effect. An agent that feeds the message back to its LLM as a tool result must not be
 * told only "nothing was sent. Use a new ref for a new intent" when the same intent, with its
 * arguments re-worded, already placed the order: a new ref would place it twice (found in a user
 * trial: an agent replaying a tool call under the same ref with regenerated arguments).
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, IdempotencyConflictError } from '../../src/index.js';
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
