/**
 * One client process of the chaos run. Two clients on the shared store
 * (one per provider: the one that dedupes by key, and the one that does not),
 * lookups that are slow, stale or failing at random (seeded), and this worker's
 * part of the schedule, `plan.concurrency` calls at a time.
 *
 * Every call appends an `invoke` line to the worker's history file before it
 * starts and an outcome line when it ends, each with one synchronous `write`,
 * so a SIGKILL loses nothing that happened before it. A restarted worker (same
 * id, next incarnation) reads that file, calls `recover()`, and resumes with
 * the operations it never started.
 *
 * Run: `node --import tsx chaos/worker.ts '<WorkerConfig JSON>'`
 *
 * @module
 */
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '../src/index.js';
import type { LookupFn, OnceClient, OnceStore } from '../src/index.js';
import { placeOrder } from './call.js';
import { parseHistory } from './checker.js';
import type { HistoryEntry } from './history.js';
import { DEDUPE_ACTION, STRICT_ACTION, isStrict, mulberry32, ownerName, reliesOnDedupe, schedule, subSeed } from './plan.js';
import type { DoneLine, LookupFaults, WorkerConfig } from './protocol.js';
import { faultyStore } from './store-faults.js';
import { openStore } from './store.js';

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const name = `w${config.id}`;
const random = mulberry32(subSeed(config.plan.seed, 100 + config.id * 1000 + config.incarnation));

const historyFd = openSync(config.historyPath, 'a');
function record(entry: HistoryEntry): void {
  // One synchronous write per line: on disk (in the page cache) before anything that follows.
  writeSync(historyFd, `${JSON.stringify(entry)}\n`);
}

/** A lookup by ref that misbehaves at random: fails, asks late, or answers late (stale). */
function chaosLookup(baseUrl: string, faults: LookupFaults): LookupFn {
  return async ({ scope, signal }) => {
    const roll = random();
    const delay = random();
    if (roll < faults.failRate / 2) throw new Error('chaos: lookup failed before asking');
    const slow = roll < faults.failRate + faults.slowRate;
    const stale = !slow && roll < faults.failRate + faults.slowRate + faults.staleRate;
    if (slow && roll >= faults.failRate) await sleep(Math.floor(delay * faults.slowMs), undefined, { signal });
    const res = await fetch(`${baseUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    if (roll < faults.failRate) {
      await res.body?.cancel();
      throw new Error('chaos: lookup failed after asking');
    }
    if (res.status !== 404 && res.status !== 200) throw new Error(`lookup answered ${res.status}`);
    // The provider answered; the answer takes its time to come back, and may be stale when it does.
    if (stale) await sleep(Math.floor(delay * faults.staleMs), undefined, { signal });
    if (res.status === 404) return null;
    return res;
  };
}

function client(action: string, url: string, store: OnceStore): OnceClient {
  const t = config.timing;
  const owner = ownerName(config.id, action === DEDUPE_ACTION ? 'd' : 's');
  return createClient({
    store,
    owner,
    leaseMs: t.leaseMs,
    settleMs: t.settleMs,
    inFlightWaitMs: t.inFlightWaitMs,
    // true only for the provider that dedupes (and only for half the workers): honest either way
    providerDedupes: reliesOnDedupe(owner),
    telemetry: false,
    retry: {
      maxAttempts: t.maxAttempts,
      baseDelayMs: 20,
      maxDelayMs: 300,
      attemptTimeoutMs: t.attemptTimeoutMs,
      deadlineMs: t.deadlineMs,
      maxRetryAfterMs: t.maxRetryAfterMs,
      budget: { ratio: 0.3, reserve: 20 },
    },
    lookups: { [action]: chaosLookup(url, config.lookupFaults) },
  });
}

/** The operations of this worker that no earlier incarnation started. */
function remaining(): { op: number; ref: string }[] {
  const started = new Set<number>();
  if (existsSync(config.historyPath)) {
    for (const e of parseHistory(readFileSync(config.historyPath, 'utf8'))) if (e.type === 'invoke') started.add(e.op);
  }
  return schedule(config.plan).filter((s) => s.worker === config.id && !started.has(s.op));
}

async function main(): Promise<void> {
  const todo = remaining();
  const opened = openStore(config.store);
  // Each fault is on stdout at once (a SIGKILL loses none that happened).
  const store = config.storeFaults.rate > 0
    ? faultyStore(opened, config.storeFaults, subSeed(config.plan.seed, 200 + config.id * 1000 + config.incarnation), (kind, method) => process.stdout.write(`f ${kind} ${method}\n`))
    : opened;
  const clients = {
    dedupe: client(DEDUPE_ACTION, config.dedupeUrl, store),
    strict: client(STRICT_ACTION, config.strictUrl, store),
  };
  let recovered = 0;
  if (config.incarnation > 0) {
    // What a restarted process does first: settle what its previous life (or anyone) left stale.
    for (const c of [clients.dedupe, clients.strict]) {
      const report = await c.recover({ limit: 1000 }).catch(() => undefined);
      recovered += report === undefined ? 0 : report.resolved.length + report.absent.length;
    }
  }
  const lane = async (): Promise<void> => {
    for (let next = todo.shift(); next !== undefined; next = todo.shift()) {
      const strict = isStrict(next.ref);
      const caller = { op: next.op, worker: name, incarnation: config.incarnation, ref: next.ref };
      record({ type: 'invoke', ...caller, at: Date.now() });
      const outcome = strict
        ? await placeOrder(clients.strict, config.strictUrl, STRICT_ACTION, caller)
        : await placeOrder(clients.dedupe, config.dedupeUrl, DEDUPE_ACTION, caller);
      record(outcome);
      process.stdout.write('p\n');
    }
  };
  await Promise.all(Array.from({ length: config.plan.concurrency }, lane));
  const stats: Record<string, number> = {};
  for (const c of [clients.dedupe, clients.strict]) {
    for (const [k, v] of Object.entries(c.stats())) stats[k] = (stats[k] ?? 0) + v;
  }
  const done: DoneLine = { done: true, worker: config.id, incarnation: config.incarnation, stats, recovered };
  process.stdout.write(`${JSON.stringify(done)}\n`);
  await store.close();
  closeSync(historyFd);
}

await main();
