/**
 * Secrets at rest: canaries sent in `Authorization`, in a header the user
 * marks sensitive and in the query string, and echoed back by the server in
 * `Set-Cookie` and `X-Api-Secret`, never reach the bytes of the SQLite file or
 * its `-wal`/`-shm` companions, whatever path the operations take: success,
 * drop, 500, truncated body, 400, 503, lookups, SIGKILL after the response and
 * inside the result transaction, then restarts.
 *
 * A small echo proxy in front of the loopback provider adds the echo; the
 * provider still counts the effects and injects the faults.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { CRASH_ACTION, type CrashPoint, type CrashWorkerConfig } from '../helpers/crash-protocol.js';
import { killAll, startWorker, type WorkerRun } from '../helpers/crash-run.js';
import { tempDir } from '../helpers/setup.js';

const CANARY_AUTH = `canary-auth-${randomUUID()}`;
const CANARY_SECRET = `canary-secret-${randomUUID()}`;
const CANARY_QUERY = `canary-query-${randomUUID()}`;
const CANARIES = { authorization: CANARY_AUTH, 'x-api-secret': CANARY_SECRET, query: CANARY_QUERY };

const HOP_BY_HOP = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

interface EchoProxy {
  url: string;
  /** responses that echoed both secrets back */
  echoed: number;
  /** request URLs as received (with their query) */
  urls: string[];
  close(): Promise<void>;
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * Forwards every request to `target` and echoes the caller's secrets back in
 * `Set-Cookie` and `X-Api-Secret`, as some real APIs do. When the upstream
 * fails (a drop, a reset, a truncated body), the caller's socket is destroyed.
 */
