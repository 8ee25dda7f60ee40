/**
 * The README's PgBouncer advice ("PostgreSQL for fleets", pool sizing) against a real PgBouncer in
 * transaction mode with a pool smaller than the calls: `statementTimeoutMs: 0` works (migration,
 * claims, writes, lookups; at most one order per ref through dropped answers and 500s), the default
 * options are refused before anything is sent with a StoreError that says what to change.
 *
 * Needs the `pgbouncer` binary (Debian: `apt-get install pgbouncer`) and the test PostgreSQL server;
 * skipped, with a warning, without either. PgBouncer refuses to run as root: as root it is started
 * through `runuser -u postgres`, and skipped when that is not possible.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createClient, isOnceError } from '../../src/index.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { startProvider } from '../../src/testing/provider.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';

/** How to start pgbouncer here, or why it cannot be. */
function pgbouncerCommand(): { argv: string[] } | { reason: string } {
  if (spawnSync('pgbouncer', ['--version']).status !== 0) return { reason: 'the pgbouncer binary is not installed' };
  if (process.getuid?.() !== 0) return { argv: ['pgbouncer'] };
  if (spawnSync('runuser', ['-u', 'postgres', '--', 'true']).status !== 0) return { reason: 'running as root, and runuser -u postgres fails' };
  return { argv: ['runuser', '-u', 'postgres', '--', 'pgbouncer'] };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitForPort(port: number, child: ChildProcess, output: () => string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited (${child.exitCode}): ${output()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`pgbouncer did not listen on ${port}: ${output()}`);
}

const command = pgbouncerCommand();

describeWithPostgres('postgresStore through PgBouncer (transaction pooling)', (url) => {
  if ('reason' in command) {
    console.warn(`[oncefetch] skipping the PgBouncer cases: ${command.reason}`);
    it.skip(`needs pgbouncer (${command.reason})`, () => undefined);
    return;
  }
  const schema = freshSchemaName();
  const admin = adminPool(url);
  let bouncer: ChildProcess;
  let dir: string;
  let bouncerUrl: string;
  let output = '';

  beforeAll(async () => {
    const upstream = new URL(url);
    const port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'oncefetch-pgbouncer-'));
    chmodSync(dir, 0o755);
    const user = decodeURIComponent(upstream.username || 'postgres');
    writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 });
    // A pool of 2 server connections for 30 concurrent calls; no ignore_startup_parameters.
    writeFileSync(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${upstream.hostname} port=${upstream.port || '5432'}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(dir, 'userlist.txt')}`,
        'pool_mode = transaction',
        'default_pool_size = 2',
        'max_client_conn = 200',
        '',
      ].join('\n'),
      { mode: 0o644 },
    );
    const [bin = 'pgbouncer', ...args] = command.argv;
    bouncer = spawn(bin, [...args, join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
    bouncer.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    bouncer.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    await waitForPort(port, bouncer, () => output);
    upstream.hostname = '127.0.0.1';
    upstream.port = String(port);
    bouncerUrl = upstream.toString();
  });

  afterAll(async () => {
    bouncer?.kill('SIGTERM');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    await dropSchema(admin, schema);
    await admin.end();
  });

  it('the default options: refused before anything is sent, the StoreError naming statementTimeoutMs: 0 and ignore_startup_parameters', async () => {
    const provider = await startProvider({ requireKey: true });
    const client = createClient({ tenant: 't1', store: postgresStore({ connectionString: bouncerUrl, schema }) });
    try {
      const error = await client
        .fetch(`${provider.url}/orders`, { method: 'POST', body: JSON.stringify({ ref: 'd1' }), headers: { 'content-type': 'application/json' }, once: { action: 'create-order', ref: 'd1' } })
        .then(
          () => undefined,
          (e: unknown) => e as Error,
        );
      expect(isOnceError(error) && error.code === 'STORE_ERROR').toBe(true);
      expect(error?.message).toContain('unsupported startup parameter: statement_timeout');
      expect(error?.message).toContain('statementTimeoutMs: 0');
      expect(error?.message).toContain('ignore_startup_parameters');
      expect(provider.requests.length).toBe(0);
    } finally {
      await client.close();
      await provider.close();
    }
  });

  it('statementTimeoutMs: 0, 30 concurrent calls over a pool of 2 with dropped answers and 500s after commit: one order per ref', { timeout: 60_000 }, async () => {
    const provider = await startProvider({
      requireKey: true,
      randomFaults: { seed: 7, rate: 0.4, kinds: [{ kind: 'drop_after_commit' }, { kind: 'error_after_commit', status: 500 }, { kind: 'status_before_commit', status: 503 }] },
    });
    const lookup = async ({ scope, signal }: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
      const r = await fetch(`${provider.url}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
      if (r.status === 404) return null;
      if (!r.ok) throw new Error(`lookup ${r.status}`);
      return r;
    };
    // Two clients (two processes' worth of stores) on the same refs.
    const clients = [0, 1].map(() =>
      createClient({ tenant: 't1', settleMs: 0, retry: { baseDelayMs: 10, maxDelayMs: 50 }, store: postgresStore({ connectionString: bouncerUrl, schema, statementTimeoutMs: 0, queryTimeoutMs: 10_000 }) }),
    );
    try {
      const refs = Array.from({ length: 15 }, (_, i) => `o${i}`);
      const outcomes = await Promise.allSettled(
        clients.flatMap((client) =>
          refs.map((ref) =>
            client.fetch(`${provider.url}/orders`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ ref, amount: 1 }),
              once: { action: 'create-order', ref, lookup },
            }),
          ),
        ),
      );
      expect(outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason))).toEqual([]);
      for (const ref of refs) expect(provider.effectsFor(ref), ref).toBe(1);
    } finally {
      for (const client of clients) await client.close();
      await provider.close();
    }
  });
});
