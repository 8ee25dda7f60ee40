/**
 * SIGKILL at each crash point of a call, then a restart: a new process on the
 * same SQLite file calls again with the same ref. Real processes, a real file,
 * the real loopback provider; effects are counted at the provider.
 *
 * For every crash point: at most one effect at any time, exactly one once the
 * restarted call succeeds, the restarted call returns the provider's original
 * order, and every request the provider saw carried the one key minted before
 * the crash.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../src/operation/record.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import type { CrashLine, CrashPoint, CrashWorkerConfig } from '../helpers/crash-protocol.js';
import { killAll, readRecordOnDisk, startWorker, waitUntil, type WorkerRun } from '../helpers/crash-run.js';
import { tempDir } from '../helpers/setup.js';

/** Short, so the restarted process takes the dead owner's lease over within the test. */
const LEASE_MS = 500;

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const runs: WorkerRun[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  try {
    await killAll(runs);
    await provider.close();
  } finally {
    tmp.cleanup();
  }
});

function worker(owner: string, ref: string, crashAt?: CrashPoint): WorkerRun {
  const config: CrashWorkerConfig = { dbPath: join(tmp.dir, 'once.db'), url: provider.url, refs: [ref], leaseMs: LEASE_MS, owner };
  if (crashAt !== undefined) config.crashAt = crashAt;
  const run = startWorker(config);
  runs.push(run);
  return run;
}

interface Case {
  name: string;
  ref: string;
  /**
   * Self-inflicted crash point, or the test kills the worker while the provider holds the request:
   * `committed` once the provider created the order (and holds the response), `received` once
   * the request arrived (the provider still processing it, not committed yet).
   */
  crash: CrashPoint | { killWhen: 'committed' | 'received' };
  /** a provider that ignores keys: only the lookup stands between a resend and a second effect */
  ignoreKeys?: boolean;
  /** the record on disk after the crash: undefined = none */
  stateAfterCrash: OperationRecord['state'] | undefined;
  /** provider effects and POSTs when the worker died */
  atCrash: { effects: 0 | 1; posts: 0 | 1 };
  /** how the restarted call settled: a fresh send (201) or a lookup that found the order (200) */
  restart: { status: 201 | 200; lookup: 'found' | 'absent' | undefined; posts: number };
}

const CASES: Case[] = [
  {
    name: '(a) before the record is durable',
    ref: 'CP-a',
    crash: 'before_claim',
    stateAfterCrash: undefined,
    atCrash: { effects: 0, posts: 0 },
    restart: { status: 201, lookup: undefined, posts: 1 },
  },
  {
    name: '(b) after the record is durable, before any byte is sent',
    ref: 'CP-b',
    crash: 'before_send',
    stateAfterCrash: 'in_flight',
    atCrash: { effects: 0, posts: 0 },
    restart: { status: 201, lookup: 'absent', posts: 1 },
  },
  {
    name: '(c) after the provider committed, before the response',
    ref: 'CP-c',
    crash: { killWhen: 'committed' },
    stateAfterCrash: 'in_flight',
    atCrash: { effects: 1, posts: 1 },
    restart: { status: 200, lookup: 'found', posts: 1 },
  },
  {
    name: "(c') after the request was sent, the provider still processing it, keys ignored",
    ref: 'CP-c2',
    crash: { killWhen: 'received' },
    ignoreKeys: true,
    stateAfterCrash: 'in_flight',
    atCrash: { effects: 0, posts: 1 },
    restart: { status: 200, lookup: 'found', posts: 1 },
  },
  {
    name: '(d) after the response, before the result is persisted',
    ref: 'CP-d',
    crash: 'after_response',
    stateAfterCrash: 'in_flight',
    atCrash: { effects: 1, posts: 1 },
    restart: { status: 200, lookup: 'found', posts: 1 },
  },
  {
    name: '(e) inside the store transaction that writes the result',
    ref: 'CP-e',
    crash: 'in_result_transaction',
    stateAfterCrash: 'in_flight',
    atCrash: { effects: 1, posts: 1 },
    restart: { status: 200, lookup: 'found', posts: 1 },
  },
];

