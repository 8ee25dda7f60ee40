/**
 * A fleet on one PostgreSQL database: four worker processes, each with its own
 * pool (stand-ins for machines), call the same 50 refs against a provider that
 * delays and fails at random. One worker is killed with SIGKILL while it holds
 * a lease on an attempt the provider is still processing; the survivors take
 * its operations over once its lease expires. A final recovery worker settles
 * anything left. Effects are counted at the provider: exactly one per ref.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { recordId, type OperationRecord } from '../../src/operation/record.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { startProvider, type Fault, type Provider } from '../../src/testing/provider.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';
import { FLEET_ACTION, type FleetLine, type FleetWorkerConfig } from '../helpers/postgres-fleet-protocol.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER = fileURLToPath(new URL('../helpers/postgres-fleet-worker.ts', import.meta.url));
const REFS = Array.from({ length: 50 }, (_, i) => `F-${String(i).padStart(2, '0')}`);
/**
 * The victim calls this ref eleventh and is killed once its request is at the provider, which
 * holds it before commit: the victim dies holding the lease on an in-flight record whose request
 * will still take effect.
 */
const HELD_REF = 'F-07';
const LEASE_MS = 1_000;
const WORKER_TIMEOUT_MS = 45_000;

const RANDOM_FAULTS: Fault[] = [
  { kind: 'drop_after_commit' },
  { kind: 'delay_after_commit', delayMs: 600 },
  { kind: 'error_after_commit' },
  { kind: 'status_before_commit', status: 503, retryAfter: '0' },
  { kind: 'reset_before_commit' },
  { kind: 'delay_before_commit', delayMs: 600 },
];

interface Run {
  child: ChildProcess;
  lines: FleetLine[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
}

function startWorker(config: FleetWorkerConfig, onLine: (line: FleetLine) => void = () => undefined): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: FleetLine[] = [];
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    const line = JSON.parse(text) as FleetLine;
    lines.push(line);
    onLine(line);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), WORKER_TIMEOUT_MS);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal });
    }),
  );
  return { child, lines, exited, stderr: () => stderr };
}

