/**
 * `npm run chaos -- --ops N --seed S [--store sqlite|postgres]`: many operations
 * from several client processes sharing one store (an SQLite file, or a
 * PostgreSQL table in a schema made for the run: `DATABASE_URL`, else
 * postgres://postgres@127.0.0.1:5432/test), against fault-injecting providers (the one
 * that dedupes answering some refs' held keys with a key mismatch, `--key-mismatch`, and holding
 * some of those keys without an effect, `--crash-after-key`), with
 * SIGKILLs, restarts and pauses past the lease; every call is recorded and
 * checked against the providers' effect logs. Prints the totals; exits 1 on
 * any violation (printing the command that replays the seed), 2 on a bad
 * command line. SIGINT or SIGTERM stops the run: the workers are killed, the
 * PostgreSQL schema dropped and the run directory removed (unless `--keep`),
 * and it exits 128 + the signal's number (130, 143); a second signal exits at
 * once.
 *
 * @module
 */
import { constants } from 'node:os';
import { parseArgs } from 'node:util';
import { EXIT, UsageError, intFlag, numberFlag, parsing } from '../src/cli/args.js';
import type { RunPlan } from './plan.js';
import { CONFLICT_BRANCHES, type ConflictBranch } from './conflict-branches.js';
import { lacksLookup } from './plan.js';
import { runChaos, type ChaosOptions, type ChaosResult } from './runner.js';
import { STORE_FAULT_KINDS } from './store-faults.js';
import { STORE_KINDS, type StoreKind } from './store.js';

const USAGE = `usage: npm run chaos -- [--store sqlite|postgres] [--ops 2000] [--seed N] [--workers 4] [--refs ops/2] [--concurrency 8]
                      [--strict-share 0.25] [--fault-rate 0.3] [--kills ops/200] [--pauses ops/200] [--max-pause-ms 1100]
                      [--lookup-fail 0.1] [--lookup-slow 0.1] [--lookup-stale 0.1] [--key-mismatch 0.5] [--crash-after-key 0.1] [--store-faults 0] [--store-slow-ms 300] [--keep] [--json]
--key-mismatch R: the provider that dedupes answers a request whose key it holds (its replay, its 409 "in progress") with a key mismatch instead, for a share R of its refs
--crash-after-key R: for a share R of those refs, it records the key of the ref's first request and never commits it (as a provider that stores the key, then crashes before
                     the effect): the key stays held with no effect, every later request with it meets the mismatch, and a settled lookup says absent (0 with --key-mismatch 0)
--store-faults R: a fraction R of the workers' store calls fail before reaching the store, lose their acknowledgement after it, or are slow (up to --store-slow-ms)
--store postgres: DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test; a schema made for the run, dropped after it (unless --keep)`;

function storeFlag(value: string | undefined): StoreKind {
  if (value === undefined) return 'sqlite';
  const kind = STORE_KINDS.find((k) => k === value);
  if (kind === undefined) throw new UsageError(`--store must be one of ${STORE_KINDS.join(', ')} (got "${value}")`);
  return kind;
}

