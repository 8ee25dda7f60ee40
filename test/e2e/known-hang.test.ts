/**
 * `known()` (Engine): a write only this process can make (an attempt never sent, closed as such; a
 * success the call holds, kept as evidence) is tried again as an answer in hand is (`settle`) when
 * the store fails it. Those tries go on in the background; the call itself still ends at its
 * deadline, or at its caller's abort with that reason. Regression: a retry the store never answered
 * held the call past both, for as long as the write hung.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A store on which the call's cancel comes during its claim (which opens attempt 1, nothing sent), so
 * that the call's next write is the never_sent close of that attempt: it fails (a blip), and the try
 * after it hangs until the test ends.
 */
function hangingStore(cancel: AbortController): OnceStore {
  const inner = memoryStore();
  let writes = 0;
  let release!: () => void;
  const hang = new Promise<void>((r) => (release = r));
  cleanups.push(release);
  return {
    name: 'hanging',
    claim: (record) => {
      cancel.abort();
      return inner.claim(record);
    },
    compareAndSet: async (id, expected, next) => {
      writes++;
      if (writes === 1) throw new StoreError('hanging: a blip (not applied)');
      if (writes === 2) await hang;
      return inner.compareAndSet(id, expected, next);
    },
    get: (id) => inner.get(id),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
}

function call(client: OnceClient, cancel: AbortController, signal?: AbortSignal): Promise<{ value: unknown; ms: number }> {
  const started = Date.now();
  const settled = client
    .fetch('http://127.0.0.1:9/orders', { method: 'POST', body: '{}', ...(signal && { signal }), once: { action: 'create-order', ref: 'K-1', signal: cancel.signal } })
    .then(
      (res) => res.status as unknown,
      (error: unknown) => error,
    );
  const cap = new Promise<string>((r) => setTimeout(() => r('still pending after 3000 ms'), 3_000));
  return Promise.race([settled, cap]).then((value) => ({ value, ms: Date.now() - started }));
}

describe("a never_sent close the store fails, then hangs on its next try", () => {
  it("the caller's abort ends the call with its reason", async () => {
    const cancel = new AbortController();
    const client = createClient({ store: hangingStore(cancel) });
    cleanups.push(() => client.close({ waitMs: 0 }).catch(() => undefined));
    const caller = new AbortController();
    const reason = new Error('the caller gives up');
    setTimeout(() => caller.abort(reason), 200);
    const { value, ms } = await call(client, cancel, caller.signal);
    expect(value).toBe(reason);
    expect(ms).toBeLessThan(2_000); // measured ~1.2 s: the abort (or deadline), then at most LET_GO_WAIT_MS for what it left
  });

  it('the deadline ends the call', async () => {
    const cancel = new AbortController();
    const client = createClient({ store: hangingStore(cancel), retry: { deadlineMs: 300 } });
    cleanups.push(() => client.close({ waitMs: 0 }).catch(() => undefined));
    const { value, ms } = await call(client, cancel);
    expect((value as Error).name).toBe('DeadlineExceededError');
    expect(ms).toBeLessThan(2_000); // measured ~1.2 s: the abort (or deadline), then at most LET_GO_WAIT_MS for what it left
  });
});
