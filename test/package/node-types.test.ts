/**
 * The declarations a Node-only TypeScript project sees. Such a project often has no `dom`
 * lib (only `@types/node`), which declares `fetch`, `Request`, `Response`, `RequestInit` and
 * `Headers`, but not `RequestInfo`: a public signature that names a DOM-only type fails its
 * `tsc --strict` (with `skipLibCheck: false`) or, with `skipLibCheck`, silently turns into `any`.
 *
 * Emits the declarations of src/ (as `npm run build` does), installs them as `oncefetch` in a
 * temporary project that links this repository's `@types` and `vitest`, and type-checks a
 * consumer of the Node subpaths with `lib: ['es2023']`. Fast enough for every run (~20 s):
 * the slow tarball check is install.test.ts.
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, emitAsPackage, typecheck } from '../helpers/typecheck.js';

const CONSUMER = `import { createClient, memoryStore, wrapFetch, type OnceClient, type OnceRequestInit } from 'oncefetch';
import { sqliteStore, type SqliteDatabase } from 'oncefetch/sqlite';
import Database from 'better-sqlite3';
import { postgresStore } from 'oncefetch/postgres';
import { startProvider } from 'oncefetch/testing/provider';

const client: OnceClient = createClient({ tenant: 't1', store: memoryStore() });
const init: OnceRequestInit = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-1' } };
export const byString: Promise<Response> = client.fetch('http://127.0.0.1:1/orders', init);
export const byUrl: Promise<Response> = client.fetch(new URL('http://127.0.0.1:1/orders'), init);
export const byRequest: Promise<Response> = client.fetch(new Request('http://127.0.0.1:1/orders', { method: 'POST' }));
export const wrapped: typeof fetch = client.wrap();
export const plain: typeof fetch = wrapFetch(fetch, { tenant: 't1' });
// an SDK's fetch option that adds once options per call (a GraphQL client's mutations): no cast needed
export const perCall: typeof fetch = (input, init) => client.wrap()(input, { ...init, once: { classify: ({ bodyText }) => (bodyText?.includes('"errors"') === true ? 'ambiguous' : undefined) } });
export const perCallPlain: Promise<Response> = wrapFetch(fetch)('http://127.0.0.1:1/orders', { method: 'POST', body: '{}', once: { ref: 'A-1' } });
export const stores = [sqliteStore({ path: 'x.db' }), postgresStore({ connectionString: 'postgres://localhost/x' })];
// a better-sqlite3 handle is what the option takes
const handle = new Database(':memory:');
export const named: SqliteDatabase = handle;
export const onHandle = sqliteStore({ path: 'x.db', database: handle });
export const provider = startProvider({ requireKey: true });
// @ts-expect-error a number is no request: the input is typed, not any
export const bad = client.fetch(42);
`;

describe('declarations for a Node project without the DOM lib', { timeout: 120_000 }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'oncefetch-node-types-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('type-check under tsc --strict with lib es2023 and @types/node only (skipLibCheck: false)', async () => {
    const emitted = await emitAsPackage(tmp);
    expect(emitted.out).toBe('');
    for (const dep of ['@types', 'undici-types', 'vitest']) symlinkSync(join(ROOT, 'node_modules', dep), join(tmp, 'node_modules', dep), 'dir');
    writeFileSync(join(tmp, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    const checked = await typecheck(tmp, 'consumer.ts', CONSUMER, {
      strict: true,
      exactOptionalPropertyTypes: true,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'es2022',
      lib: ['es2023'],
      types: ['node'],
      noEmit: true,
      skipLibCheck: false,
    });
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
  });
});