/** Parses the command line into the run's options. */
export function parseChaosArgs(argv: string[]): ChaosOptions & { json: boolean } {
  const { values } = parsing(() =>
    parseArgs({
      args: argv,
      options: {
        store: { type: 'string' },
        ops: { type: 'string' },
        seed: { type: 'string' },
        workers: { type: 'string' },
        refs: { type: 'string' },
        concurrency: { type: 'string' },
        'strict-share': { type: 'string' },
        'fault-rate': { type: 'string' },
        kills: { type: 'string' },
        'max-pause-ms': { type: 'string' },
        'lookup-fail': { type: 'string' },
        'lookup-slow': { type: 'string' },
        'lookup-stale': { type: 'string' },
        'key-mismatch': { type: 'string' },
        'crash-after-key': { type: 'string' },
        pauses: { type: 'string' },
        'store-faults': { type: 'string' },
        'store-slow-ms': { type: 'string' },
        keep: { type: 'boolean' },
        json: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }),
  );
  const ops = intFlag(values.ops, 'ops', 2000, 1, 10_000_000);
  const plan: RunPlan = {
    seed: intFlag(values.seed, 'seed', Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    ops,
    workers: intFlag(values.workers, 'workers', 4, 1, 64),
    refs: intFlag(values.refs, 'refs', Math.max(1, Math.ceil(ops * 0.5)), 1, 10_000_000),
    concurrency: intFlag(values.concurrency, 'concurrency', 8, 1, 256),
    strictShare: numberFlag(values['strict-share'], 'strict-share', 0.25, 0, 1),
    window: 6,
  };
  const defaultChaos = Math.max(2, Math.round(ops / 200));
  // settleMs is how long after it was sent a request may still take effect. A sender stalled
  // (SIGSTOP) between recording an attempt and writing it sends that much later, so settleMs must
  // cover the longest pause plus the provider's longest hold (holdMs), with room for the runner's
  // event-loop delay: the provider that ignores keys relies on it.
  const timing = { leaseMs: 500, settleMs: 2_000, inFlightWaitMs: 5_000, attemptTimeoutMs: 250, deadlineMs: 8_000, maxRetryAfterMs: 1_200, maxAttempts: 6 };
  const holdMs = 450;
  const maxPauseMs = intFlag(values['max-pause-ms'], 'max-pause-ms', timing.settleMs - holdMs - 450, Math.ceil(timing.leaseMs * 1.2), 60_000);
  return {
    plan,
    store: storeFlag(values.store),
    kills: intFlag(values.kills, 'kills', defaultChaos, 0, 100_000),
    pauses: intFlag(values.pauses, 'pauses', defaultChaos, 0, 100_000),
    pauseMs: { min: Math.ceil(timing.leaseMs * 1.2), max: maxPauseMs },
    faultRate: numberFlag(values['fault-rate'], 'fault-rate', 0.3, 0, 1),
    timing,
    holdMs,
    lookupFaults: {
      failRate: numberFlag(values['lookup-fail'], 'lookup-fail', 0.1, 0, 1),
      slowRate: numberFlag(values['lookup-slow'], 'lookup-slow', 0.1, 0, 1),
      staleRate: numberFlag(values['lookup-stale'], 'lookup-stale', 0.1, 0, 1),
      slowMs: 1_500,
      // up to 1.5 × settleMs: an answer to a question asked before the commit can arrive after settleMs
      staleMs: Math.floor(timing.settleMs * 1.5),
    },
    storeFaults: { rate: numberFlag(values['store-faults'], 'store-faults', 0, 0, 1), maxSlowMs: intFlag(values['store-slow-ms'], 'store-slow-ms', 300, 0, 60_000) },
    keyMismatch: numberFlag(values['key-mismatch'], 'key-mismatch', 0.5, 0, 1),
    crashAfterKey: numberFlag(values['crash-after-key'], 'crash-after-key', 0.1, 0, 1),
    keep: values.keep === true,
    json: values.json === true,
    log: (line) => console.error(line),
  };
}

/** The command that replays a run. */
export function replayCommand(plan: RunPlan, o: Pick<ChaosOptions, 'store' | 'kills' | 'pauses' | 'pauseMs' | 'faultRate' | 'lookupFaults' | 'storeFaults' | 'keyMismatch' | 'crashAfterKey'>): string {
  const l = o.lookupFaults;
  return (
    `npm run chaos -- ${o.store === 'sqlite' ? '' : `--store ${o.store} `}--ops ${plan.ops} --seed ${plan.seed} --workers ${plan.workers} --refs ${plan.refs} ` +
    `--concurrency ${plan.concurrency} --strict-share ${plan.strictShare} --fault-rate ${o.faultRate} --kills ${o.kills} --pauses ${o.pauses} --max-pause-ms ${o.pauseMs.max} ` +
    `--lookup-fail ${l.failRate} --lookup-slow ${l.slowRate} --lookup-stale ${l.staleRate} --key-mismatch ${o.keyMismatch} --crash-after-key ${o.crashAfterKey}` +
    (o.storeFaults.rate > 0 ? ` --store-faults ${o.storeFaults.rate} --store-slow-ms ${o.storeFaults.maxSlowMs}` : '')
  );
}

function row(label: string, value: string | number): string {
  return `${label.padEnd(34)} ${value}`;
}

function storeFaultsText(options: ChaosOptions, r: ChaosResult): string {
  if (options.storeFaults.rate === 0) return 'none (--store-faults 0)';
  const f = r.storeFaults;
  const kinds = STORE_FAULT_KINDS.map((k) => `${k} ${f[k] ?? 0}`).join(', ');
  const total = STORE_FAULT_KINDS.reduce((a, k) => a + (f[k] ?? 0), 0);
  const byMethod = Object.entries(f).filter(([k]) => k.includes(' ')).sort().map(([k, v]) => `${k} ${v}`).join(', ');
  return `${total} at rate ${options.storeFaults.rate}: ${kinds} (${byMethod}); slow up to ${options.storeFaults.maxSlowMs} ms`;
}

function keyMismatchText(options: ChaosOptions, r: ChaosResult): string {
  if (options.keyMismatch === 0) return 'none (--key-mismatch 0)';
  const k = r.keyMismatch;
  const instead = Object.entries(k.instead).sort().map(([what, n]) => `${what} ${n}`).join(', ') || 'nothing';
  return `${k.injected} (${Math.round(options.keyMismatch * 100)} % of its refs; instead of: ${instead}; to workers ${k.workers}, to the final recovery ${k.final})`;
}

function heldKeysText(options: ChaosOptions, r: ChaosResult): string {
  const h = r.keyMismatch.heldKeys;
  if (h.planned === 0) return `none (--crash-after-key ${options.crashAfterKey}${options.keyMismatch === 0 ? ', --key-mismatch 0' : ''})`;
  return `${h.reached} refs called (of ${h.planned} in the pool, ${Math.round(options.crashAfterKey * 100)} % of the key-mismatch refs): the key recorded, never committed, no effect (their first requests are among delay_before_commit above)`;
}

const BRANCH_NAMES: Record<ConflictBranch, string> = {
  found: 'lookup found → succeeded',
  absent: 'settled absent → failed',
  no_lookup: 'no lookup → AmbiguousOutcomeError',
  unknown: 'lookup unknown → AmbiguousOutcomeError',
  at_once: 'failed at once',
  other: 'other (deadline, lease lost)',
};

function branchesText(r: ChaosResult): string {
  const b = r.keyMismatch.branches;
  const n = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, v) => a + v, 0);
  if (n(b.all) === 0) return 'none';
  return `${CONFLICT_BRANCHES.map((k) => `${BRANCH_NAMES[k]} ${b.all[k] ?? 0}`).join(', ')} (in the workers' calls ${n(b.workers)}, the final recovery's ${n(b.final)})`;
}

