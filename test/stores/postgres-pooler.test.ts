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
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/index.js';
import { isOnceError } from '../../src/errors.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { startProvider } from '../../src/testing/provider.js';

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

/** Answers every startup packet carrying statement_timeout the way PgBouncer 1.18 does, then closes. */
async function startFakeBouncer(): Promise<{ url: string; startups: string[]; close: () => Promise<void> }> {
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
      } else {
        socket.end(errorResponse('08P01', 'fake server: nothing more here'));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `postgres://agent@127.0.0.1:${port}/test`,
    startups,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

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

  it('statementTimeoutMs: 0 sends no statement_timeout startup parameter', async () => {
    const bouncer = await startFakeBouncer();
    cleanups.push(bouncer.close);
    const store = postgresStore({ connectionString: bouncer.url, schema: 'oncefetch_pooler', statementTimeoutMs: 0 });
    cleanups.push(() => store.close());
    const error = await store.get('x').then(
      () => undefined,
      (e: unknown) => e as Error,
    );
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
