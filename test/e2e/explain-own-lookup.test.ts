/**
 * explain() for a client.fetch operation whose call gave its own lookup (`once.lookup`, as the
 * README's usage example does), which failed: the plan said "no lookup is registered for
 * 'create-order' … register a lookup", as if none had been asked. It says that the call's own
 * lookup was asked and could not settle it, and to call again with the same ref, payload and
 * lookup (found in a user trial: an agent feeding explain() to its model).
 */
import { expect, it } from 'vitest';
import { AmbiguousOutcomeError } from '../../src/index.js';
import { orderInit, eachSqliteClient } from '../helpers/setup.js';

const env = eachSqliteClient(() => ({ settleMs: 0, retry: { baseDelayMs: 10, maxDelayMs: 50 } }));

it("names the call's own lookup that failed, not 'no lookup is registered'", async () => {
  env.provider.fault({ kind: 'error_after_commit', match: { ref: 'L-1' } });
  const lookup = () => Promise.reject(new Error('orders search is down'));
  await expect(env.client.fetch(`${env.provider.url}/orders`, { ...orderInit('L-1'), once: { action: 'create-order', ref: 'L-1', lookup } })).rejects.toBeInstanceOf(
    AmbiguousOutcomeError,
  );
  const x = await env.client.explain({ action: 'create-order', ref: 'L-1' });
  const plan = x?.plan.join('\n') ?? '';
  expect(plan).toMatch(/^Do not resend/);
  expect(plan).toMatch(/once\.lookup/);
  expect(plan).toMatch(/orders search is down/);
  expect(plan).not.toMatch(/new ref/);
  expect(x?.escalate).toBe(true);
  expect(env.provider.effectsFor('L-1')).toBe(1);
});

it('a call with no lookup at all keeps the plan that says none is registered', async () => {
  env.provider.fault({ kind: 'error_after_commit', match: { ref: 'L-2' } });
  await expect(env.client.fetch(`${env.provider.url}/orders`, { ...orderInit('L-2'), once: { action: 'create-order', ref: 'L-2' } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
  const plan = (await env.client.explain({ action: 'create-order', ref: 'L-2' }))?.plan.join('\n') ?? '';
  expect(plan).toMatch(/no lookup is registered for 'create-order'/);
  expect(plan).not.toMatch(/once\.lookup/);
});
