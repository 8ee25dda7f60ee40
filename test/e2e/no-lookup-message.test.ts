/**
 * The AmbiguousOutcomeError of a call that had no lookup to ask names the lookup it lacked. A
 * client.run() call said "no lookup registered for this action", but client.run() never asks a
 * registered lookup (createClient({ lookups })): a user who registered one, as the message said,
 * still got the error (found in a user trial, an agent's charge_card tool). Likewise a call whose
 * ref oncefetch minted, whose registered lookup is there but not asked.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { AmbiguousOutcomeError } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
let client: OnceClient;

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
  client = sqliteClient(join(tmp.dir, 'once.db'), { lookups: { charge: lookupByRef(provider.url), 'create-order': lookupByRef(provider.url) } }).client;
});

afterEach(async () => {
  await client.close();
  await provider.close();
  tmp.cleanup();
});

async function ambiguous(p: Promise<unknown>): Promise<string> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AmbiguousOutcomeError);
  return (error as Error).message;
}

it('client.run() with no spec.lookup: says the spec has none, not that none is registered (one is)', async () => {
  provider.fault({ kind: 'error_after_commit', match: { ref: 'R-1' } });
  const message = await ambiguous(
    client.run({ action: 'charge', ref: 'R-1', payload: { amount: 1 } }, async ({ key, signal }) => {
      const r = await fetch(`${provider.url}/orders`, { ...orderInit('R-1'), headers: { 'content-type': 'application/json', 'idempotency-key': key }, signal });
      if (!r.ok) throw Object.assign(new Error(`HTTP ${r.status}`), { status: r.status });
      return r.json();
    }),
  );
  expect(message).not.toMatch(/no lookup registered/);
  expect(message).toMatch(/spec\.lookup/);
  expect(provider.effectsFor('R-1')).toBe(1);
});

it('a minted ref: says the registered lookup is not asked about it', async () => {
  provider.fault({ kind: 'error_after_commit' });
  const message = await ambiguous(client.fetch(`${provider.url}/orders`, { ...orderInit('M-1'), once: { action: 'create-order' } }));
  expect(message).not.toMatch(/no lookup registered/);
  expect(message).toMatch(/minted/);
  expect(provider.effects).toBe(1);
});
