/**
 * The PostgreSQL store behind a connection pooler, without one installed: a loopback server that
 * answers the startup packet as PgBouncer 1.18 does when `statement_timeout` is not in its
 * `ignore_startup_parameters` (the store sends it by default, `statementTimeoutMs` 30000), and a
 * store that cannot open, called again and again.
 *
 * A trial through PgBouncer 1.18 (Debian 12) in transaction mode: every call failed with
 * "connection failure while opening [08P01]: unsupported startup parameter: statement_timeout",
 * which did not say what to change; and each failed opening added one more 'error' listener to the
 * store's pg pool (MaxListenersExceededWarning after 10), without bound while the database stays
 * unreachable.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { createClient } from '../../src/index.js';
import { isOnceError } from '../../src/errors.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { startProvider } from '../../src/testing/provider.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';

/** A PostgreSQL ErrorResponse message: severity, SQLSTATE, text. */
function errorResponse(code: string, message: string): Buffer {
  const fields = Buffer.concat([
    Buffer.from(`SFATAL\0`),
    Buffer.from(`C${code}\0`),
    Buffer.from(`M${message}\0`),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

/**
 * Answers every startup packet carrying statement_timeout the way PgBouncer 1.18 does, then closes.
 * Any other connection is piped to `upstream` (a PostgreSQL URL) when given, else refused too.
 */
async function startFakeBouncer(upstream?: string, otherwise = 'fake server: nothing more here'): Promise<{ url: string; startups: string[]; close: () => Promise<void> }> {
  const startups: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.once('data', (packet) => {
      // int32 length, int32 protocol, then NUL-separated name/value pairs
      const params = packet.subarray(8).toString('utf8').split('\0');
      startups.push(params.join(' '));
      const i = params.indexOf('statement_timeout');
      if (i !== -1) {
        socket.end(errorResponse('08P01', 'unsupported startup parameter: statement_timeout'));
      } else if (upstream !== undefined) {
        const target = new URL(upstream);
        const server = connect(Number(target.port || 5432), target.hostname);
        sockets.add(server);
        server.on('close', () => sockets.delete(server));
        server.on('error', () => socket.destroy());
        socket.on('close', () => server.destroy());
        server.write(packet);
        socket.pipe(server).pipe(socket);
      } else {
        socket.end(errorResponse('08P01', otherwise));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: upstream === undefined ? `postgres://agent@127.0.0.1:${port}/test` : withHost(upstream, port),
    startups,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** `url` pointed at 127.0.0.1:`port`, its user, database and parameters kept. */
function withHost(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

/** Runs the oncefetch command in this process. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {
    out: (text) => void (stdout += text),
    err: (text) => void (stderr += text),
    errIsTty: false,
  });
  return { code, stdout, stderr };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** A store on the fake pooler with `statementTimeoutMs: 0`, closed after the test, and the error its first read rejects with. */
async function readErrorVia(bouncer: { url: string }): Promise<Error | undefined> {
  const store = postgresStore({ connectionString: bouncer.url, schema: 'oncefetch_pooler', statementTimeoutMs: 0 });
  cleanups.push(() => store.close());
  return store.get('x').then(
    () => undefined,
    (e: unknown) => e as Error,
  );
}

describe('postgresStore behind a connection pooler', () => {
  it("a pooler that refuses the statement_timeout startup parameter: the StoreError says what to change, and nothing reaches the provider", async () => {
    const bouncer = await startFakeBouncer();
    cleanups.push(bouncer.close);
    const provider = await startProvider({ requireKey: true });
    cleanups.push(() => provider.close());
    const client = createClient({ tenant: 't1', store: postgresStore({ connectionString: bouncer.url, schema: 'oncefetch_pooler' }) });
    cleanups.push(() => client.close());

    const outcome = await client
      .fetch(`${provider.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ref: 'p1', amount: 1 }),
        once: { action: 'create-order', ref: 'p1' },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );

    expect(isOnceError(outcome) && outcome.code === 'STORE_ERROR', `expected a StoreError, got ${String(outcome)}`).toBe(true);
    const message = (outcome as Error).message;
    expect(message).toContain('[08P01]: unsupported startup parameter: statement_timeout');
    expect(message).toMatch(/PgBouncer/);
    expect(message).toContain('statementTimeoutMs: 0');
    expect(message).toContain('ignore_startup_parameters');
    expect(bouncer.startups.some((s) => s.includes('statement_timeout 30000'))).toBe(true);
    expect(provider.effectsFor('p1')).toBe(0);
    expect(provider.requests.length).toBe(0);
  });

  it.each([
    ["query_wait_timeout (no server connection free in time)", 'query_wait_timeout', /PgBouncer .*query_wait_timeout.*default_pool_size/],
    ['server_login_retry (its PostgreSQL unreachable)', 'server login has been failing, try again later (server_login_retry)', /PgBouncer cannot log in to PostgreSQL/],
  ])("PgBouncer's %s: the StoreError says what it means", async (_what, sent, says) => {
    const bouncer = await startFakeBouncer(undefined, sent);
    cleanups.push(bouncer.close);
    const error = await readErrorVia(bouncer);
    expect(error?.message).toContain(`[08P01]: ${sent}`);
    expect(error?.message).toMatch(says);
  });

  it('statementTimeoutMs: 0 sends no statement_timeout startup parameter', async () => {
    const bouncer = await startFakeBouncer();
    cleanups.push(bouncer.close);
    const error = await readErrorVia(bouncer);
    expect(error?.message).toContain('fake server: nothing more here');
    expect(error?.message).not.toContain('ignore_startup_parameters');
    expect(bouncer.startups.length).toBeGreaterThan(0);
    expect(bouncer.startups.every((s) => !s.includes('statement_timeout'))).toBe(true);
  });

  it('a store that cannot open, called 15 times, adds no listener to its pool per try (no MaxListenersExceededWarning)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(`${w.name}: ${w.message}`);
    };
    process.on('warning', onWarning);
    cleanups.push(async () => {
      process.off('warning', onWarning);
    });
    const bouncer = await startFakeBouncer();
    cleanups.push(bouncer.close);
    const store = postgresStore({ connectionString: bouncer.url, schema: 'oncefetch_pooler' });
    cleanups.push(() => store.close());
    for (let i = 0; i < 15; i++) {
      const error = await store.get('x').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isOnceError(error)).toBe(true);
    }
    // (process warnings are emitted on a later tick)
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(bouncer.startups.length).toBe(15);
    expect(warnings.filter((w) => w.includes('MaxListenersExceeded'))).toEqual([]);
  });
});

describeWithPostgres('the oncefetch command behind a pooler that refuses statement_timeout', (url) => {
  const schema = freshSchemaName();
  const admin = adminPool(url);
  let bouncer: Awaited<ReturnType<typeof startFakeBouncer>>;
  const at = (params: Record<string, string>): string => {
    const u = new URL(bouncer.url);
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    return u.toString();
  };

  beforeAll(async () => {
    bouncer = await startFakeBouncer(url);
    // The application's store, as the README advises behind PgBouncer: statementTimeoutMs 0.
    const provider = await startProvider({ requireKey: true });
    provider.fault({ kind: 'drop_after_commit', match: { ref: 'B-1' } });
    const lookup = async ({ scope, signal }: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
      const r = await fetch(`${provider.url}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
      if (r.status === 404) return null;
      if (!r.ok) throw new Error(`lookup ${r.status}`);
      return r;
    };
    const client = createClient({ tenant: 't1', store: postgresStore({ connectionString: bouncer.url, schema, statementTimeoutMs: 0 }), settleMs: 0 });
    try {
      const res = await client.fetch(`${provider.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ref: 'B-1', amount: 1 }),
        once: { action: 'create-order', ref: 'B-1', lookup },
      });
      expect(res.status).toBe(200);
      expect(provider.effectsFor('B-1')).toBe(1);
    } finally {
      await client.close();
      await provider.close();
    }
  });

  afterAll(async () => {
    await bouncer.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it('inspect with ?statementTimeoutMs=0 reads the store; without it, the error says to add it (exit 1)', async () => {
    const refused = await cli(['inspect', '--store', at({ schema }), '--json']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('unsupported startup parameter: statement_timeout');
    expect(refused.stderr).toContain('statementTimeoutMs=0');

    const run = await cli(['inspect', '--store', at({ schema, statementTimeoutMs: '0' }), '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as { counts: Record<string, number> }).counts['succeeded']).toBe(1);
    expect(bouncer.startups.filter((s) => s.includes('statement_timeout')).length).toBeGreaterThan(0); // (the refused run's)
  });

  it('show and purge --dry-run read it too, with ?statementTimeoutMs=0', async () => {
    const show = await cli(['show', 'B-1', '--store', at({ schema, statementTimeoutMs: '0' }), '--json']);
    expect(show.stderr).toBe('');
    expect(show.code).toBe(0);
    const purge = await cli(['purge', '--dry-run', '--store', at({ schema, statementTimeoutMs: '0' }), '--json']);
    expect(purge.stderr).toBe('');
    expect(purge.code).toBe(0);
  });

  it('a statementTimeoutMs that is not a non-negative integer is a usage error (exit 2)', async () => {
    const run = await cli(['inspect', '--store', at({ schema, statementTimeoutMs: 'soon' })]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/statementTimeoutMs must be an integer/);
  });
});
