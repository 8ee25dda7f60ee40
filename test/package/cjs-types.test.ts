/**
 * The declarations a CommonJS TypeScript project sees (package.json without "type": "module").
 * Node >= 20.19 runs its `require('oncefetch')` (require of ESM); whether tsc accepts the import
 * depends on its `module` setting:
 * - `commonjs` (whose default moduleResolution is `node10`, also ts-jest's and ts-node's usual
 *   tsconfig): node10 reads no exports map, so without `typesVersions` every subpath failed with
 *   TS2307 "Cannot find module 'oncefetch/sqlite'" (and ts-jest fails the test file on it);
 * - `node20` and `nodenext` model require(esm): accepted;
 * - `node16` (and `node18`) do not: TS1479, as the README says.
 * Fast (~20 s): the emitted declarations and package.json, as in node-types.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, emitAsPackage, typecheck } from '../helpers/typecheck.js';

type Pkg = { exports: Record<string, string | Record<string, string>>; typesVersions?: Record<string, Record<string, string[]>> };
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Pkg;

const CONSUMER = `import { createClient, memoryStore, type OnceClient } from 'oncefetch';
import { sqliteStore } from 'oncefetch/sqlite';
import { postgresStore } from 'oncefetch/postgres';
import { indexedDbStore } from 'oncefetch/indexeddb';
import { startProvider, type Provider } from 'oncefetch/testing/provider';
import { describeStoreContract } from 'oncefetch/testing';

export const client: OnceClient = createClient({ tenant: 't1', store: memoryStore() });
export const stores = [sqliteStore({ path: 'x.db' }), postgresStore({ connectionString: 'postgres://localhost/x' }), indexedDbStore()];
export const provider: Promise<Provider> = startProvider({ requireKey: true });
export const suite: typeof describeStoreContract = describeStoreContract;
// @ts-expect-error a number is no request: the types are read, not any
export const bad = client.fetch(42);
`;

const options = (module: string, moduleResolution?: string): Record<string, unknown> => ({
  strict: true,
  module,
  ...(moduleResolution === undefined ? {} : { moduleResolution }),
  target: 'es2022',
  lib: ['es2023'],
  types: ['node'],
  esModuleInterop: true,
  noEmit: true,
  skipLibCheck: true,
});

describe('declarations for a CommonJS TypeScript project', { timeout: 120_000 }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'oncefetch-cjs-types-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  beforeAll(async () => {
    const emitted = await emitAsPackage(tmp);
    expect(emitted.out).toBe('');
    for (const dep of ['@types', 'undici-types', 'vitest', '@vitest']) symlinkSync(join(ROOT, 'node_modules', dep), join(tmp, 'node_modules', dep), 'dir');
    writeFileSync(join(tmp, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'commonjs' }));
  });

  it('typesVersions maps every subpath of the exports map to the same declarations as its "types" condition', () => {
    const subpaths = Object.entries(pkg.exports).filter((e): e is [string, Record<string, string>] => typeof e[1] === 'object' && e[0] !== '.');
    const mapped = pkg.typesVersions?.['*'] ?? {};
    expect(Object.keys(mapped).sort()).toEqual(subpaths.map(([s]) => s.slice(2)).sort());
    for (const [subpath, conditions] of subpaths) expect(mapped[subpath.slice(2)], subpath).toEqual([conditions['types']]);
  });

  it.each([
    ['commonjs', undefined],
    ['commonjs', 'node10'],
    ['node20', undefined],
    ['nodenext', undefined],
  ])('module %s, moduleResolution %s: every subpath type-checks', async (module, moduleResolution) => {
    const checked = await typecheck(tmp, 'consumer.ts', CONSUMER, options(module, moduleResolution));
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
  });

  it('module node16: refused with TS1479 (no require of ESM in that model), as the README says', async () => {
    const checked = await typecheck(tmp, 'consumer.ts', CONSUMER, options('node16'));
    expect(checked.out).toMatch(/error TS1479: The current file is a CommonJS module whose imports will produce 'require' calls/);
    expect(checked.out).not.toMatch(/TS2307/);
  });
});
