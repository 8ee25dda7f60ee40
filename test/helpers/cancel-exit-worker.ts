/**
 * A process that runs one call whose claim lands late, cancels it from the same client with a long
 * `waitMs` while it is claiming, closes everything, prints one JSON line and returns: with nothing left
 * behind it exits at once (see cancel-leaves-no-timer.test.ts).
 */
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceStore } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';

const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const waitMs = Number(process.argv[2] ?? '20000');

const provider = await startProvider({ ignoreKeys: true });
const inner = memoryStore();
let claiming = false;
const store: OnceStore = {
  name: inner.name,
  claim: async (record) => {
    claiming = true;
    await wait(200);
    return inner.claim(record);
  },
  compareAndSet: (id, expected, next) => inner.compareAndSet(id, expected, next),
  get: (id) => inner.get(id),
  list: (query) => inner.list(query),
  purge: (now) => inner.purge(now),
  close: () => inner.close(),
};
const client = createClient({ store, telemetry: false, retry: { deadlineMs: 10_000, budget: false } });
const ref = 'exit-1';
const call = client
  .fetch(`${provider.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }), once: { action: 'create-order', ref } })
  .then((res) => String(res.status), (error: unknown) => (error instanceof Error ? error.name : String(error)));
while (!claiming) await wait(5);
const result = await client.cancel({ action: 'create-order', ref }, { waitMs });
const outcome = await call;
await client.close();
await provider.close();
process.stdout.write(`${JSON.stringify({ result, outcome, requests: provider.requests.length, effects: provider.effectsFor(ref) })}\n`);