async function startEchoProxy(target: string): Promise<EchoProxy> {
  const proxy: EchoProxy = { url: '', echoed: 0, urls: [], close: async () => undefined };
  const server: Server = createServer((req, res) => {
    void (async () => {
      proxy.urls.push(req.url ?? '');
      const body = await readAll(req);
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !HOP_BY_HOP.has(name)) headers.set(name, value);
      }
      const upstream = await fetch(`${target}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        body: body.length === 0 ? null : new Uint8Array(body),
        redirect: 'manual',
      });
      const bytes = Buffer.from(await upstream.arrayBuffer());
      const out: Record<string, string | string[]> = {};
      upstream.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.has(name)) out[name] = value;
      });
      const auth = req.headers.authorization ?? '';
      const secret = String(req.headers['x-api-secret'] ?? '');
      out['set-cookie'] = [`session=${secret}; Path=/; HttpOnly`, `auth=${encodeURIComponent(auth)}; Path=/; HttpOnly`];
      out['x-api-secret'] = secret;
      out['content-length'] = String(bytes.length);
      if (auth.includes(CANARY_AUTH) && secret === CANARY_SECRET) proxy.echoed++;
      res.writeHead(upstream.status, out);
      res.end(bytes);
    })().catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return proxy;
}

/**
 * The text, and its base64 and base64url encodings at each of the three byte
 * alignments it can have inside a longer encoded string (only the characters
 * that depend on the text alone).
 */
function encodedForms(text: string): string[] {
  const bytes = Buffer.from(text, 'utf8');
  const forms = [text];
  for (let shift = 0; shift < 3; shift++) {
    const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64');
    const start = Math.ceil((shift * 8) / 6);
    const end = Math.floor((shift + bytes.length) / 3) * 4;
    const core = encoded.slice(start, end);
    forms.push(core, core.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return forms;
}

/** Which of `needles` (any encoded form) occur in which of the files. */
function findInFiles(files: string[], needles: Record<string, string>): string[] {
  const found: string[] = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    const bytes = readFileSync(file);
    for (const [name, text] of Object.entries(needles)) {
      for (const form of encodedForms(text)) {
        if (bytes.includes(Buffer.from(form, 'latin1'))) found.push(`${name} as ${JSON.stringify(form)} in ${file}`);
      }
    }
  }
  return found;
}

let provider: Provider;
let proxy: EchoProxy;
let tmp: ReturnType<typeof tempDir>;
let holder: OnceStore | undefined;
const runs: WorkerRun[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
  proxy = await startEchoProxy(provider.url);
});

afterEach(async () => {
  try {
    await killAll(runs);
    await holder?.close();
    holder = undefined;
    await proxy.close();
    await provider.close();
  } finally {
    tmp.cleanup();
  }
});

it('no canary, plain or base64, in the database, -wal or -shm after success, faults, lookups, crashes and restarts', { timeout: 60_000 }, async () => {
  const dbPath = join(tmp.dir, 'once.db');
  const files = [dbPath, `${dbPath}-wal`, `${dbPath}-shm`];
  // Held open by the test so that the workers' clean exits never checkpoint the WAL away before it is read.
  holder = sqliteStore({ path: dbPath });
  const worker = (owner: string, refs: string[], crashAt?: CrashPoint): WorkerRun => {
    const config: CrashWorkerConfig = {
      dbPath,
      url: proxy.url,
      refs,
      leaseMs: 500,
      owner,
      headers: { authorization: `Bearer ${CANARY_AUTH}`, 'x-api-secret': CANARY_SECRET },
      sensitiveHeaders: ['x-api-secret'],
      query: `?api_key=${CANARY_QUERY}`,
      retry: { attemptTimeoutMs: 2_000 },
    };
    if (crashAt !== undefined) config.crashAt = crashAt;
    const run = startWorker(config);
    runs.push(run);
    return run;
  };

  provider.faults([
    { kind: 'drop_after_commit', match: { ref: 'S-drop' } },
    { kind: 'error_after_commit', match: { ref: 'S-500' } },
    { kind: 'truncate_after_commit', match: { ref: 'S-trunc' } },
    { kind: 'status_before_commit', status: 400, match: { ref: 'S-400' } },
    { kind: 'status_before_commit', status: 503, retryAfter: '0', match: { ref: 'S-503' } },
  ]);
  const main = worker('main', ['S-ok', 'S-drop', 'S-500', 'S-trunc', 'S-400', 'S-503']);
  expect((await main.exited).code, main.stderr()).toBe(0);
  expect(main.errors()).toEqual([]);

  for (const [ref, crashAt] of [['S-crash-d', 'after_response'], ['S-crash-e', 'in_result_transaction']] as const) {
    const crashed = worker(`crashed-${ref}`, [ref], crashAt);
    expect((await crashed.exited).signal, crashed.stderr()).toBe('SIGKILL');
  }
  const restarted = worker('restarted', ['S-crash-d', 'S-crash-e']);
  expect((await restarted.exited).code, restarted.stderr()).toBe(0);
  expect(restarted.errors()).toEqual([]);

  // The secrets really travelled: on every request, in every echoed response, in every URL.
  const refs = ['S-ok', 'S-drop', 'S-500', 'S-trunc', 'S-400', 'S-503', 'S-crash-d', 'S-crash-e'];
  expect(provider.requests.length).toBeGreaterThanOrEqual(refs.length);
  for (const request of provider.requests) {
    expect(request.headers['authorization']).toBe(`Bearer ${CANARY_AUTH}`);
    expect(request.headers['x-api-secret']).toBe(CANARY_SECRET);
  }
  expect(proxy.urls.filter((u) => u.startsWith('/orders?api_key=')).length).toBe(provider.requests.length);
  expect(provider.lookups).toBe(5); // drop, 500, truncated, and the two restarts
  // every POST and lookup answer was echoed, except the two the provider cut off (drop, truncated)
  expect(proxy.echoed).toBe(provider.requests.length + provider.lookups - 2);
  expect(provider.effects).toBe(refs.length - 1); // S-400 created nothing

  // Every operation is settled and stored with its result (headers included, minus the secrets).
  for (const ref of refs) {
    const record = await holder.get(recordId({ tenant: 'default', action: CRASH_ACTION, ref }));
    expect(record?.state, ref).toBe(ref === 'S-400' ? 'failed' : 'succeeded');
    const names = record!.result!.headers.map(([name]) => name.toLowerCase());
    expect(names, ref).toContain('content-type');
    expect(names, ref).not.toContain('set-cookie');
    expect(names, ref).not.toContain('x-api-secret');
  }

  // The scan itself works: a ref appears in the files plainly and inside base64 result bodies.
  const wal = readFileSync(`${dbPath}-wal`);
  expect(wal.length).toBeGreaterThan(0);
  const control = findInFiles(files, { ref: '"ref":"S-ok"' });
  expect(control.some((f) => f.includes('as "\\"ref\\":\\"S-ok\\""'))).toBe(true);
  expect(control.length).toBeGreaterThan(1);

  // No canary anywhere: database, WAL (uncommitted frames included) and shared memory.
  expect(findInFiles(files, CANARIES)).toEqual([]);

  // Nor after the last connection closes and checkpoints the WAL into the database.
  await holder.close();
  holder = undefined;
  expect(findInFiles(files, CANARIES)).toEqual([]);
  console.log(
    `[secrets at rest] ${provider.requests.length} POSTs and ${provider.lookups} lookups carried the canaries, ${proxy.echoed} responses echoed them; ` +
      `scanned ${files.filter(existsSync).length} files after close, ${wal.length} WAL bytes before: no canary found`,
  );
});
