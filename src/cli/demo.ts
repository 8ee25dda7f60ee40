/**
 * `oncefetch demo`: the same orders twice through a fault-injecting loopback
 * provider — a naive client (p-retry around fetch, a new key per attempt,
 * nothing persisted) and oncefetch on SQLite — each with one real crash and
 * restart, then the business effects side by side. Exit 1 if oncefetch
 * produced a duplicate.
 *
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sqliteStore } from '../stores/sqlite.js';
import { startProvider } from '../testing/provider.js';
import type { Provider } from '../testing/provider.js';
import { EXIT, UsageError, intFlag, numberFlag, parseFlags } from './args.js';
import type { CrashRecovery, PhaseOutcome } from './demo-clients.js';
import { runNaive, runOnce } from './demo-clients.js';
import type { CrashReport } from './demo-crash.js';
import { crashWorker } from './demo-crash.js';
import { DEMO_FAULTS, DEMO_FAULT_NAMES, orderRef } from './demo-orders.js';
import type { DemoFaultName } from './demo-orders.js';
import type { CliIo } from './format.js';
import { createProgress, duration, json, table } from './format.js';
import { urlScheme } from '../node-defaults.js';

export const DEMO_HELP = `Usage: oncefetch demo [--orders N] [--concurrency C] [--faults LIST] [--rate R] [--seed S] [--store PATH] [--json]

Starts the bundled fault-injecting provider on 127.0.0.1 and places the same
orders twice: through a naive client (p-retry around fetch, a new idempotency
key per attempt, nothing persisted) and through oncefetch on SQLite. Before
each run, a worker process sends order-1, the provider commits it and holds the
answer, and the worker is SIGKILLed: the run that follows is the restart.
The provider counts business effects (orders created); the table compares them.

  --orders N         logical orders (default 50)
  --concurrency C    orders in flight at once (default 8)
  --faults LIST      comma-separated mix (default all): ${DEMO_FAULT_NAMES.join(', ')}
                       drop      commit, then drop the connection
                       delay     commit, then answer after the client's timeout
                       error500  commit, then answer 500
                       503, 429  refuse with Retry-After: 1 (nothing committed)
                       reset     reset the connection (nothing committed)
  --rate R           share of requests that get a fault, 0..1 (default 0.3)
  --seed S           seed of the fault sequence (default 1)
  --store PATH       keep oncefetch's records in this SQLite file (default: a temporary file)
  --json             machine-readable result on stdout

Exit code: 0, or 1 if oncefetch produced a duplicate (the naive client's duplicates are expected).
`;

interface DemoSettings {
  orders: number;
  concurrency: number;
  faults: DemoFaultName[];
  rate: number;
  seed: number;
  store: string | undefined;
  json: boolean;
}

/** One client's line in the comparison. */
export interface Tally {
  client: string;
  operations: number;
  /** POSTs the provider received, the crashed worker's included */
  attempts: number;
  faults: number;
  lookups: number;
  replays: number;
  conflicts: number;
  takeovers: number;
  failedCalls: number;
  effects: number;
  duplicates: number;
  /** orders with no effect at all */
  notPlaced: number;
  elapsedMs: number;
  errors: Record<string, number>;
}

function parseFaults(value: string | undefined): DemoFaultName[] {
  if (value === undefined || value.trim() === 'all') return [...DEMO_FAULT_NAMES];
  const names = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const name of names) {
    if (!(DEMO_FAULT_NAMES as readonly string[]).includes(name)) throw new UsageError(`--faults: unknown fault "${name}" (one of ${DEMO_FAULT_NAMES.join(', ')})`);
  }
  if (names.length === 0) throw new UsageError('--faults: name at least one fault, or use --rate 0');
  return [...new Set(names)] as DemoFaultName[];
}

