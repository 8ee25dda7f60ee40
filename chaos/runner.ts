/**
 * The chaos run: two loopback providers (one dedupes by key, one ignores keys)
 * with a seeded random mix of every fault they can inject, several worker
 * processes sharing one store (an SQLite file or a PostgreSQL table) and one
 * pool of refs, SIGKILLs with
 * restarts and SIGSTOPs past the lease at seeded points, then the final
 * recovery and the checker.
 *
 * @module
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { FAULT_KINDS, startProvider, type FaultKind, type Provider } from '../src/testing/provider.js';
import { check } from './checker.js';
import { finalRecovery, type FinalReport } from './final.js';
import { Fleet } from './fleet.js';
import { heldKeyFaults } from './key-mismatch.js';
import type { CheckResult, EffectEntry, HistoryEntry } from './history.js';
import { chaosEvents, faultMix, subSeed, type RunPlan } from './plan.js';
import type { ClientTiming, LookupFaults } from './protocol.js';
import type { StoreFaults } from './store-faults.js';
import { describeStore, dropStore, openStore, runStore, type StoreKind, type StoreSpec } from './store.js';

/** Options of {@link runChaos}. */
export interface ChaosOptions {
  plan: RunPlan;
  /** the store the processes share: an SQLite file in the run directory, or a PostgreSQL schema of the run's own */
  store: StoreKind;
  /** SIGKILL + restart events */
  kills: number;
  /** SIGSTOP past the lease + SIGCONT events */
  pauses: number;
  /** how long a pause lasts: past the lease, within the settle window (see the README) */
  pauseMs: { min: number; max: number };
  /** probability that a provider faults a request */
  faultRate: number;
  timing: ClientTiming;
  /** the longest a provider holds a request before committing it (`delay_before_commit`) */
  holdMs: number;
  lookupFaults: LookupFaults;
  /** faults of the workers' store calls (never of the final recovery's); rate 0 = none */
  storeFaults: StoreFaults;
  /** share of the refs of the provider that dedupes whose held key it answers with a key mismatch (see `key-mismatch.ts`); 0 = none */
  keyMismatch: number;
  /**
   * share of those refs (`keyMismatch`) whose first request the provider that dedupes records the key of
   * and never commits: the key held, no effect (see `heldKeyFaults`); 0 = none
   */
  crashAfterKey: number;
  /** keep the run directory (database, history, effect logs) and the PostgreSQL schema even when the run passes */
  keep: boolean;
  /** progress lines */
  log: (line: string) => void;
  /** stops the run (SIGINT, SIGTERM): `runChaos` rejects with its reason once the run is cleaned up */
  signal?: AbortSignal;
}

/** What {@link runChaos} measured. */
export interface ChaosResult {
  check: CheckResult;
  /** the harness's own failures (a worker crash, a stall): a run with any is not a pass */
  errors: string[];
  /** workers: the scheduled calls started; redelivered: calls again of those a SIGKILL cut; burst: the calls of bursts (see the worker) */
  invokes: { workers: number; redelivered: number; burst: number; final: number };
  /** refs burst: called by every live worker at once, just after a call left them unfinished or a kill cut one */
  bursts: number;
  attempts: { dedupe: number; strict: number };
  lookups: number;
  faults: Record<FaultKind, number>;
  /** store faults the workers injected, by kind (`reject`, `lost_ack`, `slow`) and by `<kind> <method>` */
  storeFaults: Record<string, number>;
  /**
   * Key mismatches the provider that dedupes answered held keys with (see `key-mismatch.ts`):
   * `injected` in all, by what they replaced (`instead`: `replay`, `in_progress`), to the workers'
   * calls and the final recovery's; and how the records with a conflict attempt ended, by state,
   * with how many of their refs have an effect at the provider.
   */
  keyMismatch: {
    injected: number;
    instead: Record<string, number>;
    workers: number;
    final: number;
    records: Record<string, { records: number; withEffect: number }>;
    /**
     * how the key conflicts on a resend ended in the calls that got them (see `conflict-branches.ts`),
     * by branch: all, the workers' calls, the final recovery's
     */
    branches: { all: Record<string, number>; workers: Record<string, number>; final: Record<string, number> };
    /** refs whose key the provider holds without an effect (`crashAfterKey`): planned (of the whole pool), and reached (their first request came) */
    heldKeys: { planned: number; reached: number };
  };
  kills: number;
  pauses: number;
  /** aimed kills and pauses (see `ChaosEvent.aimed`): hit on their worker's signal, or without it after the wait */
  aimed: { onSignal: number; missed: number };
  /** chaos events that found no live worker to hit */
  skippedEvents: number;
  workerStats: Record<string, number>;
  recoveredOnRestart: number;
  /** takeovers by the workers' clients, every life (see `Fleet.takeovers`) */
  takeovers: Fleet['takeovers'];
  /** takeovers by the final recovery's client: by its `recover()` rounds, by its calls (not in `takeovers`) */
  finalTakeovers: FinalReport['takeovers'];
  /** calls that resumed a record still `in_flight` under their own owner name */
  resumedInFlight: number;
  final: Omit<FinalReport, 'entries' | 'keyMismatch' | 'conflicted' | 'conflictBranches' | 'takeovers'>;
  /** calls that started while another process's call of the same ref was in progress */
  collisions: number;
  /** largest event-loop delay of the runner (which hosts both providers), ms */
  runnerLagMs: number;
  elapsedMs: number;
  /** where the database and logs are, when kept */
  runDir: string | undefined;
  /** the PostgreSQL schema of the records, when kept */
  keptSchema: string | undefined;
}

