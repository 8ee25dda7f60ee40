/**
 * One process of the crash tests: a client on a SQLite file, calling
 * `client.fetch` for each configured ref against the loopback provider (or a
 * proxy in front of it). Crash points are injected from outside the library,
 * by wrapping the store and the `fetch` option, and end the process with
 * SIGKILL: no `finally`, no exit handler, no flush runs.
 *
 * Prints one JSON line ({@link CrashLine}) per result, error and event of
 * interest, written synchronously so that a line printed before a SIGKILL is
 * never lost.
 *
 * Run: `node --import tsx test/helpers/crash-worker.ts '<CrashWorkerConfig JSON>'`
 * (or the JSON in `$CRASH_WORKER_CONFIG`).
 */
import { existsSync, statSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { REPLAYED_HEADER, createClient, isOnceError } from '../../src/index.js';
import type { OnceEvent, OnceStore, OperationRecord } from '../../src/index.js';
import { defaultFetch } from '../../src/node-defaults.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { CRASH_ACTION, type CrashLine, type CrashPoint, type CrashWorkerConfig } from './crash-protocol.js';

/** Codes after which calling again is what a caller would do: the record stays resumable. */
const RESUMABLE = new Set(['OPERATION_IN_FLIGHT', 'RETRIES_EXHAUSTED', 'DEADLINE_EXCEEDED', 'AMBIGUOUS_OUTCOME']);

function print(line: CrashLine): void {
  // Synchronous: the line is in the pipe before any SIGKILL that follows.
  writeSync(1, `${JSON.stringify(line)}\n`);
}

function readConfig(): CrashWorkerConfig {
  const text = process.argv[2] ?? process.env['CRASH_WORKER_CONFIG'];
  if (text === undefined) throw new Error('crash-worker: pass the config JSON as argv[2] or $CRASH_WORKER_CONFIG');
  return JSON.parse(text) as CrashWorkerConfig;
}

const config = readConfig();
const { owner, dbPath } = config;

/** SIGKILL now; the returned promise never settles, so nothing after the kill runs even for a moment. */
function die(at: CrashPoint, ref: string, extra: Partial<Extract<CrashLine, { type: 'crashing' }>> = {}): Promise<never> {
  print({ type: 'crashing', owner, at, ref, ...extra });
  process.kill(process.pid, 'SIGKILL');
  return new Promise<never>(() => undefined);
}

function walBytes(): number {
  const wal = `${dbPath}-wal`;
  return existsSync(wal) ? statSync(wal).size : 0;
}

/**
 * Crash point `in_result_transaction`: a second connection on the same file
 * opens a write transaction, writes a tampered "succeeded" row (an order id
 * the provider never issued, padded so that SQLite spills the uncommitted pages
 * into the WAL), and the process dies before COMMIT.
 */
function dieInTransaction(id: string, expectedGeneration: number, next: OperationRecord): Promise<never> {
  const raw = new Database(dbPath, { timeout: 5_000 });
  raw.pragma('cache_size = 2');
  const walBytesBefore = walBytes();
  raw.exec('BEGIN IMMEDIATE');
  const fakeBody = Buffer.from(JSON.stringify({ id: 'ord_UNCOMMITTED', ref: next.ref })).toString('base64');
  const tampered = {
    ...next,
    result: next.result === null ? null : { ...next.result, body: fakeBody },
    padding: 'x'.repeat(512 * 1024),
  };
  const changed = raw
    .prepare('UPDATE oncefetch_records SET generation = ?, state = ?, lease_expires_at = NULL, updated_at = ?, data = ? WHERE id = ? AND generation = ?')
    .run(next.generation, next.state, next.updatedAt, JSON.stringify(tampered), id, expectedGeneration).changes;
  if (changed !== 1) throw new Error(`crash-worker: the tampered update matched ${changed} rows`);
  return die('in_result_transaction', next.ref, { walBytesBefore, walBytesInTransaction: walBytes() });
}

/** The real store with crash points in front of `claim` and of the result write. */
function crashingStore(real: OnceStore, crashAt: CrashPoint | undefined): OnceStore {
  return {
    name: real.name,
    claim: async (record) => {
      if (crashAt === 'before_claim') await die('before_claim', record.ref);
      return real.claim(record);
    },
    get: (id) => real.get(id),
    compareAndSet: async (id, expectedGeneration, next) => {
      if (crashAt === 'in_result_transaction' && next.state === 'succeeded') await dieInTransaction(id, expectedGeneration, next);
      return real.compareAndSet(id, expectedGeneration, next);
    },
    list: (query) => real.list(query),
    purge: (now) => real.purge(now),
    close: () => real.close(),
  };
}

function refOf(init: RequestInit | undefined): string {
  try {
    const body = init?.body;
    const text = typeof body === 'string' ? body : body instanceof Uint8Array ? new TextDecoder().decode(body) : '';
    const parsed = JSON.parse(text) as { ref?: unknown };
    return typeof parsed.ref === 'string' ? parsed.ref : '?';
  } catch {
    return '?';
  }
}

/** The real transport with crash points before the send and after the response, and a pause point before the send. */
function crashingFetch(crashAt: CrashPoint | undefined, pauseAt: 'before_send' | undefined): typeof globalThis.fetch {
  const realFetch = defaultFetch();
  let paused = false;
  return (async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    if (crashAt === 'before_send') await die('before_send', refOf(init));
    if (pauseAt === 'before_send' && !paused) {
      paused = true;
      print({ type: 'pausing', owner, at: 'before_send', ref: refOf(init) });
      // Stops the whole process here, timers included, until the test sends SIGCONT.
      process.kill(process.pid, 'SIGSTOP');
    }
    const response = await realFetch(input, init);
    if (crashAt === 'after_response') {
      // the whole response is in this process: status, headers and body
      await response.clone().arrayBuffer();
      await die('after_response', refOf(init));
    }
    return response;
  }) as typeof globalThis.fetch;
}

