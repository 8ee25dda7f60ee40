/**
 * One client process of the chaos run. Two clients on the shared store
 * (one per provider: the one that dedupes by key, and the one that does not;
 * a third, for the provider that does not, makes the bursts' calls),
 * lookups that are slow, stale or failing at random (seeded; none for the provider that dedupes in
 * every fourth worker, see `lacksLookup`), and this worker's
 * part of the schedule, `plan.concurrency` calls at a time.
 *
 * Every call appends an `invoke` line to the worker's history file before it
 * starts and an outcome line when it ends, each with one synchronous `write`,
 * so a SIGKILL loses nothing that happened before it. A restarted worker (same
 * id, next incarnation, new lease owners: `ownerName`) reads that file, calls
 * `recover()`, and resumes with the operations it never started. Besides its schedule it makes the calls of
 * the bursts the fleet sends it on stdin (see `burst`).
 *
 * Run: `node --import tsx chaos/worker.ts '<WorkerConfig JSON>'`
 *
 * @module
 */
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '../src/index.js';
import { defaultFetch } from '../src/node-defaults.js';
import type { LookupFn, OnceClient, OnceEvent, OnceStore } from '../src/index.js';
import { GAVE_UP, placeOrder } from './call.js';
import { parseHistory } from './checker.js';
import { conflictBranches } from './conflict-branches.js';
import type { HistoryEntry, OutcomeEntry } from './history.js';
import { mismatchingTransport } from './key-mismatch.js';
import { DEDUPE_ACTION, STRICT_ACTION, givesUpOnRetryable, isStrict, lacksLookup, mulberry32, ownerName, reliesOnDedupe, schedule, subSeed } from './plan.js';
import type { DoneLine, LookupFaults, WorkerConfig } from './protocol.js';
import { faultyStore, lateClaims } from './store-faults.js';
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

/**
 * Armed by the fleet (SIGUSR2) for an aimed kill or pause: the next response of the provider that
 * ignores keys is signalled (`a` on stdout) and held `AIM_HOLD_MS` before the engine gets it, so the
 * hit lands after the effect and before the engine records the attempt's end.
 */
let armed = false;
process.on('SIGUSR2', () => (armed = true));
// (SIGUSR2 ends a process that has no listener: the fleet arms only a worker that said it has one)
process.stdout.write('r\n');
const AIM_HOLD_MS = 150;

/** The default transport, through which an armed worker signals and holds a response (see `armed`). */
function aimable(base: typeof fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (armed && url.startsWith(config.strictUrl)) {
      armed = false;
      process.stdout.write('a\n');
      await sleep(AIM_HOLD_MS);
    }
    return res;
  };
}
/**
 * The provider that dedupes answers the held keys of some refs with a key mismatch (see
 * `key-mismatch.ts`): each one on stdout at once (`k <instead>`), for the fleet to count.
 */
const transport = mismatchingTransport(aimable(defaultFetch()), config.dedupeUrl, config.plan, config.keyMismatch, (instead) => process.stdout.write(`k ${instead}\n`));

/**
 * The scheduled calls of refs that give up at their first retryable answer ({@link givesUpOnRetryable}),
 * by ref, with the attempt class each last saw: the strict client's `onEvent` aborts one once its
 * engine has recorded a retryable answer and scheduled the retry.
 */
const givingUp = new Map<string, { abort: AbortController; last: string | undefined }>();
function onStrictEvent(e: OnceEvent): void {
  const call = givingUp.get(e.scope.ref);
  if (call === undefined) return;
  if (e.type === 'attempt_finished') call.last = e.class;
  else if (e.type === 'retry_scheduled' && call.last === 'retryable') call.abort.abort(GAVE_UP);
}

/**
 * Every takeover (`t <previous owner>`, `-` for none) and every call that resumed a record still
 * `in_flight` under its own owner name (`u`), on stdout at once (a SIGKILL loses none), for the fleet to count.
 */
function tell(e: OnceEvent): void {
  if (e.type === 'takeover') process.stdout.write(`t ${e.previousOwner ?? '-'}\n`);
  else if (e.type === 'operation_resumed' && e.state === 'in_flight') process.stdout.write('u\n');
}

/** How each key conflict on a resend ended in this process's calls (`b <branch>`, see `conflict-branches.ts`), on stdout at once. */
const tellBranch = conflictBranches((branch) => process.stdout.write(`b ${branch}\n`));

function client(action: string, url: string, store: OnceStore, owner = ownerName(config.id, config.incarnation, action === DEDUPE_ACTION ? 'd' : 's'), onEvent?: (e: OnceEvent) => void): OnceClient {
  const t = config.timing;
  // (some workers' clients for the provider that dedupes have no lookup: see `lacksLookup`)
  const lookup = action === DEDUPE_ACTION && lacksLookup(config.id) ? undefined : chaosLookup(url, config.lookupFaults);
  return createClient({
    store,
    fetch: transport,
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
    lookups: lookup === undefined ? {} : { [action]: lookup },
    onEvent: (e) => {
      tell(e);
      tellBranch(e);
      onEvent?.(e);
    },
  });
}

const past = existsSync(config.historyPath) ? parseHistory(readFileSync(config.historyPath, 'utf8')) : [];

/** The operations of this worker that no earlier incarnation started. */
function remaining(): { op: number; ref: string }[] {
  const started = new Set(past.flatMap((e) => (e.type === 'invoke' ? [e.op] : [])));
  return schedule(config.plan).filter((s) => s.worker === config.id && !started.has(s.op));
}

