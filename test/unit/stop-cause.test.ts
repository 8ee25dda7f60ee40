/**
 * The `cause` of the errors a call stops with before its attempts run out: a wait the deadline
 * cannot hold (`DeadlineExceededError`) and a `Retry-After` over `maxRetryAfterMs`
 * (`RetriesExhaustedError`) carry what the last attempt threw, as running out of attempts does
 * (test/unit/fetch-error-hints.test.ts); a response is no thrown error, so none then.
 * Regression: both stops had no `cause`, so a `client.run` stopped by an SDK's RateLimitError (its
 * `retry-after` header past the deadline) lost that error, and a refused connection whose backoff
 * would pass the deadline said nothing of the refusal.
 */
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';

const url = 'https://api.example.test/orders';

/** The error a call rejects with (a test expecting a rejection that does not come fails here). */
async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e as Error,
  );
}

function client(fetch: typeof globalThis.fetch, retry: NonNullable<OnceClientOptions['retry']>) {
  return createClient({ store: memoryStore(), fetch, random: () => 0.5, retry: { budget: false, ...retry } });
}

/** An SDK's error for a 429 with a `retry-after` header, as openai-node and stripe-node throw. */
const rateLimited = (seconds: number): Error => Object.assign(new Error('429 Rate limit reached'), { status: 429, headers: { 'retry-after': String(seconds) } });

describe('client.fetch', () => {
  it("a refused connection whose backoff would pass the deadline: DeadlineExceededError whose cause is the attempt's error", async () => {
    const thrown: Error[] = [];
    const fetch = (async () => {
      const error = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
      thrown.push(error);
      throw error;
    }) as typeof globalThis.fetch;
    // backoff 5000 ms (no jitter) with a 1000 ms deadline: stops at once after attempt 1
    const c = client(fetch, { deadlineMs: 1000, attemptTimeoutMs: 100, baseDelayMs: 5000, maxDelayMs: 5000, jitter: 'none' });
    const error = await rejection(c.fetch(url, { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'o-1' } }));
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(error.message).toMatch(/^waiting 5000 ms would leave under 100 ms of the deadline of operation default\/create-order\/o-1/);
    expect(thrown).toHaveLength(1);
    expect(error.cause).toBe(thrown[0]);
    await c.close();
  });
});

describe('client.run', () => {
  it("a Retry-After past the deadline: DeadlineExceededError whose cause is the effect's error", async () => {
    const thrown: Error[] = [];
    const c = client(globalThis.fetch, { deadlineMs: 1000 });
    const error = await rejection(
      c.run({ action: 'charge', ref: 'o-1' }, async () => {
        thrown.push(rateLimited(5));
        throw thrown.at(-1);
      }),
    );
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(error).toMatchObject({ retryAfterMs: 5000, attempts: 1 });
    expect(thrown).toHaveLength(1);
    expect(error.cause).toBe(thrown[0]);
    await c.close();
  });

  it("a Retry-After over maxRetryAfterMs: RetriesExhaustedError whose cause is the effect's error", async () => {
    const thrown: Error[] = [];
    const c = client(globalThis.fetch, { maxRetryAfterMs: 1000 });
    const error = await rejection(
      c.run({ action: 'charge', ref: 'o-2' }, async () => {
        thrown.push(rateLimited(120));
        throw thrown.at(-1);
      }),
    );
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(error).toMatchObject({ retryAfterMs: 120_000, attempts: 1 });
    expect(error.cause).toBe(thrown[0]);
    await c.close();
  });

  it("attempts used up: RetriesExhaustedError whose cause is the last effect's error (as client.fetch's transport error)", async () => {
    const thrown: Error[] = [];
    const c = client(globalThis.fetch, { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 });
    const error = await rejection(
      c.run({ action: 'charge', ref: 'o-3' }, async () => {
        thrown.push(Object.assign(new Error('503 Service Unavailable'), { status: 503 }));
        throw thrown.at(-1);
      }),
    );
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(thrown).toHaveLength(3);
    expect(error.cause).toBe(thrown[2]);
    await c.close();
  });
});
