/**
 * Child process of close-joined-cancel-hung-store.test.ts: a joined call's `once.signal` cancel whose
 * background write never settles (the store's reads hang from the cancel on, on nothing the process
 * waits for: no socket, no timer), then `client.close()` without `waitMs`, `retry.deadlineMs` 1.5 s,
 * the provider already closed. close() should return by that bound (from the cancel), and the code after
 * it run: prints one JSON line (the calls' outcomes, how long close() took, requests and orders).
 */
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceStore } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const provider = await startProvider({ ignoreKeys: true });
provider.fault({ kind: 'status_before_commit', status: 503 });
const inner = memoryStore();
let hang = false;
const store: OnceStore = {
  name: inner.name,
  claim: (record) => inner.claim(record),
  get: (id) => (hang ? new Promise(() => undefined) : inner.get(id)),
  compareAndSet: (id, expected, next) => inner.compareAndSet(id, expected, next),
  list: (query) => inner.list(query),
  purge: (now) => inner.purge(now),
  close: async () => undefined,
};
let sent = 0;
const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
  sent++;
  await wait(100);
  return globalThis.fetch(input, init);
}) as typeof globalThis.fetch;
const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, deadlineMs: 1_500, budget: false } });
const ref = 'JC-CLOSE-RETURNS';
const post = (signal?: AbortSignal): Promise<string> =>
  client
    .fetch(`${provider.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref, sku: 'A-17', qty: 1 }),
      once: { action: 'create-order', ref, ...(signal === undefined ? {} : { signal }) },
    })
    .then(
      (res) => String(res.status),
      (error: unknown) => (error as Error).name,
    );
const owner = post();
while (sent === 0) await wait(5);
const cancel = new AbortController();
const joiner = post(cancel.signal);
await wait(20);
hang = true;
cancel.abort(new Error('the joiner cancels'));
const outcomes = await Promise.all([owner, joiner]);
const requests = provider.requests.length;
const effects = provider.effects;
await provider.close();
const started = Date.now();
await client.close();
const closeMs = Date.now() - started;
console.log(JSON.stringify({ outcomes, closeMs, requests, effects }));
