/**
 * What the crash tests and their worker processes say to each other: the
 * worker's configuration (argv[2], JSON) and the lines it prints (stdout, one
 * JSON object per line).
 */

/** The action every worker call uses; the worker registers a lookup for it. */
export const CRASH_ACTION = 'create-order';

/**
 * Where a worker kills itself with SIGKILL, injected from outside the library
 * (a store wrapper or a `fetch` wrapper):
 * - `before_claim`: inside `store.claim`, before the record is written;
 * - `before_send`: in `fetch`, after the record is durable (`in_flight`), before a byte is sent;
 * - `after_response`: in `fetch`, after the response and its body arrived, before the result is stored;
 * - `in_result_transaction`: at the write of the result, inside an open SQLite
 *   write transaction on the same file (uncommitted pages spilled to the WAL).
 *
 * "After the provider committed, before the response" is driven by the test
 * process instead: it kills the worker while the provider holds the response.
 */
export type CrashPoint = 'before_claim' | 'before_send' | 'after_response' | 'in_result_transaction';

/** What the test passes to a worker. */
export interface CrashWorkerConfig {
  /** the SQLite file shared by every worker of a test */
  dbPath: string;
  /** base URL the orders are POSTed to (`${url}/orders`) */
  url: string;
  /** base URL of the lookup (`${lookupUrl}/orders?ref=`) @default url */
  lookupUrl?: string;
  /** refs to create, one call each, in this order (shuffled when `seed` is given) */
  refs: string[];
  /** shuffle `refs` with this seed */
  seed?: number;
  /** calls in flight at once @default 1 */
  concurrency?: number;
  /** calls again (up to this many times) a ref whose call failed with a resumable error @default 0 */
  recalls?: number;
  crashAt?: CrashPoint;
  /** the worker stops itself (SIGSTOP) in `fetch`, after the record is `in_flight`, before the send; the test resumes it */
  pauseAt?: 'before_send';
  leaseMs: number;
  owner: string;
  /** extra request headers, sent on POSTs and lookups (secrets, say) */
  headers?: Record<string, string>;
  sensitiveHeaders?: string[];
  /** appended to `${url}/orders` (a query string, say) */
  query?: string;
  retry?: {
    maxAttempts?: number;
    baseDelayMs?: number;
    maxDelayMs?: number;
    attemptTimeoutMs?: number;
    deadlineMs?: number;
  };
  inFlightWaitMs?: number;
  /** the client's `settleMs` (its default when absent) */
  settleMs?: number;
  /** after printing `ready`, wait for a line on stdin before the first call (a start barrier) */
  waitForGo?: boolean;
}

/** One line of a worker's stdout. */
export type CrashLine =
  | { type: 'ready'; owner: string; pid: number }
  | { type: 'crashing'; owner: string; at: CrashPoint; ref: string; walBytesBefore?: number; walBytesInTransaction?: number }
  | { type: 'pausing'; owner: string; at: 'before_send'; ref: string }
  | { type: 'event'; owner: string; event: string; ref: string; detail?: string }
  | { type: 'result'; owner: string; ref: string; status: number; orderId: string | undefined; replayed: boolean; body: string }
  | { type: 'error'; owner: string; ref: string; code: string; name: string; message: string }
  | { type: 'done'; owner: string; stats: Record<string, number> };

/** Line types, narrowed. */
export type ResultLine = Extract<CrashLine, { type: 'result' }>;
export type ErrorLine = Extract<CrashLine, { type: 'error' }>;
