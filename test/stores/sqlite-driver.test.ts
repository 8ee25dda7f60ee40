/**
 * better-sqlite3 is an optional dependency: when it is not installed, or its
 * native binding is missing or built for another Node, opening the SQLite
 * store (and so `createClient()` with the Node default) fails at once with a
 * StoreError that says what is missing and the two ways on, and leaves no
 * file behind. The errors are real ones: a require from a directory without
 * node_modules, a `.node` file that is not a library, the `bindings` lookup.
 * (The packed tarball installed with `--omit=optional` is checked in
 * test/package/install.test.ts.)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { driverError, isDriverUnavailable } from '../../src/stores/sqlite-open.js';

const dir = mkdtempSync(join(tmpdir(), 'oncefetch-driver-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A require whose resolution starts in an empty directory: better-sqlite3 is not installed there. */
const requireWithout = nodeModule.createRequire(join(dir, 'nowhere.js'));

/** What `fn` throws. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

/** While true, every require of better-sqlite3 resolves from `dir`, as if it were not installed. */
let withoutDriver = false;
/**
 * While set, a require of better-sqlite3 succeeds but its constructor throws this, as better-sqlite3
 * does when its native binding fails to load (it loads the binding at the first `new Database()`),
 * and as under Bun and Deno.
 */
let constructorThrows: unknown;
vi.mock('node:module', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:module')>();
  return {
    ...real,
    createRequire: (from: string | URL) => {
      const req = real.createRequire(from);
      // (better-sqlite3's own Database once nothing is to be thrown: the module keeps the constructor it loaded)
      const unloadable = function Database(...args: unknown[]): unknown {
        if (constructorThrows !== undefined) throw constructorThrows;
        const Real = req('better-sqlite3') as new (...a: unknown[]) => unknown;
        return new Real(...args);
      };
      const wrapped = (id: string): unknown =>
        id !== 'better-sqlite3'
          ? req(id)
          : withoutDriver
            ? real.createRequire(join(dir, 'nowhere.js'))(id)
            : constructorThrows !== undefined
              ? unloadable
              : req(id);
      return Object.assign(wrapped, req);
    },
  };
});

describe('isDriverUnavailable', () => {
  it('recognises a missing module, a .node file that does not load, and a missing binding', () => {
    const notInstalled = thrown(() => requireWithout('better-sqlite3'));
    expect(notInstalled).toMatchObject({ code: 'MODULE_NOT_FOUND' });
    expect(isDriverUnavailable(notInstalled)).toBe(true);

    const junk = join(dir, 'junk.node');
    writeFileSync(junk, 'not a shared library');
    const badBinary = thrown(() => nodeModule.createRequire(import.meta.url)(junk));
    expect(badBinary).toMatchObject({ code: 'ERR_DLOPEN_FAILED' });
    expect(isDriverUnavailable(badBinary)).toBe(true);

    const bindings = nodeModule.createRequire(import.meta.url)('bindings') as (o: object) => unknown;
    const noBinding = thrown(() => bindings({ bindings: 'better_sqlite3.node', module_root: dir }));
    expect(String((noBinding as Error).message)).toMatch(/Could not locate the bindings file/);
    expect(isDriverUnavailable(noBinding)).toBe(true);
  });

  it("does not take SQLite's own errors, or other failures, for a missing driver", () => {
    const cantOpen = thrown(() => new Database(join(dir, 'no-such-dir', 'x.db'), { fileMustExist: true }));
    expect(isDriverUnavailable(cantOpen)).toBe(false);
    expect(isDriverUnavailable(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }))).toBe(false);
    expect(isDriverUnavailable(new Error('something else'))).toBe(false);
    expect(isDriverUnavailable('MODULE_NOT_FOUND')).toBe(false);
    expect(isDriverUnavailable(null)).toBe(false);
  });
});

/** The errors Bun 1.4.5 and Deno 2.9.6 throw at `new Database()` (their `require` of it succeeds), copied from real runs. */
const bunError = Object.assign(
  new Error("'better-sqlite3' is not yet supported in Bun.\nTrack the status in https://github.com/oven-sh/bun/issues/4290\nIn the meantime, you could try bun:sqlite which has a similar API."),
  { code: 'ERR_DLOPEN_FAILED' },
);
const denoError = new TypeError(
  'Cannot load native addon at /app/node_modules/better-sqlite3/build/Release/better_sqlite3.node: it was built against the legacy ' +
    'Node.js native addon API (NODE_MODULE / nan), which Deno does not support. Only Node-API (N-API) addons are supported.',
);

describe('on Bun and Deno, where better-sqlite3 does not load', () => {
  it('recognises their errors as an unusable driver', () => {
    expect(isDriverUnavailable(bunError)).toBe(true);
    expect(isDriverUnavailable(denoError)).toBe(true);
  });

  it('names the runtime and the stores that work there, and does not say to install better-sqlite3', () => {
    const bun = driverError(bunError, '/app/.oncefetch/oncefetch.db', { node: '24.3.0', bun: '1.4.5' }).message;
    expect(bun).toContain("better-sqlite3 cannot be loaded under Bun 1.4.5 ('better-sqlite3' is not yet supported in Bun.)");
    expect(bun).toContain('createClient({ store: memoryStore() })');
    expect(bun).toContain("postgresStore({ connectionString }) from 'oncefetch/postgres'");
    expect(bun).toContain('bun:sqlite');
    expect(bun).toContain("'oncefetch/testing'");
    expect(bun).not.toContain('npm install better-sqlite3');

    const deno = driverError(denoError, '/app/.oncefetch/oncefetch.db', { node: '26.3.0', deno: '2.9.6' }).message;
    expect(deno).toContain('better-sqlite3 cannot be loaded under Deno 2.9.6 (Cannot load native addon at');
    expect(deno).toContain('createClient({ store: memoryStore() })');
    expect(deno).toContain('node:sqlite');
    expect(deno).not.toContain('npm install better-sqlite3');

    const node = driverError(bunError, '/app/x.db', { node: '24.3.0' }).message;
    expect(node).toContain('npm install better-sqlite3');
    expect(node).not.toContain('Bun 1.4.5');
  });
});

