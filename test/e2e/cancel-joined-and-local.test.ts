/**
 * Cancels that reach a call running in the same client:
 *
 * - (C) `client.cancel(scope)` while the owner's call of this client waits before a retry (a
 *   `Retry-After`, the backoff): the wait ends at once, as the call's own `once.signal` ends it, and the
 *   call ends as it would have after the wait. Before, it waited out the whole `Retry-After`.
 *
 * Effects are counted at a loopback provider that does not dedupe: a second send is a second effect.
 */
import { describe, expect, it } from 'vitest';
import { OperationCancelledError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit, until, wait } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

function client(options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store: memoryStore(), telemetry: false, ...options, retry: { deadlineMs: 60_000, budget: false, ...options.retry } });
  cleanups.push(() => c.close({ waitMs: 0 }));
  return c;
}

function post(c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(signal === undefined ? {} : { signal }) } });
}

describe('(C) client.cancel(scope) while the call of this client waits before a retry', () => {
  for (const [how, fault, retry] of [
    ['a 503 Retry-After: 30', { kind: 'status_before_commit', status: 503, retryAfter: '30' }, {}],
    ['a 503 and a 30 s backoff', { kind: 'status_before_commit', status: 503 }, { baseDelayMs: 30_000, maxDelayMs: 30_000, jitter: 'none' }],
  ] as const) {
    it(`after ${how}: the call ends at once with OperationCancelledError, cancel() says cancelled; 1 request, 0 effects`, async () => {
      const c = client({ retry });
      const ref = `L-${how}`;
      provider.fault(fault);
      const call = timed(post(c, ref), 3_000);
      await until(() => provider.requests.length === 1);
      await wait(50); // the 503 answered, the wait begun
      const started = performance.now();
      const result = await c.cancel({ action: ACTION, ref }, { waitMs: 5_000 });
      const cancelMs = performance.now() - started;
      const ended = await call;
      console.log(`client.cancel during ${how}: cancel() returned in ${Math.round(cancelMs)} ms, the call ended ${ended.ms} ms after it started`);
      expect(ended.outcome).toBe('OperationCancelledError');
      expect(ended.ms).toBeLessThan(1_000);
      expect(cancelMs).toBeLessThan(1_000);
      expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
      await expect(post(c, ref)).rejects.toBeInstanceOf(OperationCancelledError);
      expect(provider.requests.length).toBe(1);
      expect(provider.effectsFor(ref)).toBe(0);
    });
  }
});