function conflictEndsText(r: ChaosResult): string {
  const entries = Object.entries(r.keyMismatch.records).sort();
  if (entries.length === 0) return 'no record has a conflict attempt';
  const total = entries.reduce((a, [, v]) => a + v.records, 0);
  return `${total} records: ${entries.map(([state, v]) => `${state} ${v.records} (with an effect ${v.withEffect})`).join(', ')}`;
}

/** Which workers' clients for the provider that dedupes have no lookup (see `lacksLookup`), for the processes row. */
function lookupless(options: ChaosOptions): string {
  const ids = Array.from({ length: options.plan.workers }, (_, i) => i).filter(lacksLookup);
  return ids.length === 0 ? '' : ` (no lookup for the provider that dedupes in ${ids.map((i) => `w${i}`).join(', ')})`;
}

/** The totals, as printed. */
export function formatTotals(options: ChaosOptions, r: ChaosResult): string {
  const c = r.check;
  const faultTotal = Object.values(r.faults).reduce((a, b) => a + b, 0);
  const faults = Object.entries(r.faults).map(([k, v]) => `${k} ${v}`).join(', ');
  const s = (k: string): number => r.workerStats[k] ?? 0;
  const lines = [
    `oncefetch chaos run — seed ${options.plan.seed}`,
    row('operations (scheduled calls)', options.plan.ops),
    row('refs called', `${c.refs} (pool ${options.plan.refs}; ${Math.round(options.plan.strictShare * 100)} % to the provider that ignores keys)`),
    row('processes', `${options.plan.workers} workers × ${options.plan.concurrency} calls at a time${lookupless(options)}, ${options.store === 'sqlite' ? 'one SQLite file' : 'one PostgreSQL table'}`),
    row('invokes', `${r.invokes.workers + r.invokes.redelivered + r.invokes.burst + r.invokes.final} (workers ${r.invokes.workers}, redelivered after a kill ${r.invokes.redelivered}, bursts ${r.invokes.burst}, final recovery ${r.invokes.final})`),
    row('bursts', `${r.bursts} refs called by every live worker at once, each left unfinished by a call or a kill`),
    row('collisions', `${r.collisions} calls started while another process was calling the same ref`),
    row('attempts (POSTs at the providers)', `${r.attempts.dedupe + r.attempts.strict} (dedupes ${r.attempts.dedupe}, ignores keys ${r.attempts.strict})`),
    row('attempts recorded, by class', Object.entries(r.final.attemptClasses).sort().map(([k, v]) => `${k} ${v}`).join(', ')),
    row('lookups served', r.lookups),
    row('faults injected', `${faultTotal}: ${faults}`),
    row('store faults injected', storeFaultsText(options, r)),
    row('key mismatches (dedupe provider)', keyMismatchText(options, r)),
    row('keys held without an effect', heldKeysText(options, r)),
    row('key conflicts on a resend, by branch', branchesText(r)),
    row('records with a key conflict ended', conflictEndsText(r)),
    row('effects', c.effects),
    row('duplicates', c.duplicates),
    row('ok / fail / indeterminate', `${c.ok} / ${c.fail} / ${c.indeterminate}`),
    row('ambiguous (indeterminate) reconciled', `${c.reconciled.toOne + c.reconciled.toZero} of ${c.indeterminate} (to 1 effect: ${c.reconciled.toOne}, to 0: ${c.reconciled.toZero})`),
    row('pending (resend) with the effect landed', `${c.resendWithEffect} refs read pending after recover() whose order already existed`),
    row('final recover()', `${r.final.rounds} rounds, ${r.final.resolved} found, ${r.final.absent} absent, ${r.final.leftLive} left live`),
    row('kills (+ restarts) / pauses', `${r.kills} / ${r.pauses} of ${options.pauseMs.min}–${options.pauseMs.max} ms (lease ${options.timing.leaseMs} ms); aimed at a send ${r.aimed.onSignal} (+${r.aimed.missed} unsignalled)${r.skippedEvents > 0 ? ` (${r.skippedEvents} events found no live worker)` : ''}`),
    row('recover() on restart settled', r.recoveredOnRestart),
    row(
      'takeovers (every life)',
      `${r.takeovers.total} (of a lease of the same worker's earlier life ${r.takeovers.restart}, of its other clients ${r.takeovers.sameWorker}, ` +
        `of another worker ${r.takeovers.otherWorker}, other ${r.takeovers.other}); in_flight resumed under the same owner name ${r.resumedInFlight}`,
    ),
    row('takeovers (final recovery)', `${r.finalTakeovers.recover + r.finalTakeovers.calls} (by recover() ${r.finalTakeovers.recover}, by its calls ${r.finalTakeovers.calls}; not in the figure above)`),
    row('workers: takeovers / replays / ambiguous', `${s('takeovers')} / ${s('replays')} / ${s('ambiguous')} (finished lives only)`),
    row('runner event-loop delay (max)', `${r.runnerLagMs} ms`),
    row('elapsed', `${(r.elapsedMs / 1000).toFixed(1)} s`),
    row('violations', c.violations.length + r.errors.length),
  ];
  return lines.join('\n');
}

