/**
 * What the runner tells a worker (one JSON argument) and the timing both rely on.
 *
 * @module
 */
import type { RunPlan } from './plan.js';
import type { StoreFaults } from './store-faults.js';
import type { StoreSpec } from './store.js';

/** How a worker's lookups misbehave, per lookup, from the worker's seed. */
export interface LookupFaults {
  /** the lookup throws (after or without asking the provider): "unknown" */
  failRate: number;
  /** the lookup waits up to `slowMs` before it asks */
  slowRate: number;
  slowMs: number;
  /** the lookup asks, then takes up to `staleMs` to answer: the answer may be stale when it arrives */
  staleRate: number;
  staleMs: number;
}

/** The clients' timing; the same for every worker and the final recovery. */
export interface ClientTiming {
  leaseMs: number;
  settleMs: number;
  inFlightWaitMs: number;
  attemptTimeoutMs: number;
  deadlineMs: number;
  maxRetryAfterMs: number;
  maxAttempts: number;
}

/** A worker's configuration: `node --import tsx chaos/worker.ts '<WorkerConfig JSON>'`. */
export interface WorkerConfig {
  plan: RunPlan;
  id: number;
  incarnation: number;
  /** the store every process shares */
  store: StoreSpec;
  /** this worker's history file (JSON lines, appended); also read at start to resume */
  historyPath: string;
  /** the provider that dedupes by key */
  dedupeUrl: string;
  /** the provider that ignores keys */
  strictUrl: string;
  timing: ClientTiming;
  lookupFaults: LookupFaults;
  /** faults of this worker's store calls (rate 0: the store is used as it is) */
  storeFaults: StoreFaults;
  /** share of the refs of the provider that dedupes whose held key it answers with a key mismatch (see `key-mismatch.ts`) */
  keyMismatch: number;
}

/**
 * What a worker prints on stdout: `p` per finished call, `f <kind> <method>` per injected store
 * fault (`chaos/store-faults.ts`), `k <replay|in_progress>` per key mismatch injected in an answer of
 * the provider that dedupes (`chaos/key-mismatch.ts`), `b <branch>` per key conflict on a resend, as
 * its call ended it (`chaos/conflict-branches.ts`), `c <ref>` to ask for a burst of a ref it left unfinished, then
 * one `done` line. On its stdin it reads `c <ref> <op> <at>`: a burst's call to make at `at`.
 */
export interface DoneLine {
  done: true;
  worker: number;
  incarnation: number;
  stats: Record<string, number>;
  recovered: number;
}