/** Calls that started while a call of the same ref by another process was still in progress. */
function countCollisions(history: readonly HistoryEntry[]): number {
  const open = new Map<string, Map<string, number>>();
  const ordered = history.filter((e) => e.type !== 'reconciled').sort((a, b) => a.at - b.at);
  let collisions = 0;
  for (const e of ordered) {
    let calls = open.get(e.ref);
    if (calls === undefined) open.set(e.ref, (calls = new Map()));
    const id = `${e.worker}#${e.incarnation}#${e.op}`;
    if (e.type === 'invoke') {
      if ([...calls.keys()].some((other) => !other.startsWith(`${e.worker}#`))) collisions++;
      calls.set(id, e.at);
    } else calls.delete(id);
  }
  return collisions;
}

function effectsOf(provider: Provider): EffectEntry[] {
  return provider.orders.map((o) => ({ id: o.id, ref: o.ref, createdAt: o.createdAt }));
}

/** `a` + `b`, key by key. */
function added(a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): Record<string, number> {
  const sum: Record<string, number> = { ...a };
  for (const [k, v] of Object.entries(b)) sum[k] = (sum[k] ?? 0) + v;
  return sum;
}

/** What the key mismatches injected came to (see {@link ChaosResult.keyMismatch}). */
function keyMismatchOf(fleet: Fleet, final: FinalReport, dedupe: Provider, heldKeys: ChaosResult['keyMismatch']['heldKeys']): ChaosResult['keyMismatch'] {
  const workers = fleet.keyMismatch;
  const instead = added(workers, final.keyMismatch);
  const sum = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);
  const records: Record<string, { records: number; withEffect: number }> = {};
  for (const { ref, state } of final.conflicted) {
    const r = (records[state] ??= { records: 0, withEffect: 0 });
    r.records++;
    if (dedupe.effectsFor(ref) > 0) r.withEffect++;
  }
  const branches = { all: added(fleet.conflictBranches, final.conflictBranches), workers: { ...fleet.conflictBranches }, final: { ...final.conflictBranches } };
  return { injected: sum(instead), instead, workers: sum(workers), final: sum(final.keyMismatch), records, branches, heldKeys };
}

/** How long an interrupted or crashed run waits for its step in progress to stop before it drops the schema. */
const STEP_STOP_MS = 5_000;

