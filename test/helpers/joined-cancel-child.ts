/**
 * Child process of close-joined-cancel-hung-store.test.ts: a joined call's `once.signal` cancel whose
 * background write never settles (the store's reads hang from the cancel on, on nothing the process
 * waits for: no socket, no timer). Prints one JSON line (the calls' outcomes, how long close() took,
 * the provider's requests and orders). Its argument picks the close:
 * - `exit`: `client.close({ waitMs: 300 })`, `retry.deadlineMs` 60 s, then the provider closes and
 *   the line is printed: the process should exit then, held by nothing of oncefetch's (the test
 *   measures when it exits);
 * - `returns`: the provider closed first, then `client.close()` without `waitMs`, `retry.deadlineMs`
 *   1.5 s: close() should return by that bound (from the cancel), and the code after it run.
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
const mode = process.argv[2];
if (mode !== 'exit' && mode !== 'returns') throw new TypeError(`joined-cancel-child: 'exit' or 'returns', not ${String(mode)}`);
const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, deadlineMs: mode === 'exit' ? 60_000 : 1_500, budget: false } });
const ref = mode === 'exit' ? 'JC-EXIT' : 'JC-CLOSE-RETURNS';
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
// (what the provider saw, read as it closes: after client.close() for `exit`, before it for `returns`)
let seen = { requests: 0, effects: 0 };
const closeProvider = async (): Promise<void> => {
  seen = { requests: provider.requests.length, effects: provider.effects };
  await provider.close();
};
if (mode === 'returns') await closeProvider();
const started = Date.now();
await client.close(mode === 'exit' ? { waitMs: 300 } : {});
const closeMs = Date.now() - started;
if (mode === 'exit') await closeProvider();
console.log(JSON.stringify({ outcomes, closeMs, ...seen }));
