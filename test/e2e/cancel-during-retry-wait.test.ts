/**
 * `once.signal` aborted while the call waits before a retry (a 503's `Retry-After`, or the backoff):
 * nothing is on the wire then, so the cancel is recorded at once and the call rejects with
 * `OperationCancelledError`, instead of holding its caller for the rest of the wait (up to
 * `maxRetryAfterMs`, 60 s by default). An MCP host's request timeout sends `notifications/cancelled`,
 * which aborts the tool handler's signal: in a user trial the handler stayed busy for the whole
 * `Retry-After: 2` after the abort at 1 s, and only then recorded the cancel.
 *
 * Effects are counted at a loopback provider that does not dedupe.
 */
import { describe, expect, it } from 'vitest';
import { OperationCancelledError, createClient, memoryStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

describe('once.signal aborted during the wait before a retry', () => {
  for (const [how, fault, retry] of [
    ['a 503 Retry-After: 20', { kind: 'status_before_commit', status: 503, retryAfter: '20' }, {}],
    ['a 503 and a 20 s backoff', { kind: 'status_before_commit', status: 503 }, { baseDelayMs: 20_000, maxDelayMs: 20_000, jitter: 'none' }],
  ] as const) {
    it(`after ${how}: the call rejects at once with OperationCancelledError, the record is cancelled, 0 effects, and the ref stays cancelled`, async () => {
      const client = createClient({ store: memoryStore(), telemetry: false, retry: { deadlineMs: 60_000, ...retry } });
      cleanups.push(() => client.close({ waitMs: 0 }));
      provider.fault(fault);
      const ref = `C-${how}`;
      const cancel = new AbortController();
      const call = client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, signal: cancel.signal } });
      while (provider.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 50)); // the 503 answered, the wait begun
      cancel.abort(new Error('host timeout'));
      const ended = await timed(call, 3000);
      expect(ended.outcome).toBe('OperationCancelledError');
      expect((await client.get({ action: ACTION, ref }))?.state).toBe('cancelled');
      const again = await client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(again).toBeInstanceOf(OperationCancelledError);
      expect(provider.requests.length).toBe(1);
      expect(provider.effectsFor(ref)).toBe(0);
    });
  }
});
