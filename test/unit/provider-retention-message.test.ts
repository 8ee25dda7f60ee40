/**
 * Past 90 % of providerRetentionMs oncefetch no longer resends blind after an ambiguous outcome. The
 * AmbiguousOutcomeError said "the key is older than the provider retention" also when the key was not:
 * a user trial at 23 h of a 24 h retention (1 effect at a provider that dedupes keys for 24 h). The
 * message must give the key's age and the 90 % margin. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';

const H = 3_600_000;

it('a key 23 h old under providerRetentionMs 24 h: the refusal says it is past 90 % of the retention, not older than it', async () => {
  let t = Date.UTC(2026, 0, 1);
  let effects = 0;
  const fetch = (async () => {
    effects++; // the provider acts, then answers 500
    return new Response('oops', { status: 500 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, now: () => t, telemetry: false, providerDedupes: true, providerRetentionMs: 24 * H, retry: { maxAttempts: 1 } });
  const post = () => client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } });
  await expect(post()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
  t += 23 * H;
  const err = await post().catch((e: unknown) => e);
  expect(effects).toBe(1);
  expect(err).toBeInstanceOf(AmbiguousOutcomeError);
  const message = (err as Error).message;
  expect(message).not.toMatch(/older than the provider retention/);
  expect(message).toMatch(/the key is 23 h old, past 90 % of providerRetentionMs \(24 h\), after which the provider may no longer remember it/);
  await client.close();
});
