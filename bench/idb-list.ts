/**
 * The IndexedDB store's `list` with a limit, under fake-indexeddb in Node: how long
 * `list({ limit: 10 })` and a recovery-shaped query take over many records. A measurement
 * to compare two versions of the store by hand, not a check.
 *
 *   npx tsx bench/idb-list.ts [--records 20000] [--runs 15]
 *
 * @module
 */
import 'fake-indexeddb/auto';
import { parseArgs } from 'node:util';
import { applyEvent, newRecord, type OperationRecord } from '../src/operation/record.js';
import { indexedDbStore } from '../src/stores/indexeddb.js';
import type { ListQuery } from '../src/stores/contract.js';
import { percentile } from './harness.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '20000' },
    runs: { type: 'string', default: '15' },
  },
});
const RECORDS = Number(values.records);
const RUNS = Number(values.runs);

/** Record `i`: a third succeeded, a third ambiguous, a third pending; tenants t0..t9; updatedAt spread over time. */
function recordAt(i: number): OperationRecord {
  const now = 1_000 + i;
  const fresh = newRecord({
    scope: { tenant: `t${i % 10}`, action: 'create-order', ref: `r${i}` },
    key: `key-${i}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'bench',
    now,
    leaseMs: 100,
    retentionMs: 86_400_000,
  });
  const acquired = applyEvent(fresh, { type: 'acquire', owner: 'bench', leaseExpiresAt: now + 100 }, now, 'bench');
  if (i % 3 === 2) return acquired;
  const started = applyEvent(acquired, { type: 'attempt_started', attemptId: `att-${i}` }, now, 'bench');
  const cls = i % 3 === 0 ? 'success' : 'ambiguous';
  return applyEvent(started, { type: 'attempt_finished', class: cls, status: cls === 'success' ? 201 : 502, reason: cls, result: null }, now, 'bench');
}

const store = indexedDbStore({ dbName: 'oncefetch-bench-list' });
const loadStarted = performance.now();
for (let i = 0; i < RECORDS; i += 500) {
  await Promise.all(Array.from({ length: Math.min(500, RECORDS - i) }, (_, j) => store.claim(recordAt(i + j))));
}
console.log(`loaded ${RECORDS} records in ${Math.round(performance.now() - loadStarted)} ms`);

const queries: Array<[string, ListQuery]> = [
  ['list({ limit: 10 })', { limit: 10 }],
  ["list({ states: ['in_flight', 'ambiguous', 'pending'], leaseExpiredBefore, tenant: 't3', limit: 10 })", { states: ['in_flight', 'ambiguous', 'pending'], leaseExpiredBefore: 1e12, tenant: 't3', limit: 10 }],
  ['list() (limit 100)', {}],
];
for (const [label, query] of queries) {
  const times: number[] = [];
  let listed = 0;
  for (let run = 0; run < RUNS; run++) {
    const started = performance.now();
    listed = (await store.list(query)).length;
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  console.log(`${label}: ${listed} listed; median ${percentile(times, 0.5).toFixed(1)} ms, p90 ${percentile(times, 0.9).toFixed(1)} ms over ${RUNS} runs`);
}
await store.close();
