/**
 * The declarations a browser TypeScript project sees once it installs oncefetch. TypeScript
 * adds every `node_modules/@types` package to a project that sets no `types`; a runtime
 * dependency that is (or pulls in) an `@types` package thus changes the project's globals:
 * `@types/node` makes `setTimeout` return a `NodeJS.Timeout` and lets `process` and `Buffer`
 * type-check in code that runs in a page.
 *
 * Emits the declarations of src/ (as `npm run build` does) into a temporary project as
 * `oncefetch`, links next to it every package a `npm install oncefetch --omit=optional` brings
 * (the production, non-optional entries of package-lock.json, hoisted as they are there), and
 * type-checks a browser consumer: lib dom + es2022, moduleResolution bundler, no `types`,
 * skipLibCheck false. Fast (~15 s); the tarball itself is checked by install.test.ts.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, emitAsPackage, typecheck } from '../helpers/typecheck.js';

type LockEntry = { dev?: boolean; optional?: boolean; devOptional?: boolean; peer?: boolean; link?: boolean };

/** Top-level `node_modules/<name>` entries of the lockfile that a production install without optional packages gets. */
function productionPackages(): string[] {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  return Object.entries(lock.packages)
    .filter(([path, e]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path) && !e.dev && !e.optional && !e.devOptional && !e.peer && !e.link)
    .map(([path]) => path.slice('node_modules/'.length))
    .sort();
}

const CONSUMER = `import { createClient, isOnceError, type OnceClient } from 'oncefetch';
import { indexedDbStore } from 'oncefetch/indexeddb';

const client: OnceClient = createClient({ tenant: 't1', store: indexedDbStore() });
export async function order(): Promise<number> {
  try {
    return (await client.fetch('/api/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } })).status;
  } catch (error) {
    if (isOnceError(error)) return -1;
    throw error;
  }
}
// The page's timers: a number, not Node's Timeout.
export const timer: number = setTimeout(() => {}, 1);
// @ts-expect-error no process in a page
export const env = process.env;
// @ts-expect-error no Buffer in a page
export const bytes = Buffer.from('x');
`;

describe('declarations for a browser project that installs oncefetch', { timeout: 120_000 }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'oncefetch-browser-types-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('a production install brings no @types package', () => {
    expect(productionPackages().filter((name) => name.startsWith('@types/'))).toEqual([]);
  });

  it('leave the project its DOM globals under tsc --strict, bundler resolution, no `types` (skipLibCheck: false)', async () => {
    const emitted = await emitAsPackage(tmp);
    expect(emitted.out).toBe('');
    const linked = productionPackages();
    expect(linked).toContain('idb-keyval');
    for (const name of linked) {
      const at = join(tmp, 'node_modules', name);
      mkdirSync(dirname(at), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules', name), at, 'dir');
    }
    writeFileSync(join(tmp, 'package.json'), JSON.stringify({ name: 'page', private: true, type: 'module' }));
    const checked = await typecheck(tmp, 'page.ts', CONSUMER, {
      strict: true,
      module: 'esnext',
      moduleResolution: 'bundler',
      target: 'es2022',
      lib: ['dom', 'es2022'],
      noEmit: true,
      skipLibCheck: false,
    });
    expect(checked.out).toBe('');
    expect(checked.code).toBe(0);
  });
});