describe('SIGKILL at each crash point, then a restart on the same SQLite file and ref', () => {
  it.each(CASES)('$name: at most one effect, exactly one after the restart, the original order', async (c) => {
    const dbPath = join(tmp.dir, 'once.db');
    const crashAt = typeof c.crash === 'string' ? c.crash : undefined;
    if (c.ignoreKeys === true) {
      await provider.close();
      provider = await startProvider({ ignoreKeys: true });
    }
    if (typeof c.crash === 'object') {
      // committed: the provider commits at once, then holds the response for 10 s;
      // received: it holds the request 3 s before committing (the dead client's request still commits).
      provider.fault(
        c.crash.killWhen === 'committed'
          ? { kind: 'delay_after_commit', delayMs: 10_000, match: { ref: c.ref } }
          : { kind: 'delay_before_commit', delayMs: 3_000, match: { ref: c.ref } },
      );
    }
    const first = worker('crashed', c.ref, crashAt);
    if (typeof c.crash === 'object') {
      const when = c.crash.killWhen;
      const reached = (): boolean => (when === 'committed' ? provider.effects === 1 : provider.requests.length === 1);
      await waitUntil(() => reached() || first.child.exitCode !== null, `the provider: request ${when}`);
      first.child.kill('SIGKILL');
    }
    const died = await first.exited;
    expect(died.signal, first.stderr()).toBe('SIGKILL');
    expect(first.results(), 'the crashed worker never answered').toEqual([]);
    if (crashAt !== undefined) {
      expect(first.lines.find((l) => l.type === 'crashing')).toMatchObject({ at: crashAt, ref: c.ref });
    }

    // At the crash: at most one effect, and the state the crash point implies is on disk.
    expect(provider.effects).toBe(c.atCrash.effects);
    expect(provider.requests).toHaveLength(c.atCrash.posts);
    const onDisk = readRecordOnDisk(dbPath, c.ref);
    expect(onDisk?.state).toBe(c.stateAfterCrash);
    if (onDisk !== undefined) {
      expect(onDisk.lease?.owner).toBe('crashed');
      expect(onDisk.attempts).toHaveLength(1);
      expect(onDisk.attempts[0]?.finishedAt).toBeNull();
      expect(onDisk.result).toBeNull();
    }
    if (crashAt === 'in_result_transaction') {
      // The uncommitted transaction really reached the disk (WAL frames without a commit)...
      const crashing = first.lines.find((l): l is Extract<CrashLine, { type: 'crashing' }> => l.type === 'crashing');
      expect(crashing?.walBytesInTransaction ?? 0).toBeGreaterThan(crashing?.walBytesBefore ?? 0);
      // ...and is invisible: the pre-transaction record, not the tampered one.
      expect(JSON.stringify(onDisk)).not.toContain('padding');
    }

    const restarted = worker('restarted', c.ref);
    const done = await restarted.exited;
    expect(done.code, restarted.stderr()).toBe(0);
    expect(restarted.errors()).toEqual([]);
    const [result] = restarted.results();

    // Exactly one effect, and the restarted call returns the provider's original order.
    expect(provider.effects).toBe(1);
    expect(provider.effectsFor(c.ref)).toBe(1);
    const order = provider.orders[0]!;
    expect(result).toMatchObject({ ref: c.ref, status: c.restart.status, orderId: order.id, replayed: false });
    expect(result?.orderId).not.toBe('ord_UNCOMMITTED');

    // One key, minted before the crash (when the record was durable), on every request the provider saw.
    const final = readRecordOnDisk(dbPath, c.ref)!;
    expect(final.state).toBe('succeeded');
    expect(final.key).toBe(onDisk?.key ?? final.key);
    expect(provider.requests).toHaveLength(c.restart.posts);
    expect(provider.requests.map((r) => r.key)).toEqual(Array(c.restart.posts).fill(final.key));
    expect(order.key).toBe(final.key);
    const body = JSON.parse(Buffer.from(final.result!.body, 'base64').toString('utf8')) as { id: string };
    expect(body.id).toBe(order.id);

    // The restart took the dead owner's lease over and reconciled before any resend.
    const events = restarted.lines.filter((l): l is Extract<CrashLine, { type: 'event' }> => l.type === 'event');
    if (onDisk === undefined) {
      expect(events.map((e) => e.event)).not.toContain('takeover');
    } else {
      expect(events.find((e) => e.event === 'takeover')?.detail).toBe('from crashed (in_flight)');
      expect(final.evidence.some((e) => e.kind === 'takeover' && e.owner === 'restarted')).toBe(true);
    }
    const lookups = events.filter((e) => e.event === 'lookup').map((e) => e.detail);
    expect(new Set(lookups)).toEqual(new Set(c.restart.lookup === undefined ? [] : [c.restart.lookup]));
    console.log(
      `[crash ${c.name}] effects at crash ${c.atCrash.effects} (POSTs ${c.atCrash.posts}), after restart ${provider.effects}; ` +
        `POSTs ${provider.requests.length}, lookups ${provider.lookups}; restarted status ${result?.status} order ${result?.orderId}`,
    );
  });
});