/**
 * Starts the providers and workers, unleashes the chaos, recovers, checks. When the run is
 * interrupted (`options.signal`) or throws, it kills the workers, waits for the step in progress
 * to stop, then drops the PostgreSQL schema and removes the run directory (unless `keep`), and
 * rejects with the abort's reason or the error.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const runDir = mkdtempSync(join(tmpdir(), 'oncefetch-chaos-'));
  const store = runStore(options.store, runDir);
  const live: { fleet?: Fleet } = {};
  const run = runSteps(options, runDir, store, live);
  const { signal } = options;
  let onAbort = (): void => undefined;
  const interrupted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal?.reason);
    if (signal?.aborted === true) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([run, interrupted]);
  } catch (error) {
    await live.fleet?.halt();
    // The step in progress sees the abort (or has failed): let it close its store, so that nothing
    // opens the schema again after the drop.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([run.catch(() => undefined), new Promise((done) => (timer = setTimeout(done, STEP_STOP_MS)))]);
    clearTimeout(timer);
    if (options.keep) {
      options.log(`[chaos] kept (--keep): run directory ${runDir}${store.kind === 'postgres' ? `, records in ${describeStore(store)}` : ''}`);
    } else {
      rmSync(runDir, { recursive: true, force: true });
      // (a failure to drop is reported, not thrown: the run's own error is the one to see)
      await dropStore(store).catch((e: unknown) => options.log(`[chaos] could not drop ${describeStore(store)}: ${e instanceof Error ? e.message : String(e)}`));
    }
    throw error;
  } finally {
    // (a signal once the run is over changes nothing, and must not reject `interrupted` unhandled)
    signal?.removeEventListener('abort', onAbort);
  }
}

async function runSteps(options: ChaosOptions, runDir: string, store: StoreSpec, live: { fleet?: Fleet }): Promise<ChaosResult> {
  const { plan, timing, signal } = options;
  const startedAt = Date.now();
  if (store.kind === 'postgres') {
    // Fail fast when the server is unreachable, and create the schema before the workers race to.
    const opened = openStore(store);
    try {
      await opened.list({ limit: 1 });
    } finally {
      await opened.close();
    }
    options.log(`[chaos] store: ${describeStore(store)}`);
  }
  signal?.throwIfAborted();
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const faultTiming = { attemptTimeoutMs: timing.attemptTimeoutMs, holdMs: options.holdMs };
  const dedupe = await startProvider({ processingMs: 2, randomFaults: { seed: subSeed(plan.seed, 10), rate: options.faultRate, kinds: faultMix(subSeed(plan.seed, 11), faultTiming) } });
  const strict = await startProvider({ processingMs: 2, ignoreKeys: true, randomFaults: { seed: subSeed(plan.seed, 12), rate: options.faultRate, kinds: faultMix(subSeed(plan.seed, 13), faultTiming) } });
  // Keys the provider that dedupes will hold without an effect: scripted, each for its ref's first request.
  const held = heldKeyFaults(plan, options.keyMismatch, options.crashAfterKey);
  dedupe.faults(held);
  if (signal?.aborted === true) {
    // interrupted while the providers started: start no worker
    lag.disable();
    await dedupe.close();
    await strict.close();
    signal.throwIfAborted();
  }
  let final: FinalReport = { entries: [], rounds: 0, resolved: 0, absent: 0, leftLive: 0, attemptClasses: {}, keyMismatch: {}, conflicted: [], conflictBranches: {}, takeovers: { recover: 0, calls: 0 } };
  let heldReached = 0;
  let history: HistoryEntry[] = [];
  let result: CheckResult;
  const fleet = new Fleet(
    { plan, store, dedupeUrl: dedupe.url, strictUrl: strict.url, timing, lookupFaults: options.lookupFaults, storeFaults: options.storeFaults, keyMismatch: options.keyMismatch },
    runDir,
    chaosEvents(plan, options.kills, options.pauses, options.pauseMs),
    options.log,
  );
  live.fleet = fleet;
  try {
    await fleet.finished;
    signal?.throwIfAborted();
    history = fleet.history();
    options.log(`[chaos] workers done after ${((Date.now() - startedAt) / 1000).toFixed(1)} s; final recovery…`);
    final = await finalRecovery({ store, dedupeUrl: dedupe.url, strictUrl: strict.url, timing, history, firstOp: plan.ops, signal, plan, keyMismatch: options.keyMismatch });
    history = [...history, ...final.entries];
    // Let any request still held by a provider land before the effect logs are read.
    await sleep(options.holdMs + 200, undefined, { signal });
    // (the held requests never commit: no effect of theirs is in the log, and none is to come)
    heldReached = held.length - dedupe.pendingFaults;
    const effects = [...effectsOf(dedupe), ...effectsOf(strict)];
    const requests = [...dedupe.requests, ...strict.requests].map((r) => ({ ref: r.ref, key: r.key }));
    result = check({ history, effects, requests });
    writeFileSync(join(runDir, 'history.jsonl'), history.map((e) => JSON.stringify(e)).join('\n') + '\n');
    writeFileSync(join(runDir, 'effects.json'), JSON.stringify({ dedupe: dedupe.orders, strict: strict.orders }));
  } finally {
    fleet.stop();
    lag.disable();
    await dedupe.close();
    await strict.close();
  }
  const keyMismatch = keyMismatchOf(fleet, final, dedupe, { planned: held.length, reached: heldReached });
  const faults = Object.fromEntries(FAULT_KINDS.map((k) => [k, dedupe.faultsInjected[k] + strict.faultsInjected[k]])) as Record<FaultKind, number>;
  const out: ChaosResult = {
    check: result,
    errors: fleet.errors,
    invokes: {
      workers: history.filter((e) => e.type === 'invoke' && e.worker !== 'final' && e.redelivered !== true && e.burst !== true).length,
      redelivered: history.filter((e) => e.type === 'invoke' && e.redelivered === true).length,
      burst: history.filter((e) => e.type === 'invoke' && e.burst === true).length,
      final: final.entries.filter((e) => e.type === 'invoke').length,
    },
    bursts: fleet.bursts.length,
    attempts: { dedupe: dedupe.requests.length, strict: strict.requests.length },
    lookups: dedupe.lookups + strict.lookups,
    faults,
    storeFaults: fleet.storeFaults,
    keyMismatch,
    kills: fleet.kills,
    pauses: fleet.pauses,
    aimed: fleet.aimed,
    skippedEvents: fleet.skippedEvents,
    workerStats: fleet.workerStats,
    recoveredOnRestart: fleet.recoveredOnRestart,
    takeovers: fleet.takeovers,
    finalTakeovers: final.takeovers,
    resumedInFlight: fleet.resumedInFlight,
    final: { rounds: final.rounds, resolved: final.resolved, absent: final.absent, leftLive: final.leftLive, attemptClasses: final.attemptClasses },
    collisions: countCollisions(history),
    runnerLagMs: Math.round(lag.max / 1e6),
    elapsedMs: Date.now() - startedAt,
    runDir: undefined,
    keptSchema: undefined,
  };
  if (options.keep || result.violations.length > 0 || fleet.errors.length > 0) {
    out.runDir = runDir;
    if (store.kind === 'postgres') out.keptSchema = describeStore(store);
  } else {
    rmSync(runDir, { recursive: true, force: true });
    await dropStore(store);
  }
  return out;
}
