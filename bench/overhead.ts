/**
 * oncefetch's own CPU per call, without a network: the transport is a fake
 * `fetch` that answers at once with a canned 201. Isolates what the engine and
 * the store add on top of any transport, so each hot-path change can be
 * measured without the loopback noise.
 *
 *   npx tsx bench/overhead.ts [--calls 20000] [--concurrency 1,16] [--repeats 3]
 *
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createClient, memoryStore } from '../src/index.js';
import type { OnceStore } from '../src/index.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import { spread } from './harness.js';
import { orderBody } from './variants.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '1,16' },
    repeats: { type: 'string', default: '3' },
    only: { type: 'string' },
  },
});
const calls = Number(values.calls);
const levels = values.concurrency.split(',').map(Number);
const repeats = Number(values.repeats);

const RESPONSE_BODY = '{"id":"o-1","status":"created","bytes":150}';
const fakeFetch = (async () =>
  new Response(RESPONSE_BODY, { status: 201, headers: { 'content-type': 'application/json', 'content-length': String(RESPONSE_BODY.length) } })) as typeof globalThis.fetch;

const stores: Array<[string, (dir: string) => OnceStore]> = [
  ['memory', () => memoryStore()],
  ['sqlite', (dir) => sqliteStore({ path: join(dir, `s-${Math.random()}.db`) })],
  ['sqlite power-loss', (dir) => sqliteStore({ path: join(dir, `p-${Math.random()}.db`), durability: 'power-loss' })],
];

const dir = mkdtempSync(join(tmpdir(), 'oncefetch-overhead-'));
try {
  for (const c of levels) {
    for (const [name, make] of stores) {
      if (values.only !== undefined && name !== values.only) continue;
      const perCall: number[] = [];
      for (let r = 0; r < repeats; r++) {
        const client = createClient({ tenant: 'bench', store: make(dir), fetch: fakeFetch });
        let next = 0;
        const worker = async (): Promise<void> => {
          while (next < calls) {
            const i = next++;
            const res = await client.fetch('http://127.0.0.1:1/orders', {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: orderBody(i),
              once: { action: 'create-order', ref: `r${r}-${i}` },
            });
            await res.arrayBuffer();
          }
        };
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await Promise.all(Array.from({ length: c }, worker));
        const wallUs = (performance.now() - t0) * 1000;
        const cpu = process.cpuUsage(cpu0);
        perCall.push((cpu.user + cpu.system) / calls);
        if (r === repeats - 1) {
          const s = spread(perCall);
          console.log(
            `c=${String(c).padEnd(3)} ${name.padEnd(18)} CPU ${s.median.toFixed(1).padStart(6)} µs/call (${s.min.toFixed(1)}–${s.max.toFixed(1)}), wall ${(wallUs / calls).toFixed(1)} µs/call`,
          );
        }
        await client.close();
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
