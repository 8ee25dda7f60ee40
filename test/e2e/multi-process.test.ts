/**
 * Four processes call the same 25 refs, each in its own shuffled order, on one
 * SQLite file, against a provider that delays and fails at random (seeded).
 * Effects are counted at the provider: exactly one per ref, and every process
 * gets that order for every ref.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider, type Fault, type Provider } from '../../src/testing/provider.js';
import type { CrashWorkerConfig } from '../helpers/crash-protocol.js';
import { killAll, startTogether, startWorker, type WorkerRun } from '../helpers/crash-run.js';
import { tempDir } from '../helpers/setup.js';

const REFS = Array.from({ length: 25 }, (_, i) => `MP-${String(i).padStart(2, '0')}`);
const WORKERS = 4;

const RANDOM_FAULTS: Fault[] = [
  { kind: 'drop_after_commit' },
  // longer than attemptTimeoutMs below: the attempt times out after the commit
  { kind: 'delay_after_commit', delayMs: 600 },
  { kind: 'error_after_commit' },
  { kind: 'status_before_commit', status: 503, retryAfter: '0' },
  { kind: 'reset_before_commit' },
];

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const runs: WorkerRun[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider({ processingMs: 30, randomFaults: { seed: 20260417, rate: 0.4, kinds: RANDOM_FAULTS } });
});

afterEach(async () => {
  try {
    await killAll(runs);
    await provider.close();
  } finally {
    tmp.cleanup();
  }
});

it('4 processes × the same 25 refs under random faults: exactly 25 effects, one order id per ref everywhere', { timeout: 60_000 }, async () => {
  const dbPath = join(tmp.dir, 'once.db');
  const config = (i: number): CrashWorkerConfig => ({
    dbPath,
    url: provider.url,
    refs: REFS,
    seed: i + 1,
    concurrency: 3,
    // a caller calls again after a resumable error (say, it waited too long for another process)
    recalls: 3,
    leaseMs: 1_000,
    owner: `p${i}`,
    waitForGo: true,
    retry: { maxAttempts: 8, attemptTimeoutMs: 400, deadlineMs: 20_000 },
  });
  runs.push(...Array.from({ length: WORKERS }, (_, i) => startWorker(config(i), 50_000)));
  // All four start calling at once, so they contend for the same refs from the first call.
  await startTogether(runs);
  const started = performance.now();
  const exits = await Promise.all(runs.map((r) => r.exited));
  exits.forEach((exit, i) => expect(exit.code, runs[i]!.stderr()).toBe(0));
  const elapsedMs = performance.now() - started;

  // Exactly one business effect per ref.
  expect(provider.effects).toBe(REFS.length);
  for (const ref of REFS) expect(provider.effectsFor(ref), ref).toBe(1);

  // Every process got an answer for every ref, and it is the provider's one order for that ref.
  const results = runs.flatMap((r) => r.results());
  for (const ref of REFS) {
    const orderId = provider.orders.find((o) => o.ref === ref)?.id;
    const seen = results.filter((r) => r.ref === ref);
    expect(seen.map((r) => r.owner).sort(), `processes that answered ${ref}`).toEqual(runs.map((_, i) => `p${i}`));
    expect(new Set(seen.map((r) => r.orderId)), `order ids returned for ${ref}`).toEqual(new Set([orderId]));
    for (const r of seen) expect([200, 201]).toContain(r.status);
  }

  // One key per ref on every request the provider saw for it, and every record settled.
  const store = sqliteStore({ path: dbPath });
  try {
    const records = await store.list({ limit: 1_000 });
    expect(records).toHaveLength(REFS.length);
    for (const record of records) {
      expect(record.state, record.ref).toBe('succeeded');
      const keys = new Set(provider.requests.filter((q) => q.ref === record.ref).map((q) => q.key));
      expect([...keys], record.ref).toEqual([record.key]);
    }
  } finally {
    await store.close();
  }

  const errors = runs.flatMap((r) => r.errors());
  const events = runs.flatMap((r) => r.lines.filter((l) => l.type === 'event'));
  const count = (event: string): number => events.filter((e) => e.type === 'event' && e.event === event).length;
  const stats = runs.map((r) => r.lines.find((l) => l.type === 'done'));
  console.log(
    `[multi-process] ${Math.round(elapsedMs)} ms; effects ${provider.effects}/${REFS.length}; ${provider.requests.length} POSTs, ` +
      `${provider.lookups} lookups; ${results.length} results (${results.filter((r) => r.replayed).length} replayed), ` +
      `${errors.length} resumable errors called again (${[...new Set(errors.map((e) => e.code))].join(', ') || 'none'}); ` +
      `${count('waiting')} waits for another process, ${count('takeover')} takeovers; ` +
      `faults ${JSON.stringify(provider.faultsInjected)}; stats ${JSON.stringify(stats.map((s) => (s?.type === 'done' ? s.stats : null)))}`,
  );
});
