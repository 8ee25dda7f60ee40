/**
 * One "machine" of the PostgreSQL fleet test: its own process, its own pool,
 * the same refs as every other worker in its own shuffled order, a few calls
 * at a time. Prints one JSON line per event of interest and per result.
 *
 * Run: `node --import tsx test/helpers/postgres-fleet-worker.ts '<FleetWorkerConfig JSON>'`
 */
import { REPLAYED_HEADER, createClient, isOnceError } from '../../src/index.js';
import type { OnceEvent } from '../../src/index.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { FLEET_ACTION, type FleetLine, type FleetWorkerConfig } from './postgres-fleet-protocol.js';


function print(line: FleetLine): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** mulberry32, so a worker's order is reproducible from its seed. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  let state = seed >>> 0;
  const random = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as FleetWorkerConfig;
  const { worker, providerUrl } = config;
  const onEvent = (e: OnceEvent): void => {
    if (e.type === 'attempt_started') print({ type: 'attempt_started', worker, ref: e.scope.ref, attempt: e.attempt });
    if (e.type === 'takeover') {
      print({ type: 'takeover', worker, ref: e.scope.ref, previousOwner: e.previousOwner, previousState: e.previousState });
    }
  };
  const client = createClient({
    store: postgresStore({ connectionString: config.databaseUrl, schema: config.schema, poolMax: 4 }),
    tenant: 'fleet',
    owner: worker,
    leaseMs: config.leaseMs,
    inFlightWaitMs: 20_000,
    retry: { maxAttempts: 10, baseDelayMs: 20, maxDelayMs: 200, attemptTimeoutMs: 400, deadlineMs: 30_000, budget: false },
    lookups: {
      [FLEET_ACTION]: async ({ scope, signal }) => {
        const res = await fetch(`${providerUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
        if (res.status === 404) return null;
        if (res.status !== 200) throw new Error(`lookup answered ${res.status}`);
        return res;
      },
    },
    onEvent,
  });
  print({ type: 'ready', worker, pid: process.pid });

  const edges = new Set([...config.first, ...config.last]);
  const queue = [...config.first, ...shuffled(config.refs.filter((r) => !edges.has(r)), config.seed), ...config.last];
  const lane = async (): Promise<void> => {
    for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) {
      try {
        const res = await client.fetch(`${providerUrl}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ref, sku: 'A-17', qty: 1 }),
          once: { action: FLEET_ACTION, ref },
        });
        const order = (await res.json()) as { id: string };
        print({ type: 'result', worker, ref, status: res.status, orderId: order.id, replayed: res.headers.has(REPLAYED_HEADER) });
      } catch (error) {
        const code = isOnceError(error) ? error.code : 'UNEXPECTED';
        print({ type: 'error', worker, ref, code, message: error instanceof Error ? error.message : String(error) });
      }
    }
  };
  await Promise.all(Array.from({ length: config.concurrency }, lane));
  print({ type: 'done', worker, stats: { ...client.stats() } });
  await client.close();
}

await main();
