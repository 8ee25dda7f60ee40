/**
 * The chaos run's last step, once every worker has exited: a fresh client
 * (well-behaved lookups, `providerDedupes: false`) runs `recover()` until no
 * record is left `in_flight` or `ambiguous`, reads what the record of every
 * ref that had an indeterminate call claims (`reconciled` entries), then calls
 * each of those refs again (up to 10 calls, until one returns) so that
 * operations put back to `pending` by an "absent" lookup complete, and reads
 * them once more.
 *
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreError, createClient } from '../src/index.js';
import type { LookupFn, OperationRecord } from '../src/index.js';
import { defaultFetch } from '../src/node-defaults.js';
import { claimOf, orderIdOf, placeOrder } from './call.js';
import { conflictBranches } from './conflict-branches.js';
import type { HistoryEntry, ReconciledEntry } from './history.js';
import { mismatchingTransport } from './key-mismatch.js';
import { DEDUPE_ACTION, STRICT_ACTION, isStrict, type RunPlan } from './plan.js';
import type { ClientTiming } from './protocol.js';
import { openStore, type StoreSpec } from './store.js';

/** What the final recovery needs. */
export interface FinalInput {
  store: StoreSpec;
  dedupeUrl: string;
  strictUrl: string;
  timing: ClientTiming;
  /** the workers' history: which refs had an indeterminate call */
  history: readonly HistoryEntry[];
  /** the first operation number free for the final calls */
  firstOp: number;
  /** the run was interrupted: stop at the next step, leaving the store closed (see `runChaos`) */
  signal?: AbortSignal | undefined;
  plan: RunPlan;
  /** the provider that dedupes answers the final calls' held keys with a key mismatch as it does the workers' (see `key-mismatch.ts`) */
  keyMismatch: number;
}

/** What it did. */
export interface FinalReport {
  entries: HistoryEntry[];
  /** `recover()` rounds until nothing was left in flight or ambiguous */
  rounds: number;
  /** records recover() settled as found / put back to pending */
  resolved: number;
  absent: number;
  /** records still in flight or ambiguous after the last round */
  leftLive: number;
  /** every attempt recorded in the store at the end, by class (`retryable 409` apart) */
  attemptClasses: Record<string, number>;
  /** key mismatches injected in the final calls' answers, by what they replaced */
  keyMismatch: Record<string, number>;
  /** every record at the end with an attempt answered by a key conflict: its ref and state */
  conflicted: { ref: string; state: string }[];
  /** how the key conflicts on a resend that the final calls got ended in those calls, by branch (see `conflict-branches.ts`) */
  conflictBranches: Record<string, number>;
  /** leases the final client took over (the workers' takeovers are counted apart, by the fleet): by its `recover()` rounds, by its calls */
  takeovers: { recover: number; calls: number };
}