/**
 * Whether this life calls again, first and before any `recover()`, the calls its SIGKILLed last life
 * had under way, as a job queue redelivers unacknowledged jobs: a seeded half of the restarts. Their
 * records are mostly `in_flight` under the dead life's lease, so these calls take them over (the
 * path where the engine must reconcile an attempt it did not see end), where `recover()` would
 * have settled them first.
 */
const redelivers = config.incarnation > 0 && mulberry32(subSeed(config.plan.seed, 300 + config.id * 1000 + config.incarnation))() < 0.5;

/** The calls of the last life that its SIGKILL cut (`KILLED`), in the order they were started. */
function cutByKill(): { op: number; ref: string; redelivered: true }[] {
  return past.flatMap((e) => (e.type === 'indeterminate' && e.code === 'KILLED' && e.incarnation === config.incarnation - 1 ? [{ op: e.op, ref: e.ref, redelivered: true as const }] : []));
}

/**
 * Bursts: the fleet (on stdin, `c <ref> <op> <at>`) has every live worker call one ref of the
 * provider that ignores keys at the same moment `at` (epoch ms), just after the ref's record was
 * left without a live lease and unfinished: a call of it ended `pending` or `ambiguous` (this worker
 * asks for the burst: `c <ref>` on stdout; see `givesUpOnRetryable` for the calls that end `pending`
 * on purpose), or its caller was SIGKILLed or SIGSTOPped (the fleet, once the lease has run out). Each process then reads the same generation and races compare-and-set to take the
 * record over; only one may win (DESIGN §1, the fencing token), or two of them send.
 */
const bursts = new Set<Promise<void>>();
/** How late the burst client's store answers a claim: longer than the spread of a burst's calls over the workers. */
const BURST_CLAIM_LATE_MS = 30;
let takingBursts = true;
const burstLines = createInterface({ input: process.stdin });
function burst(line: string, clients: { burst: OnceClient }): void {
  const [tag, ref, op, at] = line.split(' ');
  if (tag !== 'c' || ref === undefined || !takingBursts) return;
  const call = (async () => {
    await sleep(Math.max(0, Number(at) - Date.now()));
    const caller = { op: Number(op), worker: name, incarnation: config.incarnation, ref };
    record({ type: 'invoke', ...caller, at: Date.now(), burst: true });
    record(await placeOrder(clients.burst, config.strictUrl, STRICT_ACTION, caller));
  })();
  bursts.add(call);
  void call.finally(() => bursts.delete(call));
}

/** Whether a call's end left its record takeover-prone for a burst: unfinished, its lease released. */
function asksBurst(ref: string, outcome: OutcomeEntry): boolean {
  return isStrict(ref) && outcome.type !== 'ok' && (outcome.state === 'pending' || outcome.state === 'ambiguous');
}

async function main(): Promise<void> {
  const todo: { op: number; ref: string; redelivered?: true }[] = redelivers ? [...cutByKill(), ...remaining()] : remaining();
  const opened = openStore(config.store);
  // Each fault is on stdout at once (a SIGKILL loses none that happened).
  const store = config.storeFaults.rate > 0
    ? faultyStore(opened, config.storeFaults, subSeed(config.plan.seed, 200 + config.id * 1000 + config.incarnation), (kind, method) => process.stdout.write(`f ${kind} ${method}\n`))
    : opened;
  const clients = {
    dedupe: client(DEDUPE_ACTION, config.dedupeUrl, store),
    strict: client(STRICT_ACTION, config.strictUrl, store, undefined, onStrictEvent),
    // The bursts' calls: their own owner, on a store whose claims answer late (see `lateClaims`).
    burst: client(STRICT_ACTION, config.strictUrl, lateClaims(store, BURST_CLAIM_LATE_MS), `${ownerName(config.id, config.incarnation, 's')}-burst`),
  };
  burstLines.on('line', (line) => burst(line, clients));
  let recovered = 0;
  if (config.incarnation > 0 && !redelivers) {
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
      record({ type: 'invoke', ...caller, at: Date.now(), ...(next.redelivered === true ? { redelivered: true } : {}) });
      const givesUp = next.redelivered !== true && givesUpOnRetryable(config.plan, next.ref) && !givingUp.has(next.ref);
      const abort = new AbortController();
      if (givesUp) givingUp.set(next.ref, { abort, last: undefined });
      const outcome = strict
        ? await placeOrder(clients.strict, config.strictUrl, STRICT_ACTION, caller, givesUp ? abort.signal : undefined)
        : await placeOrder(clients.dedupe, config.dedupeUrl, DEDUPE_ACTION, caller);
      if (givesUp) givingUp.delete(next.ref);
      record(outcome);
      if (next.redelivered !== true && asksBurst(next.ref, outcome)) process.stdout.write(`c ${next.ref}\n`);
      // (progress counts the scheduled operations: a redelivered call is not one more)
      if (next.redelivered !== true) process.stdout.write('p\n');
    }
  };
  await Promise.all(Array.from({ length: config.plan.concurrency }, lane));
  // The bursts under way end too; none is taken after that.
  while (bursts.size > 0) await Promise.all(bursts);
  takingBursts = false;
  burstLines.close();
  process.stdin.destroy();
  // No longer to be armed: a SIGUSR2 that came as the process exits, its listener gone, would end it.
  process.stdout.write('x\n');
  const stats: Record<string, number> = {};
  for (const c of [clients.dedupe, clients.strict, clients.burst]) {
    for (const [k, v] of Object.entries(c.stats())) stats[k] = (stats[k] ?? 0) + v;
  }
  const done: DoneLine = { done: true, worker: config.id, incarnation: config.incarnation, stats, recovered };
  process.stdout.write(`${JSON.stringify(done)}\n`);
  await store.close();
  closeSync(historyFd);
}

await main();