/** mulberry32, so a worker's order is reproducible from its seed. */
function shuffled<T>(items: readonly T[], seed: number | undefined): T[] {
  const out = [...items];
  if (seed === undefined) return out;
  let state = seed >>> 0;
  const random = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function onEvent(e: OnceEvent): void {
  const ref = e.scope.ref;
  switch (e.type) {
    case 'attempt_started':
      return print({ type: 'event', owner, event: e.type, ref, detail: `attempt ${e.attempt}` });
    case 'attempt_finished':
      return print({ type: 'event', owner, event: e.type, ref, detail: `attempt ${e.attempt}: ${e.class} (${e.reason})` });
    case 'waiting':
      return print({ type: 'event', owner, event: e.type, ref, detail: `for ${e.owner}` });
    case 'lookup':
      return print({ type: 'event', owner, event: e.type, ref, detail: e.outcome });
    case 'takeover':
      return print({ type: 'event', owner, event: e.type, ref, detail: `from ${e.previousOwner ?? 'none'} (${e.previousState})` });
    case 'late_evidence':
    case 'stopped':
      return print({ type: 'event', owner, event: e.type, ref, detail: 'detail' in e ? e.detail : `${e.code}: ${e.message}` });
    default:
      return undefined;
  }
}

function firstLine(input: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input });
    const closed = (): void => reject(new Error('crash-worker: stdin closed before "go"'));
    lines.once('close', closed);
    lines.once('line', () => {
      lines.off('close', closed);
      lines.close();
      resolve();
    });
  });
}

async function main(): Promise<void> {
  const headers = config.headers ?? {};
  const lookupUrl = config.lookupUrl ?? config.url;
  const client = createClient({
    store: crashingStore(sqliteStore({ path: dbPath }), config.crashAt),
    fetch: crashingFetch(config.crashAt, config.pauseAt),
    owner,
    leaseMs: config.leaseMs,
    inFlightWaitMs: config.inFlightWaitMs ?? 20_000,
    ...(config.settleMs === undefined ? {} : { settleMs: config.settleMs }),
    sensitiveHeaders: config.sensitiveHeaders ?? [],
    retry: { maxAttempts: 6, baseDelayMs: 20, maxDelayMs: 200, deadlineMs: 30_000, budget: false, ...config.retry },
    lookups: {
      [CRASH_ACTION]: async ({ scope, signal }) => {
        const res = await fetch(`${lookupUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { headers, signal });
        if (res.status === 404) return null;
        if (res.status !== 200) throw new Error(`lookup answered ${res.status}`);
        return res;
      },
    },
    onEvent,
  });
  print({ type: 'ready', owner, pid: process.pid });
  if (config.waitForGo === true) await firstLine(process.stdin);

  const call = async (ref: string): Promise<void> => {
    for (let round = 0; ; round++) {
      try {
        const res = await client.fetch(`${config.url}/orders${config.query ?? ''}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ ref, sku: 'A-17' }),
          once: { action: CRASH_ACTION, ref },
        });
        const body = await res.text();
        let orderId: string | undefined;
        try {
          const parsed = JSON.parse(body) as { id?: unknown };
          orderId = typeof parsed.id === 'string' ? parsed.id : undefined;
        } catch {
          orderId = undefined;
        }
        print({ type: 'result', owner, ref, status: res.status, orderId, replayed: res.headers.has(REPLAYED_HEADER), body });
        return;
      } catch (error) {
        const code = isOnceError(error) ? error.code : 'UNEXPECTED';
        const name = error instanceof Error ? error.name : typeof error;
        print({ type: 'error', owner, ref, code, name, message: error instanceof Error ? error.message : String(error) });
        if (!RESUMABLE.has(code) || round >= (config.recalls ?? 0)) return;
      }
    }
  };
  const queue = shuffled(config.refs, config.seed);
  const lane = async (): Promise<void> => {
    for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) await call(ref);
  };
  await Promise.all(Array.from({ length: config.concurrency ?? 1 }, lane));
  print({ type: 'done', owner, stats: { ...client.stats() } });
  await client.close();
}

await main();