describe('without better-sqlite3 installed', () => {
  afterEach(() => {
    withoutDriver = false;
    vi.unstubAllEnvs();
  });

  it('sqliteStore fails with a StoreError naming the fix, and creates nothing', async () => {
    const { sqliteStore } = await import('../../src/stores/sqlite.js');
    withoutDriver = true;
    const path = join(dir, 'store-dir', 'once.db');
    const error = thrown(() => sqliteStore({ path }));
    expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
    expect((error as Error).message).toContain(`SQLite store ${path}: better-sqlite3 cannot be loaded (Cannot find module 'better-sqlite3'`);
    expect((error as Error).message).toContain('npm install better-sqlite3');
    expect((error as Error).message).toContain('memoryStore()');
    expect((error as Error).cause).toMatchObject({ code: 'MODULE_NOT_FOUND' });
    expect(existsSync(join(dir, 'store-dir'))).toBe(false);
  });

  it('createClient() with the Node default store fails the same way; another store works', async () => {
    const { createClient, memoryStore } = await import('../../src/index.js');
    withoutDriver = true;
    vi.stubEnv('ONCEFETCH_DB', join(dir, 'default', 'oncefetch.db'));
    expect(() => createClient({ tenant: 't1' })).toThrow(/better-sqlite3 cannot be loaded.*optional dependency/);
    const client = createClient({ tenant: 't1', store: memoryStore() });
    await expect(client.get({ action: 'a', ref: 'r' })).resolves.toBeUndefined();
    await client.close();
  });

  it('the driver loads once it is there (nothing is cached from the failure)', async () => {
    const { sqliteStore } = await import('../../src/stores/sqlite.js');
    withoutDriver = true;
    expect(() => sqliteStore({ path: ':memory:' })).toThrow(/better-sqlite3 cannot be loaded/);
    withoutDriver = false;
    const store = sqliteStore({ path: ':memory:' });
    await store.close();
  });
});

describe('better-sqlite3 installed but its native binding does not load (a failed build, Bun, Deno)', () => {
  // (fresh modules: a driver that loaded once, in an earlier test, is kept by the module)
  beforeEach(() => vi.resetModules());
  afterEach(() => {
    constructorThrows = undefined;
    vi.unstubAllEnvs();
  });

  /** The real error of the `bindings` lookup when the build left no better_sqlite3.node. */
  const noBinding = (): unknown => {
    const bindings = nodeModule.createRequire(import.meta.url)('bindings') as (o: object) => unknown;
    return thrown(() => bindings({ bindings: 'better_sqlite3.node', module_root: dir }));
  };

  it.each([
    ['no binding built', noBinding],
    ['Bun', () => bunError],
    ['Deno', () => denoError],
  ])('%s: sqliteStore throws the driver StoreError and leaves no file or directory behind', async (_, error) => {
    const { sqliteStore } = await import('../../src/stores/sqlite.js');
    constructorThrows = error();
    const parent = join(dir, `unloadable-${Math.random().toString(36).slice(2)}`);
    const path = join(parent, 'nested', 'once.db');
    const thrownError = thrown(() => sqliteStore({ path }));
    expect(isOnceError(thrownError) && thrownError.code).toBe('STORE_ERROR');
    expect((thrownError as Error).message).toContain(`SQLite store ${path}: better-sqlite3 cannot be loaded`);
    expect(existsSync(path)).toBe(false);
    expect(existsSync(parent)).toBe(false);
  });

  it('createClient() at the default path leaves no empty database file in a directory that already existed', async () => {
    const { createClient } = await import('../../src/index.js');
    constructorThrows = noBinding();
    const parent = mkdtempSync(join(dir, 'existing-'));
    const path = join(parent, 'oncefetch.db');
    vi.stubEnv('ONCEFETCH_DB', path);
    expect(() => createClient({ tenant: 't1' })).toThrow(/better-sqlite3 cannot be loaded/);
    expect(existsSync(path)).toBe(false);
    expect(existsSync(parent)).toBe(true);
  });

  it('a handle passed as database is used without loading the driver, and an in-memory path fails as a file path does', async () => {
    const { sqliteStore } = await import('../../src/stores/sqlite.js');
    const path = join(dir, 'handle.db');
    const handle = new Database(path);
    constructorThrows = noBinding();
    const store = sqliteStore({ path, database: handle });
    expect(await store.get('none')).toBeUndefined();
    await store.close();
    handle.close();
    const memory = thrown(() => sqliteStore({ path: ':memory:' }));
    expect(isOnceError(memory) && memory.code).toBe('STORE_ERROR');
    expect((memory as Error).message).toContain('SQLite store :memory:: better-sqlite3 cannot be loaded');
  });

  it('a database that was already there is left as it was, and opens once the driver loads', async () => {
    const path = join(dir, 'kept.db');
    const first = (await import('../../src/stores/sqlite.js')).sqliteStore({ path });
    await first.close();
    const before = readFileSync(path);
    vi.resetModules();
    const { sqliteStore } = await import('../../src/stores/sqlite.js');
    constructorThrows = noBinding();
    expect(() => sqliteStore({ path })).toThrow(/better-sqlite3 cannot be loaded/);
    expect(readFileSync(path).equals(before)).toBe(true);
    constructorThrows = undefined;
    const again = sqliteStore({ path });
    await again.close();
  });
});
