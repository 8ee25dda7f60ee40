/**
 * An owner paused past its lease (SIGSTOP), another process takes the operation
 * over and finishes it, then the paused owner resumes (SIGCONT) with its late
 * response or its late send. Real processes, one SQLite file, the loopback
 * provider counting effects.
 *
 * At most one effect; the late write is kept as evidence (`late_response` with its status) and
 * never applied: the result stays the one the new owner wrote, and the paused
 * owner's own call answers with that result.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../src/operation/record.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import type { CrashLine, CrashWorkerConfig } from '../helpers/crash-protocol.js';
import { isStopped, killAll, readRecordOnDisk, startWorker, waitUntil, type WorkerRun } from '../helpers/crash-run.js';
import { tempDir } from '../helpers/setup.js';

const LEASE_MS = 500;
/** How long the provider holds the paused owner's response after committing. */
const HOLD_MS = 1_500;

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

function dbPath(): string {
  return join(tmp.dir, 'once.db');
}

function worker(owner: string, ref: string, extra: Partial<CrashWorkerConfig> = {}): WorkerRun {
  const run = startWorker({ dbPath: dbPath(), url: provider.url, refs: [ref], leaseMs: LEASE_MS, owner, ...extra });
  runs.push(run);
  return run;
}

async function waitStopped(run: WorkerRun): Promise<void> {
  const pid = run.child.pid!;
  await waitUntil(() => isStopped(pid) !== false, `process ${pid} to stop`);
}

function events(run: WorkerRun): Extract<CrashLine, { type: 'event' }>[] {
  return run.lines.filter((l): l is Extract<CrashLine, { type: 'event' }> => l.type === 'event');
}

/** What a late owner may add to a record: evidence, and the generation that wrote it. Nothing else. */
function expectOnlyEvidenceAdded(before: OperationRecord, after: OperationRecord, lateOwner: string): void {
  expect(after.state).toBe(before.state);
  expect(after.result).toEqual(before.result);
  expect(after.attempts).toEqual(before.attempts);
  expect(after.lease).toEqual(before.lease);
  expect(after.error).toEqual(before.error);
  expect(after.key).toBe(before.key);
  expect(after.evidence.slice(0, before.evidence.length)).toEqual(before.evidence);
  const added = after.evidence.slice(before.evidence.length);
  expect(added.length).toBeGreaterThan(0);
  for (const e of added) {
    expect(e.owner).toBe(lateOwner);
    expect(['stale_write', 'late_response']).toContain(e.kind);
  }
  // The late owner's response is kept with its status, as evidence only.
  expect(added).toContainEqual(expect.objectContaining({ kind: 'late_response', status: 201, detail: expect.stringMatching(/^late success outcome/) }));
}

describe('an owner paused past its lease', () => {
  it('paused while the provider holds its response: the late response is evidence, the takeover result stands', async () => {
    const ref = 'LP-response';
    // The response is held long enough that the pause always comes first, even on a loaded machine.
    provider.fault({ kind: 'delay_after_commit', delayMs: HOLD_MS, match: { ref } });
    const paused = worker('paused', ref);
    await waitUntil(() => provider.effects === 1, 'the provider to commit the first request');
    paused.child.kill('SIGSTOP');
    await waitStopped(paused);
    const held = readRecordOnDisk(dbPath(), ref)!;
    expect(held).toMatchObject({ state: 'in_flight', lease: { owner: 'paused' } });

    // Another process waits out the lease, takes over and settles by lookup.
    const taker = worker('taker', ref);
    expect((await taker.exited).code, taker.stderr()).toBe(0);
    const order = provider.orders[0]!;
    expect(taker.results()).toEqual([expect.objectContaining({ status: 200, orderId: order.id, replayed: false })]);
    expect(events(taker).find((e) => e.event === 'takeover')?.detail).toBe('from paused (in_flight)');
    const settled = readRecordOnDisk(dbPath(), ref)!;
    expect(settled).toMatchObject({ state: 'succeeded', lease: null, result: { source: 'lookup', status: 200 } });
    expect(settled.evidence.some((e) => e.kind === 'takeover' && e.owner === 'taker')).toBe(true);

    // The provider's 201 has been written to the paused owner's socket by now; resume it.
    await waitUntil(() => Date.now() > order.createdAt + HOLD_MS + 100, 'the held response to be sent');
    expect(isStopped(paused.child.pid!)).not.toBe(false);
    paused.child.kill('SIGCONT');
    expect((await paused.exited).code, paused.stderr()).toBe(0);

    // The late 201 was not applied; the paused owner's call answers with the takeover's result, not
    // marked as a replay (oncefetch-replayed says "this call sent nothing"; this one sent, and got its 201).
    expect(paused.results()).toEqual([expect.objectContaining({ status: 200, orderId: order.id, replayed: false })]);
    expect(events(paused).map((e) => e.event)).toContain('late_evidence');
    const final = readRecordOnDisk(dbPath(), ref)!;
    expectOnlyEvidenceAdded(settled, final, 'paused');
    expect(final.attempts).toHaveLength(1);
    expect(final.attempts[0]).toMatchObject({ owner: 'paused', finishedAt: null });

    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
    console.log(`[lease pause, late response] effects ${provider.effects}, POSTs ${provider.requests.length}, lookups ${provider.lookups}; evidence ${final.evidence.map((e) => `${e.kind}/${e.owner}`).join(', ')}`);
  });

  it('paused after the record went in_flight, before its send: the late send reuses the key, the provider replays it', async () => {
    const ref = 'LP-send';
    const paused = worker('paused', ref, { pauseAt: 'before_send' });
    await waitUntil(() => paused.lines.some((l) => l.type === 'pausing') || paused.child.exitCode !== null, 'the worker to pause');
    await waitStopped(paused);
    const held = readRecordOnDisk(dbPath(), ref)!;
    expect(held).toMatchObject({ state: 'in_flight', lease: { owner: 'paused' } });
    expect(provider.requests).toHaveLength(0);

    // The taker finds nothing at the provider and sends, with the key the paused owner minted.
    const taker = worker('taker', ref);
    expect((await taker.exited).code, taker.stderr()).toBe(0);
    const order = provider.orders[0]!;
    expect(taker.results()).toEqual([expect.objectContaining({ status: 201, orderId: order.id, replayed: false })]);
    expect(new Set(events(taker).filter((e) => e.event === 'lookup').map((e) => e.detail))).toEqual(new Set(['absent']));
    const settled = readRecordOnDisk(dbPath(), ref)!;
    expect(settled).toMatchObject({ state: 'succeeded', key: held.key, result: { source: 'attempt', status: 201 } });

    // Resumed, the paused owner sends late — same key, so the provider replays instead of acting again.
    paused.child.kill('SIGCONT');
    expect((await paused.exited).code, paused.stderr()).toBe(0);
    // (the taker's recorded 201, not marked as oncefetch's replay: this call sent)
    expect(paused.results()).toEqual([expect.objectContaining({ status: 201, orderId: order.id, replayed: false })]);
    expect(provider.requests).toHaveLength(2);
    expect(provider.requests.map((r) => r.key)).toEqual([held.key, held.key]);
    expect(provider.effects).toBe(1);

    const final = readRecordOnDisk(dbPath(), ref)!;
    expectOnlyEvidenceAdded(settled, final, 'paused');
    console.log(`[lease pause, late send] effects ${provider.effects}, POSTs ${provider.requests.length}, lookups ${provider.lookups}; evidence ${final.evidence.map((e) => `${e.kind}/${e.owner}`).join(', ')}`);
  });
});
