/**
 * stripe-node inside `client.run()`: oncefetch mints the key once, stores it
 * before the first attempt and hands it to Stripe as `idempotencyKey`; Stripe
 * replays the first result for a key it has seen, so a retry after an unknown
 * outcome cannot charge twice.
 *
 * Run: npx tsx examples/stripe-run.ts
 * Without STRIPE_API_BASE (e.g. http://127.0.0.1:12111) it starts a loopback
 * fake of the API that creates the payment intent and then answers 500, once.
 */
import Stripe from 'stripe';
import { createClient, memoryStore } from '../src/index.js';
import { startFakeStripe } from '../test/helpers/fake-stripe.js';

const fake = process.env.STRIPE_API_BASE === undefined ? await startFakeStripe() : undefined;
fake?.fault('error_after_commit');
const api = new URL(process.env.STRIPE_API_BASE ?? `http://${fake?.host}:${fake?.port}`);

const stripe = new Stripe(process.env.STRIPE_SECRET_KEY ?? 'sk_test_loopback', {
  host: api.hostname,
  port: Number(api.port),
  protocol: api.protocol === 'http:' ? 'http' : 'https',
  maxNetworkRetries: 0, // oncefetch retries, always with the same key
});

const once = createClient({
  tenant: 'shop',
  store: memoryStore(), // the default SQLite store keeps operations across restarts
  providerDedupes: true, // Stripe replays the stored result of a key for 24 hours
  retry: { baseDelayMs: 50 },
});

const order = { id: 'A-17', amount: 500, currency: 'eur' };
const charge = () =>
  once.run(
    { action: 'charge', ref: order.id, payload: { amount: order.amount, currency: order.currency } },
    ({ key }) =>
      stripe.paymentIntents.create(
        { amount: order.amount, currency: order.currency, metadata: { order: order.id } },
        { idempotencyKey: key },
      ),
  );

const intent = await charge();
const again = await charge(); // the same operation: answered from the store, no request
console.log(`payment intent ${intent.id} for ${intent.amount} ${intent.currency}; second call: ${again.id}`);
const { attempts, replays, ambiguous } = once.stats();
console.log(`oncefetch: attempts=${attempts} ambiguous=${ambiguous} replays=${replays}`);
if (fake !== undefined) {
  console.log(`payment intents created at the provider: ${fake.effects}`);
  await fake.close();
}
await once.close();
