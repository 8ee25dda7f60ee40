/**
 * explain() for a client.fetch operation whose call gave its own lookup (`once.lookup`, as the
 * README's usage example does), which failed: the plan said "no lookup is registered for
 * 'create-order' … register a lookup", as if none had been asked. It says that the call's own
 * lookup was asked and could not settle it, and to call again with the same ref, payload and
 * lookup (found in a user trial: an agent feeding explain() to its model).
 */
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { AmbiguousOutcomeError } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
let client: OnceClient;

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
  client = sqliteClient(join(tmp.dir, 'once.db'), { settleMs: 0, retry: { baseDelayMs: 10, maxDelayMs: 50 } }).client;
});

afterEach(async () => {
  await client.close();
  await provider.close();
  tmp.cleanup();
});

it("names the call's own lookup that failed, not 'no lookup is registered'", async () => {
  provider.fault({ kind: 'error_after_commit', match: { ref: 'L-1' } });
  const lookup = () => Promise.reject(new Error('orders search is down'));
  await expect(client.fetch(`${provider.url}/orders`, { ...orderInit('L-1'), once: { action: 'create-order', ref: 'L-1', lookup } })).rejects.toBeInstanceOf(
    AmbiguousOutcomeError,
  );
  const x = await client.explain({ action: 'create-order', ref: 'L-1' });
  const plan = x?.plan.join('\n') ?? '';
  expect(plan).toMatch(/^Do not resend/);
  expect(plan).toMatch(/once\.lookup/);
  expect(plan).toMatch(/orders search is down/);
  expect(plan).not.toMatch(/new ref/);
  expect(x?.escalate).toBe(true);
  expect(provider.effectsFor('L-1')).toBe(1);
});

it('a call with no lookup at all keeps the plan that says none is registered', async () => {
  provider.fault({ kind: 'error_after_commit', match: { ref: 'L-2' } });
  await expect(client.fetch(`${provider.url}/orders`, { ...orderInit('L-2'), once: { action: 'create-order', ref: 'L-2' } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
  const plan = (await client.explain({ action: 'create-order', ref: 'L-2' }))?.plan.join('\n') ?? '';
  expect(plan).toMatch(/no lookup is registered for 'create-order'/);
  expect(plan).not.toMatch(/once\.lookup/);
});
