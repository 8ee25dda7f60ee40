/**
 * stripe-node inside `client.run()`, our key as its `idempotencyKey`, against a
 * loopback fake that honours keys like Stripe: exactly one payment intent.
 */
import Stripe from 'stripe';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IdempotencyConflictError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startFakeStripe } from '../helpers/fake-stripe.js';
import type { FakeStripe } from '../helpers/fake-stripe.js';

describe('stripe-node inside client.run()', () => {
  let fake: FakeStripe;
  let stripe: Stripe;
  let once: OnceClient;
  beforeEach(async () => {
    fake = await startFakeStripe();
    stripe = new Stripe('sk_test_loopback', { host: fake.host, port: fake.port, protocol: 'http', maxNetworkRetries: 0 });
    once = createClient({ store: memoryStore(), providerDedupes: true, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
  });
  afterEach(async () => {
    await once.close();
    await fake.close();
  });

  const charge = (amount: number) =>
    once.run({ action: 'charge', ref: 'A-17', payload: { amount, currency: 'eur' } }, ({ key }) =>
      stripe.paymentIntents.create({ amount, currency: 'eur' }, { idempotencyKey: key }),
    );

  // A 500 is ambiguous: oncefetch resends with the same key. A closed connection is retried once
  // by stripe-node itself even with maxNetworkRetries: 0, inside our attempt, with our key.
  it.each([
    { fault: 'error_after_commit', attempts: 2, ambiguous: 1 },
    { fault: 'drop_after_commit', attempts: 1, ambiguous: 0 },
  ] as const)('$fault: the retry carries the same key and is replayed', async ({ fault, attempts, ambiguous }) => {
    fake.fault(fault);
    const intent = await charge(500);
    expect(intent).toMatchObject({ id: 'pi_000001', amount: 500 });
    expect(fake.effects).toBe(1);
    expect(fake.replays).toBe(1);
    expect(new Set(fake.keys).size).toBe(1);
    expect(fake.keys).toHaveLength(2);
    expect(once.stats()).toMatchObject({ attempts, ambiguous, operationsExecuted: 1, attemptsPerOperation: attempts });
  });

  it('a second run of the operation is answered from the store', async () => {
    await charge(500);
    const again = await charge(500);
    expect(again.id).toBe('pi_000001');
    expect(fake.keys).toHaveLength(1);
    expect(once.stats().replays).toBe(1);
  });

  it('the same ref with another amount is a conflict before any request', async () => {
    await charge(500);
    await expect(charge(700)).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(fake.keys).toHaveLength(1);
    expect(once.stats().conflicts).toBe(1);
  });

  it("Stripe's idempotency_error inside client.run() is a conflict, never retried", async () => {
    await stripe.paymentIntents.create({ amount: 500, currency: 'eur' }, { idempotencyKey: 'k-reused' });
    const err = await once
      .run({ action: 'charge', ref: 'B-1', key: 'k-reused', payload: { amount: 700 } }, ({ key }) =>
        stripe.paymentIntents.create({ amount: 700, currency: 'eur' }, { idempotencyKey: key }),
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyConflictError);
    expect(fake.keys).toEqual(['k-reused', 'k-reused']);
    expect(fake.effects).toBe(1);
    expect((await once.get({ action: 'charge', ref: 'B-1' }))?.state).toBe('failed');
  });

  it('the fake answers a reused key with other parameters like Stripe: idempotency_error', async () => {
    await stripe.paymentIntents.create({ amount: 500, currency: 'eur' }, { idempotencyKey: 'k-1' });
    await expect(stripe.paymentIntents.create({ amount: 700, currency: 'eur' }, { idempotencyKey: 'k-1' })).rejects.toMatchObject({
      type: 'StripeIdempotencyError',
      statusCode: 400,
    });
    expect(fake.effects).toBe(1);
  });
});