function lookupByRef(baseUrl: string): LookupFn {
  return async ({ scope, signal }) => {
    const res = await fetch(`${baseUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    if (res.status === 404) return null;
    if (res.status !== 200) throw new Error(`lookup answered ${res.status}`);
    return res;
  };
}

function storedOrderId(record: OperationRecord | undefined): string | null {
  const result = record?.result;
  if (result === null || result === undefined) return null;
  return orderIdOf(result.kind === 'response' ? Buffer.from(result.body, 'base64').toString('utf8') : result.body);
}

/**
 * `read` again (up to 5 tries, 200 ms apart) when the store fails: the final recovery's store has
 * no injected faults, but a real failure (a busy database) should not crash the runner.
 */
async function retried<T>(read: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await read();
    } catch (error) {
      if (!(error instanceof StoreError) || tries >= 5) throw error;
      await sleep(200);
    }
  }
}

/** Runs recover() to a fixed point, reads the truth, calls the indeterminate refs again. */
export async function finalRecovery(input: FinalInput): Promise<FinalReport> {
  const t = input.timing;
  const report: FinalReport = { entries: [], rounds: 0, resolved: 0, absent: 0, leftLive: 0, attemptClasses: {}, keyMismatch: {}, conflicted: [], conflictBranches: {}, takeovers: { recover: 0, calls: 0 } };
  /** what the final client is doing, for its takeovers: its `recover()` rounds, then its calls */
  let phase: keyof FinalReport['takeovers'] = 'recover';
  const branch = conflictBranches((b) => (report.conflictBranches[b] = (report.conflictBranches[b] ?? 0) + 1));
  // Every worker is gone: wait until their leases ran out and their last sends can no longer land.
  await sleep(Math.max(t.leaseMs, t.settleMs) + 300, undefined, { signal: input.signal });
  input.signal?.throwIfAborted();
  // Never the workers' store faults: this is the truth the checker reads.
  const client = createClient({
    store: openStore(input.store),
    owner: 'final',
    fetch: mismatchingTransport(defaultFetch(), input.dedupeUrl, input.plan, input.keyMismatch, (instead) => {
      report.keyMismatch[instead] = (report.keyMismatch[instead] ?? 0) + 1;
    }),
    leaseMs: t.leaseMs,
    settleMs: t.settleMs,
    inFlightWaitMs: t.inFlightWaitMs,
    providerDedupes: false,
    telemetry: false,
    retry: { maxAttempts: 8, baseDelayMs: 20, maxDelayMs: 300, attemptTimeoutMs: t.attemptTimeoutMs, deadlineMs: 4 * t.deadlineMs, maxRetryAfterMs: t.maxRetryAfterMs, budget: false },
    lookups: { [DEDUPE_ACTION]: lookupByRef(input.dedupeUrl), [STRICT_ACTION]: lookupByRef(input.strictUrl) },
    onEvent: (e) => {
      if (e.type === 'takeover') report.takeovers[phase]++;
      branch(e);
    },
  });
  try {
    for (let round = 0; round < 30; round++) {
      input.signal?.throwIfAborted();
      const live = await retried(() => client.store.list({ states: ['in_flight', 'ambiguous'], limit: 1_000_000 }));
      report.leftLive = live.length;
      if (live.length === 0) break;
      report.rounds++;
      const r = await retried(() => client.recover({ limit: 1_000_000 }));
      report.resolved += r.resolved.length;
      report.absent += r.absent.length;
      if (r.stillAmbiguous.length > 0 || r.errors.length > 0) await sleep(200);
    }
    const refs = [...new Set(input.history.filter((e) => e.type === 'indeterminate').map((e) => e.ref))].sort();
    const read = async (phase: ReconciledEntry['phase']): Promise<void> => {
      for (const ref of refs) {
        input.signal?.throwIfAborted();
        const at = Date.now();
        const record = await retried(() => client.get({ action: isStrict(ref) ? STRICT_ACTION : DEDUPE_ACTION, ref }));
        report.entries.push({ type: 'reconciled', phase, ref, at, state: record?.state ?? 'absent', claim: claimOf(record), orderId: storedOrderId(record) });
      }
    };
    await read('after_recover');
    phase = 'calls';
    let op = input.firstOp;
    const queue = [...refs];
    const lane = async (): Promise<void> => {
      for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) {
        for (let round = 0; round < 10; round++) {
          input.signal?.throwIfAborted();
          const caller = { op: op++, worker: 'final', incarnation: 0, ref };
          report.entries.push({ type: 'invoke', ...caller, at: Date.now() });
          const outcome = isStrict(ref)
            ? await placeOrder(client, input.strictUrl, STRICT_ACTION, caller)
            : await placeOrder(client, input.dedupeUrl, DEDUPE_ACTION, caller);
          report.entries.push(outcome);
          if (outcome.type === 'ok') break;
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, lane));
    await read('after_calls');
    for (const record of await retried(() => client.store.list({ limit: 10_000_000 }))) {
      for (const a of record.attempts) {
        const name = a.class === null ? 'unfinished' : a.class === 'retryable' && a.status === 409 ? 'retryable 409' : a.class;
        report.attemptClasses[name] = (report.attemptClasses[name] ?? 0) + 1;
      }
      if (record.attempts.some((a) => a.class === 'conflict')) report.conflicted.push({ ref: record.ref, state: record.state });
    }
  } finally {
    await client.close();
  }
  return report;
}