/** The reason a run stopped by a signal rejects with. */
class Interrupted extends Error {
  /** 128 + the signal's number, as a shell reports a process the signal ended */
  readonly exitCode: number;
  constructor(readonly signal: 'SIGINT' | 'SIGTERM') {
    super(`interrupted by ${signal}`);
    this.exitCode = 128 + constants.signals[signal];
  }
}

/** Aborts the run on the first SIGINT or SIGTERM; a second one exits at once, cleaning nothing. */
function stopOnSignals(): AbortSignal {
  const stop = new AbortController();
  for (const name of ['SIGINT', 'SIGTERM'] as const) {
    process.on(name, () => {
      const reason = new Interrupted(name);
      if (stop.signal.aborted) process.exit(reason.exitCode);
      stop.abort(reason);
    });
  }
  return stop.signal;
}

async function main(): Promise<number> {
  let options: ReturnType<typeof parseChaosArgs>;
  try {
    options = parseChaosArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n${USAGE}`);
    return EXIT.usage;
  }
  options.log(`[chaos] seed ${options.plan.seed}: ${options.plan.ops} operations, ${options.plan.workers} workers, ${options.plan.refs} refs`);
  if (options.pauseMs.max + options.holdMs > options.timing.settleMs) {
    options.log(
      `[chaos] warning: pauses up to ${options.pauseMs.max} ms plus the provider's ${options.holdMs} ms hold exceed settleMs (${options.timing.settleMs}): ` +
        'a sender paused before its send may create a second effect at the provider that ignores keys, which no client can prevent',
    );
  }
  let result: ChaosResult;
  try {
    result = await runChaos({ ...options, signal: stopOnSignals() });
  } catch (error) {
    if (!(error instanceof Interrupted)) throw error;
    const cleaned = options.keep ? 'run kept (--keep)' : `${options.store === 'postgres' ? 'schema dropped, ' : ''}run directory removed`;
    options.log(`[chaos] ${error.message}: workers killed, ${cleaned}`);
    // (exit now: a step that did not stop in time must not keep the process alive)
    process.exit(error.exitCode);
  }
  console.log(formatTotals(options, result));
  const failed = result.check.violations.length > 0 || result.errors.length > 0;
  if (failed) {
    for (const e of result.errors) console.log(`ERROR ${e}`);
    for (const v of result.check.violations.slice(0, 30)) console.log(`VIOLATION ${v.kind} ${v.ref}${v.op === undefined ? '' : ` op ${v.op}`}: ${v.detail}`);
    if (result.check.violations.length > 30) console.log(`… ${result.check.violations.length - 30} more`);
    console.log(`FAILED with seed ${options.plan.seed}; replay: ${replayCommand(options.plan, options)}`);
  }
  if (result.runDir !== undefined) console.log(`run directory (${options.store === 'sqlite' ? 'database, ' : ''}history.jsonl, effects.json): ${result.runDir}`);
  if (result.keptSchema !== undefined) console.log(`records kept in ${result.keptSchema} (drop the schema when done)`);
  if (options.json) {
    const { check, ...rest } = result;
    console.log(JSON.stringify({ seed: options.plan.seed, plan: options.plan, ...rest, check: { ...check, violations: check.violations.slice(0, 100) } }));
  }
  return failed ? EXIT.failure : EXIT.ok;
}

process.exitCode = await main();
