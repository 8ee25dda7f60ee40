/**
 * The AmbiguousOutcomeError of a call that had no lookup to ask names the lookup it lacked. A
 * client.run() call said "no lookup registered for this action", but client.run() never asks a
 * registered lookup (createClient({ lookups })): a user who registered one, as the message said,
 * still got the error (found in a user trial, an agent's charge_card tool). Likewise a call whose
 * ref oncefetch minted, whose registered lookup is there but not asked.
 */
import { expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import { lookupByRef, orderInit, eachSqliteClient } from '../helpers/setup.js';

const env = eachSqliteClient((provider) => ({ lookups: { charge: lookupByRef(provider.url), 'create-order': lookupByRef(provider.url) } }));

async function ambiguous(p: Promise<unknown>): Promise<string> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AmbiguousOutcomeError);
  return (error as Error).message;
}

it('client.run() with no spec.lookup: says the spec has none, not that none is registered (one is)', async () => {
  env.provider.fault({ kind: 'error_after_commit', match: { ref: 'R-1' } });
  const message = await ambiguous(
    env.client.run({ action: 'charge', ref: 'R-1', payload: { amount: 1 } }, async ({ key, signal }) => {
      const r = await fetch(`${env.provider.url}/orders`, { ...orderInit('R-1'), headers: { 'content-type': 'application/json', 'idempotency-key': key }, signal });
      if (!r.ok) throw Object.assign(new Error(`HTTP ${r.status}`), { status: r.status });
      return r.json();
    }),
  );
  expect(message).not.toMatch(/no lookup registered/);
  expect(message).toMatch(/spec\.lookup/);
  expect(env.provider.effectsFor('R-1')).toBe(1);
});

it('a minted ref: says the registered lookup is not asked about it', async () => {
  env.provider.fault({ kind: 'error_after_commit' });
  const message = await ambiguous(env.client.fetch(`${env.provider.url}/orders`, { ...orderInit('M-1'), once: { action: 'create-order' } }));
  expect(message).not.toMatch(/no lookup registered/);
  expect(message).toMatch(/minted/);
  expect(env.provider.effects).toBe(1);
});

// An agent given this message (an MCP tool's error text) read "not resent. Reconcile it with a lookup or
// by hand" as nothing done, with nothing it could reconcile: the message must say the effect may exist
// and that the same intent must not go out under a new ref before a check (as explain's plan does).
it('no lookup at all, the answer dropped after the commit: says it may have taken effect, and not to send it under a new ref unchecked', async () => {
  env.provider.fault({ kind: 'drop_after_commit', match: { ref: 'N-1' } });
  const send = () => env.client.fetch(`${env.provider.url}/orders`, { ...orderInit('N-1'), once: { action: 'pay', ref: 'N-1' } });
  for (const message of [await ambiguous(send()), await ambiguous(send())]) {
    expect(message).toMatch(/may have taken effect/);
    expect(message).toMatch(/check at the provider before sending this intent under a new ref/);
  }
  expect(env.provider.effectsFor('N-1')).toBe(1);
});

// The same words where the attempts ran out on an unknown outcome (a provider that dedupes, no lookup): the
// error said "the last outcome … is ambiguous (status 500); not resent", nothing of an effect or of the ref.
it('providerDedupes, no lookup, the attempts used on 500s after the commit: says it may have taken effect, and to call again with the same ref', async () => {
  const client = createClient({ store: memoryStore(), telemetry: false, providerDedupes: true, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 } });
  try {
    env.provider.fault({ kind: 'error_after_commit', match: { ref: 'D-1' } });
    env.provider.fault({ kind: 'error_after_commit', match: { ref: 'D-1' } });
    const message = await ambiguous(client.fetch(`${env.provider.url}/orders`, { ...orderInit('D-1'), once: { action: 'pay', ref: 'D-1' } }));
    expect(message).toMatch(/2 attempts used/);
    expect(message).toMatch(/may have taken effect/);
    expect(message).toMatch(/same ref/);
    expect(env.provider.effectsFor('D-1')).toBe(1);
  } finally {
    await client.close();
  }
});