describeWithPostgres('PostgreSQL fleet', (url) => {
  const schema = freshSchemaName();
  let admin: pg.Pool;
  let provider: Provider;
  const runs: Run[] = [];

  beforeAll(async () => {
    admin = adminPool(url);
    provider = await startProvider({
      processingMs: 30,
      randomFaults: { seed: 20261129, rate: 0.35, kinds: RANDOM_FAULTS },
    });
  });
  afterAll(async () => {
    for (const run of runs) if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await Promise.all(runs.map((r) => r.exited));
    await provider.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it('4 processes, 50 refs, random faults, one SIGKILL mid-run: exactly 50 effects and one order per ref', { timeout: 90_000 }, async () => {
    const started = performance.now();
    // The victim's request for HELD_REF is held 2 s before commit: the record is in flight under the
    // victim's live lease when it is killed, so only a takeover by another process can finish it, and
    // the takeover must not create a second order when the held request commits after it.
    provider.fault({ kind: 'delay_before_commit', delayMs: 2_000, match: { ref: HELD_REF } });
    const config = (worker: string, seed: number, extra: Partial<FleetWorkerConfig> = {}): FleetWorkerConfig => ({
      worker,
      databaseUrl: url,
      schema,
      providerUrl: provider.url,
      refs: REFS,
      first: [],
      last: [HELD_REF],
      seed,
      concurrency: 3,
      leaseMs: LEASE_MS,
      ...extra,
    });

    let killedAt: FleetLine | undefined;
    let heldRequestArrived = false;
    let victimHeld = 0;
    const victimFirst = ['F-03', 'F-11', 'F-19', 'F-27', 'F-31', 'F-35', 'F-39', 'F-42', 'F-45', 'F-48', HELD_REF];
    const victim = startWorker(config('w0', 1, { first: victimFirst, last: [] }), (line) => {
      if (line.type === 'attempt_started' && line.ref === HELD_REF && ++victimHeld === 1) {
        killedAt = line;
        // Survivors call HELD_REF last, so the first request for it is the victim's.
        void (async () => {
          const until = performance.now() + 1_500;
          while (!(heldRequestArrived = provider.requests.some((r) => r.ref === HELD_REF)) && performance.now() < until) {
            await new Promise((done) => setTimeout(done, 5));
          }
          victim.child.kill('SIGKILL');
        })();
      }
    });
    runs.push(victim);
    const survivors = [2, 3, 4].map((seed) => startWorker(config(`w${seed - 1}`, seed)));
    runs.push(...survivors);

    const victimExit = await victim.exited;
    expect(killedAt, `the victim ended before it was killed: ${victim.stderr()}`).toBeDefined();
    expect(victimExit.signal).toBe('SIGKILL');
    expect(heldRequestArrived, 'the victim was killed with its request at the provider').toBe(true);
    for (const s of survivors) expect((await s.exited).code, s.stderr()).toBe(0);
    const fleetMs = performance.now() - started;

    // Whatever a worker gave up on (a wait that ran out, say) is settled by one more worker.
    const recovery = startWorker(config('recovery', 99, { last: [], concurrency: 5 }));
    runs.push(recovery);
    expect((await recovery.exited).code, recovery.stderr()).toBe(0);

    const all = runs.flatMap((r) => r.lines);
    const log = process.env['ONCEFETCH_FLEET_LOG'];
    if (log !== undefined) writeFileSync(log, all.map((l) => JSON.stringify(l)).join('\n'));
    const results = all.filter((l): l is Extract<FleetLine, { type: 'result' }> => l.type === 'result');
    const errors = all.filter((l): l is Extract<FleetLine, { type: 'error' }> => l.type === 'error');
    const takeovers = all.filter((l): l is Extract<FleetLine, { type: 'takeover' }> => l.type === 'takeover');

    // Exactly one business effect per ref, and every worker that got an answer got that order.
    expect(provider.effects).toBe(REFS.length);
    for (const ref of REFS) {
      expect(provider.effectsFor(ref), ref).toBe(1);
      const orderId = provider.orders.find((o) => o.ref === ref)?.id;
      const seen = new Set(results.filter((r) => r.ref === ref).map((r) => r.orderId));
      expect([...seen], `order ids returned for ${ref}`).toEqual([orderId]);
    }
    for (const r of results) expect([200, 201]).toContain(r.status);
    const recovered = recovery.lines.filter((l) => l.type === 'result');
    expect(recovered).toHaveLength(REFS.length);

    // The operation the victim died holding was taken over by another process, after its lease ran out.
    const fromVictim = takeovers.filter((t) => t.previousOwner === 'w0');
    expect(fromVictim.map((t) => t.ref)).toContain(HELD_REF);
    const store = postgresStore({ connectionString: url, schema });
    try {
      const held = (await store.get(recordId({ tenant: 'fleet', action: FLEET_ACTION, ref: HELD_REF }))) as OperationRecord;
      expect(held.state).toBe('succeeded');
      expect(held.evidence.some((e) => e.kind === 'takeover' && e.detail.includes('from w0'))).toBe(true);
      const records = await store.list({ limit: 1_000 });
      expect(records.map((r) => r.state)).toEqual(Array(REFS.length).fill('succeeded'));
    } finally {
      await store.close();
    }

    const byKind = provider.faultsInjected;
    console.log(
      `[postgres fleet] ${Math.round(fleetMs)} ms for 4 workers (+ recovery ${Math.round(performance.now() - started - fleetMs)} ms); ` +
        `effects ${provider.effects}/${REFS.length}; ${provider.requests.length} POSTs, ${provider.lookups} lookups; ` +
        `${results.length} results, ${errors.length} errors (${[...new Set(errors.map((e) => e.code))].join(', ') || 'none'}); ` +
        `${takeovers.length} takeovers (${fromVictim.length} from the killed worker); faults ${JSON.stringify(byKind)}`,
    );
    for (const e of errors) console.log(`[postgres fleet] ${e.worker} ${e.ref}: ${e.code}: ${e.message}`);
  });
});