function settingsOf(args: string[]): DemoSettings & { help: boolean } {
  const { values, positionals } = parseFlags({
    args,
    options: {
      orders: { type: 'string' },
      concurrency: { type: 'string' },
      faults: { type: 'string' },
      rate: { type: 'string' },
      seed: { type: 'string' },
      store: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0] ?? ''}"`);
  const scheme = values.store === undefined ? undefined : urlScheme(values.store);
  if (scheme !== undefined) throw new UsageError(`--store takes an SQLite file path: the demo keeps its records in SQLite only (got ${scheme}://…)`);
  return {
    orders: intFlag(values.orders, 'orders', 50, 1, 10_000),
    concurrency: intFlag(values.concurrency, 'concurrency', 8, 1, 256),
    faults: parseFaults(values.faults),
    rate: numberFlag(values.rate, 'rate', 0.3, 0, 1),
    seed: intFlag(values.seed, 'seed', 1, -(2 ** 31), 2 ** 32 - 1),
    store: values.store === undefined ? undefined : resolve(values.store),
    json: values.json,
    help: values.help,
  };
}

function tally(client: string, provider: Provider, n: number, phase: PhaseOutcome, counters: Pick<Tally, 'lookups' | 'replays' | 'conflicts' | 'takeovers'>): Tally {
  let duplicates = 0;
  let notPlaced = 0;
  for (let i = 1; i <= n; i++) {
    const effects = provider.effectsFor(orderRef(i));
    duplicates += Math.max(0, effects - 1);
    if (effects === 0) notPlaced++;
  }
  const faults = Object.values(provider.faultsInjected).reduce((a, b) => a + b, 0);
  return {
    client,
    operations: n,
    attempts: provider.requests.length,
    faults,
    ...counters,
    failedCalls: phase.failed,
    effects: provider.effects,
    duplicates,
    notPlaced,
    elapsedMs: phase.elapsedMs,
    errors: phase.errors,
  };
}

const ROWS: readonly [string, (t: Tally) => number][] = [
  ['logical operations', (t) => t.operations],
  ['attempts (POSTs received)', (t) => t.attempts],
  ['faults injected', (t) => t.faults],
  ['lookups', (t) => t.lookups],
  ['replays', (t) => t.replays],
  ['conflicts', (t) => t.conflicts],
  ['takeovers after the crash', (t) => t.takeovers],
  ['failed calls', (t) => t.failedCalls],
  ['business effects', (t) => t.effects],
  ['duplicates', (t) => t.duplicates],
  ['orders never placed', (t) => t.notPlaced],
];

function crashLine(label: string, crash: CrashReport, after: string): string {
  if (crash.problem !== null) return `crash (${label}): not simulated: ${crash.problem}`;
  return `crash (${label}): worker pid ${crash.pid ?? '?'} SIGKILLed after the provider committed order-1 and before it answered; ${after}`;
}

function recoveryText(r: CrashRecovery, effects: number): string {
  const steps = [r.waited ? 'waited for its lease' : null, r.tookOver ? 'took the lease over' : null, r.lookup === null ? null : `lookup → ${r.lookup}`]
    .filter((s) => s !== null)
    .join(' → ');
  return `the restarted client ${steps === '' ? 'resumed it' : steps} (record ${r.state ?? '?'}, ${r.ref}: ${effects} effect${effects === 1 ? '' : 's'})`;
}

/** The human report. */
function report(s: DemoSettings, naive: Tally, once: Tally, lines: string[]): string {
  const body = table(
    [{ header: '' }, { header: naive.client, align: 'right' }, { header: once.client, align: 'right' }],
    ROWS.map(([label, get]) => [label, String(get(naive)), String(get(once))]),
  );
  const verdict =
    once.duplicates === 0
      ? `oncefetch: ${once.effects} effects for ${s.orders} orders, 0 duplicates. naive: ${naive.duplicates} duplicate${naive.duplicates === 1 ? '' : 's'} (a new key per attempt: the provider cannot tell a retry from a new order).`
      : `FAIL: oncefetch produced ${once.duplicates} duplicate(s).`;
  return [
    `oncefetch demo: ${s.orders} orders, concurrency ${s.concurrency}, faults ${s.faults.join(',')} at rate ${s.rate}, seed ${s.seed}`,
    '',
    body,
    ...lines,
    `time: naive ${duration(naive.elapsedMs)}, oncefetch ${duration(once.elapsedMs)}`,
    '',
    verdict,
    '',
  ].join('\n');
}

/** Runs `oncefetch demo`. */
export async function demoCommand(args: string[], io: CliIo): Promise<number> {
  const { help, ...s } = settingsOf(args);
  if (help) {
    io.out(DEMO_HELP);
    return EXIT.ok;
  }
  const tenant = `demo-${globalThis.crypto.randomUUID().slice(0, 8)}`;
  const tmp = s.store === undefined ? mkdtempSync(join(tmpdir(), 'oncefetch-demo-')) : undefined;
  const storePath = s.store ?? join(tmp ?? '.', 'oncefetch.db');
  const crashRef = orderRef(1);
  // One provider per run, from the same seed (the same fault sequence). Not one provider reset between
  // the runs: a naive request it had not read yet when its call gave up would be read after the reset
  // and counted as an effect of the oncefetch run.
  const start = (): Promise<Provider> => startProvider({ randomFaults: { seed: s.seed, rate: s.rate, kinds: s.faults.map((f) => ({ ...DEMO_FAULTS[f] })) } });
  let naiveProvider: Provider | undefined;
  let provider: Provider | undefined;
  try {
    // Fail before the naive run, not after it, when the store cannot open (e.g. better-sqlite3 not installed).
    await sqliteStore({ path: storePath }).close();
    naiveProvider = await start();
    const naiveCrash = await crashWorker(naiveProvider, crashRef, ['--client', 'naive', '--url', naiveProvider.url, '--index', '1']);
    const naiveBar = createProgress(io, 'naive     ', s.orders);
    const naivePhase = await runNaive(naiveProvider.url, s.orders, s.concurrency, naiveBar.tick);
    naiveBar.done();
    const naive = tally('naive (p-retry + fetch)', naiveProvider, s.orders, naivePhase, { lookups: 0, replays: 0, conflicts: 0, takeovers: 0 });
    const naiveCrashEffects = naiveProvider.effectsFor(crashRef);
    const closing = naiveProvider;
    naiveProvider = undefined;
    await closing.close(); // its late requests, and the crashed worker's held one, end here

    provider = await start(); // the same fault sequence again, from the seed
    const onceCrash = await crashWorker(provider, crashRef, ['--client', 'once', '--url', provider.url, '--index', '1', '--db', storePath, '--tenant', tenant, '--lease-ms', '400']);
    const onceBar = createProgress(io, 'oncefetch ', s.orders);
    const oncePhase = await runOnce(provider.url, storePath, tenant, s.orders, s.concurrency, crashRef, onceBar.tick);
    onceBar.done();
    const { stats } = oncePhase;
    const once = tally('oncefetch (SQLite)', provider, s.orders, oncePhase, {
      lookups: stats.lookups,
      replays: stats.replays,
      conflicts: stats.conflicts,
      takeovers: stats.takeovers,
    });
    const onceCrashEffects = provider.effectsFor(crashRef);

    const ok = once.duplicates === 0;
    if (s.json) {
      io.out(json({
        settings: { ...s, store: s.store ?? null },
        tenant,
        naive: { ...naive, crash: { ...naiveCrash, ref: crashRef, effects: naiveCrashEffects } },
        oncefetch: { ...once, crash: { ...onceCrash, ref: crashRef, effects: onceCrashEffects, recovery: oncePhase.recovery } },
        ok,
      }));
    } else {
      const lines = [
        crashLine('naive', naiveCrash, `the restarted client sent it again with a new key (${crashRef}: ${naiveCrashEffects} effects)`),
        crashLine('oncefetch', onceCrash, recoveryText(oncePhase.recovery, onceCrashEffects)),
      ];
      const errors = Object.entries(once.errors).map(([code, count]) => `${code} ×${count}`);
      if (errors.length > 0) lines.push(`oncefetch calls that failed (none resent blindly): ${errors.join(', ')}`);
      if (s.store !== undefined) lines.push(`records kept in ${s.store}, tenant ${tenant}: oncefetch inspect --store ${s.store} --tenant ${tenant}`);
      io.out(report(s, naive, once, lines));
    }
    for (const [label, crash] of [['naive', naiveCrash], ['oncefetch', onceCrash]] as const) {
      if (crash.problem !== null) io.err(`oncefetch demo: warning: the ${label} crash was not simulated: ${crash.problem}\n`);
    }
    return ok ? EXIT.ok : EXIT.failure;
  } finally {
    await naiveProvider?.close();
    await provider?.close();
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
  }
}
