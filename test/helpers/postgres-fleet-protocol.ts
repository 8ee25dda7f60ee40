/**
 * What the PostgreSQL fleet test and its worker processes say to each other:
 * the worker's configuration (argv, JSON) and the lines it prints (stdout, JSON).
 */

/** The action every fleet call uses; the workers register a lookup for it. */
export const FLEET_ACTION = 'create-order';

/** What the test passes to a worker (argv[2], JSON). */
export interface FleetWorkerConfig {
  worker: string;
  databaseUrl: string;
  schema: string;
  providerUrl: string;
  refs: string[];
  /** refs this worker calls first, in this order, before the shuffled rest */
  first: string[];
  /** refs this worker calls last */
  last: string[];
  /** seed of this worker's shuffle */
  seed: number;
  /** calls in flight at once */
  concurrency: number;
  leaseMs: number;
}

/** One line of a worker's stdout. */
export type FleetLine =
  | { type: 'ready'; worker: string; pid: number }
  | { type: 'attempt_started'; worker: string; ref: string; attempt: number }
  | { type: 'takeover'; worker: string; ref: string; previousOwner: string | null; previousState: string }
  | { type: 'result'; worker: string; ref: string; status: number; orderId: string; replayed: boolean }
  | { type: 'error'; worker: string; ref: string; code: string; message: string }
  | { type: 'done'; worker: string; stats: Record<string, number> };
