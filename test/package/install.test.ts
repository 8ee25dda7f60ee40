/**
 * The package as users get it: build (unless dist/ is fresh), `npm pack`, install
 * the tarball into a fresh project (better-sqlite3 builds its native binding),
 * then, for every subpath in the exports map as it is when the test runs: ESM
 * `import`, `require()` (Node ≥ 20.19 loads ESM synchronously), and a strict
 * `tsc --noEmit` consumer. Then publint and attw on the repository, and a
 * second install with `--omit=optional` (no better-sqlite3, as a browser app
 * would install it).
 *
 * Slow (the native build takes minutes on a small machine): runs with
 * ONCEFETCH_PACKAGE_TEST=1 or CI=true.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ENABLED = process.env['ONCEFETCH_PACKAGE_TEST'] === '1' || process.env['CI'] === 'true';
if (!ENABLED) console.log('[package] skipped: set ONCEFETCH_PACKAGE_TEST=1 (or CI=true) to pack, install and check the tarball (a few minutes)');

type Pkg = { name: string; exports: Record<string, unknown>; bin?: Record<string, string>; engines: { node: string } };
const readPkg = (dir: string): Pkg => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Pkg;
/** The version this repository tests with, so that the install can come from npm's cache. */
const version = (name: string): string => (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

/** npm's own variables (set by `npm test`) would point a nested npm at this repository. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

function run(cmd: string, args: string[], cwd: string, timeoutMs: number, env: NodeJS.ProcessEnv = cleanEnv()): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed: ${error.message}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
      else resolve(stdout);
    });
  });
}

const newestMtime = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce((max, e) => {
    const p = join(dir, e.name);
    return Math.max(max, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }, 0);

/** `.` → `oncefetch`, `./sqlite` → `oncefetch/sqlite` */
const specifier = (name: string, subpath: string): string => (subpath === '.' ? name : `${name}${subpath.slice(1)}`);

/** Typed uses of the main export of the subpaths we know; any other subpath gets a namespace import. */
const TYPED_USES: Record<string, string> = {
  '.': `import { createClient, memoryStore, type OnceClient } from 'oncefetch';
const client: OnceClient = createClient({ tenant: 't1', store: memoryStore() });
export const res: Promise<Response> = client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'a', ref: 'r' } });`,
  './sqlite': `import { sqliteStore } from 'oncefetch/sqlite';
import type { OnceStore } from 'oncefetch';
export const sqlite: OnceStore = sqliteStore({ path: 'x.db' });`,
  './postgres': `import { postgresStore } from 'oncefetch/postgres';
import type { OnceStore } from 'oncefetch';
export const pg: OnceStore = postgresStore({ connectionString: 'postgres://localhost/x' });`,
  './indexeddb': `import { indexedDbStore } from 'oncefetch/indexeddb';
import type { OnceStore } from 'oncefetch';
export const idb: () => OnceStore = () => indexedDbStore();`,
  './testing': `import { describeStoreContract, startProvider, type Provider } from 'oncefetch/testing';
export const provider: Promise<Provider> = startProvider({ requireKey: true });
export const suite: typeof describeStoreContract = describeStoreContract;`,
  './testing/provider': `import { startProvider, FAULT_KINDS, type Provider } from 'oncefetch/testing/provider';
export const provider: Promise<Provider> = startProvider({ requireKey: true });
export const kinds: readonly string[] = FAULT_KINDS;`,
};

describe.skipIf(!ENABLED)('the packed tarball, installed in a fresh project', { timeout: 600_000 }, () => {
  const pkg = readPkg(ROOT);
  const subpaths = Object.keys(pkg.exports);
  const codeSubpaths = subpaths.filter((s) => !s.endsWith('.json'));
  let tmp = '';
  let project = '';
  let tarball = '';

  beforeAll(async () => {
    const started = Date.now();
    const lap = (what: string) => console.log(`[package] ${what} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    tmp = mkdtempSync(join(tmpdir(), 'oncefetch-package-'));
    const dist = join(ROOT, 'dist', 'index.js');
    const sourcesChanged = Math.max(newestMtime(join(ROOT, 'src')), statSync(join(ROOT, 'package.json')).mtimeMs);
    if (!existsSync(dist) || statSync(dist).mtimeMs < sourcesChanged) {
      await run('npm', ['run', 'build'], ROOT, 180_000);
      lap('built');
    }
    const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', tmp], ROOT, 120_000)) as { filename: string }[];
    tarball = join(tmp, packed[0]?.filename ?? '');
    lap(`packed ${tarball}`);

    project = join(tmp, 'consumer');
    await run('mkdir', [project], tmp, 5_000);
    // npm 11 runs a dependency's install script only when the project approves it.
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', allowScripts: { 'better-sqlite3': true } }, null, 2));
    // vitest: the optional peer that oncefetch/testing imports; @types/node: a typical consumer.
    await run(
      'npm',
      ['install', tarball, `vitest@${version('vitest')}`, `@types/node@${version('@types/node')}`, '--no-audit', '--no-fund', '--prefer-offline'],
      project,
      480_000,
      cleanEnv({ JOBS: 'max' }),
    );
    lap('installed');
  }, 600_000);

  afterAll(() => {
    if (tmp !== '') rmSync(tmp, { recursive: true, force: true });
  });

  it('installs without optional peers and with the native SQLite binding', () => {
    const installed = readdirSync(join(project, 'node_modules'));
    expect(installed).toContain('better-sqlite3');
    expect(installed).not.toContain('@opentelemetry');
    expect(installed).not.toContain('pg');
    expect(existsSync(join(project, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'))).toBe(true);
  });

  it('every subpath of the exports map loads with ESM import', async () => {
    const script = `
for (const s of ${JSON.stringify(subpaths.map((s) => specifier(pkg.name, s)))}) {
  const m = s.endsWith('.json') ? await import(s, { with: { type: 'json' } }) : await import(s);
  if (Object.keys(m).length === 0) throw new Error(s + ' exports nothing');
  console.log(s, Object.keys(m).length);
}`;
    const out = await run(process.execPath, ['--input-type=module', '-e', script], project, 60_000);
    expect(out.trim().split('\n')).toHaveLength(subpaths.length);
  });

  it('every code subpath loads with require() (Node >= 20.19)', async () => {
    const script = `for (const s of ${JSON.stringify(codeSubpaths.map((s) => specifier(pkg.name, s)))}) {
  const m = require(s);
  if (Object.keys(m).length === 0) throw new Error(s + ' exports nothing');
}
if (typeof require('oncefetch').createClient !== 'function') throw new Error('no createClient');`;
    await run(process.execPath, ['--input-type=commonjs', '-e', script], project, 60_000);
  });

  it('works from the tarball: SQLite store, the testing provider, no @opentelemetry/api installed', async () => {
    const script = `
import { createClient } from 'oncefetch';
import { sqliteStore } from 'oncefetch/sqlite';
import { startProvider } from 'oncefetch/testing';
const provider = await startProvider();
provider.fault({ kind: 'drop_after_commit' });
const client = createClient({ store: sqliteStore({ path: 'smoke.db' }), providerDedupes: true, retry: { baseDelayMs: 1 } });
const res = await client.fetch(provider.url + '/orders', {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref: 'A-1' }),
  once: { action: 'create-order', ref: 'A-1' },
});
console.log(JSON.stringify({ status: res.status, effects: provider.effectsFor('A-1'), attempts: client.stats().attempts }));
await client.close();
await provider.close();`;
    const out = await run(process.execPath, ['--input-type=module', '-e', script], project, 60_000);
    expect(JSON.parse(out.trim())).toEqual({ status: 201, effects: 1, attempts: 2 });
  });

  it('types: a strict tsc --noEmit consumer (module nodenext) imports every subpath', async () => {
    // One file per subpath; skipLibCheck: false also checks our .d.ts files and what they import.
    const files = codeSubpaths.map((s, i) => {
      const file = `consumer-${i}.ts`;
      writeFileSync(join(project, file), `${TYPED_USES[s] ?? `import * as entry from '${specifier(pkg.name, s)}';\nexport type Entry = typeof entry;`}\n`);
      return file;
    });
    // A CommonJS consumer: TypeScript models require() of ESM under module nodenext (TS >= 5.8).
    writeFileSync(join(project, 'consumer-require.cts'), `import once = require('oncefetch');\nexport const create: typeof once.createClient = once.createClient;\n`);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2023', 'dom'],
          types: ['node'],
          noEmit: true,
          skipLibCheck: false,
        },
        files: [...files, 'consumer-require.cts'],
      }),
    );
    await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], project, 120_000);
  });

  it('links every bin of the package', () => {
    for (const name of Object.keys(pkg.bin ?? {})) {
      expect(existsSync(join(project, 'node_modules', '.bin', name)), `bin ${name}`).toBe(true);
    }
  });

  it('publint --strict and attw (profile esm-only) report nothing', async () => {
    // esm-only: attw ignores node10 (no exports map) and node16 from CommonJS, whose model
    // predates require(esm); Node >= 20.19 (our engines floor) loads this ESM with require().
    expect(pkg.engines.node).toBe('>=20.19');
    const out = await run('npm', ['run', 'check:package'], ROOT, 180_000);
    expect(out).toMatch(/All good!/);
    // attw lists the ignored resolutions too; a problem in a checked one fails the command.
    expect(out).not.toMatch(/^(?!.*\(ignored).*(💀|❌|⚠️)/mu);
  });

  // better-sqlite3 is an optional dependency: a browser app (or a machine without a compiler)
  // installs oncefetch without it; only the SQLite store needs it, and says so.
  describe('installed with --omit=optional', () => {
    let lean = '';
    beforeAll(async () => {
      lean = join(tmp, 'lean');
      await run('mkdir', [lean], tmp, 5_000);
      writeFileSync(join(lean, 'package.json'), JSON.stringify({ name: 'lean', version: '1.0.0', private: true, type: 'module' }, null, 2));
      await run('npm', ['install', tarball, '--omit=optional', '--no-audit', '--no-fund', '--prefer-offline'], lean, 240_000);
    }, 300_000);

    it('has no better-sqlite3 and no vitest, and works with another store; the SQLite default says what to install', async () => {
      const installed = readdirSync(join(lean, 'node_modules'));
      expect(installed).not.toContain('better-sqlite3');
      expect(installed).not.toContain('vitest');
      // oncefetch/testing/provider needs no vitest: it counts the effects at the provider.
      const script = `
import { createClient, memoryStore } from 'oncefetch';
import { startProvider } from 'oncefetch/testing/provider';
let defaultError;
try { createClient({ tenant: 't1' }); } catch (e) { defaultError = { name: e.name, code: e.code, message: e.message }; }
const provider = await startProvider({ requireKey: true });
provider.fault({ kind: 'drop_after_commit', match: { ref: 'A-1' } });
const client = createClient({ tenant: 't1', store: memoryStore(), providerDedupes: true, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
const call = () => client.fetch(provider.url + '/orders', {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref: 'A-1', sku: 'book' }),
  once: { action: 'create-order', ref: 'A-1' },
});
const statuses = [(await call()).status, (await call()).status];
console.log(JSON.stringify({ statuses, effects: provider.effectsFor('A-1'), posts: provider.requests.length, defaultError }));
await provider.close();`;
      const out = await run(process.execPath, ['--input-type=module', '-e', script], lean, 60_000, cleanEnv({ ONCEFETCH_DB: join(lean, 'db', 'once.db') }));
      const got = JSON.parse(out.trim()) as { statuses: number[]; effects: number; posts: number; defaultError: { name: string; code: string; message: string } };
      // The first attempt's response is dropped after the provider committed; the retry carries the
      // same key and gets the provider's replay; the second call is a replay from the store.
      expect(got).toMatchObject({ statuses: [201, 201], effects: 1, posts: 2, defaultError: { name: 'StoreError', code: 'STORE_ERROR' } });
      expect(got.defaultError.message).toMatch(/better-sqlite3 cannot be loaded \(Cannot find module 'better-sqlite3'.*npm install better-sqlite3/);
      expect(existsSync(join(lean, 'db'))).toBe(false);
    });
  });
});
