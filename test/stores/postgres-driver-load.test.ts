/**
 * pg that is installed but cannot load: Next.js's Edge Runtime (a trial with Next.js 16.4.6,
 * `export const runtime = 'edge'` and postgresStore) fails its import with "Failed to load external
 * module node:util/types: TypeError: Native module not found: node:util/types". The StoreError said
 * "needs the pg package, an optional peer dependency: npm install pg", which sends the user to
 * install what they have. Only a missing pg gets that advice now. The sources run from a copy whose
 * node_modules links every package of this repository but pg (replaced by one that throws on load,
 * or absent). No database is reached.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/setup.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function firstCallError(pg: 'throws' | 'missing' | 'broken-dependency' | 'syntax-error'): Promise<{ code: string; message: string }> {
  const tmp = tempDir();
  try {
    cpSync(join(ROOT, 'src'), join(tmp.dir, 'src'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(tmp.dir, 'package.json'));
    const modules = join(ROOT, 'node_modules');
    mkdirSync(join(tmp.dir, 'node_modules'));
    for (const name of readdirSync(modules)) {
      if (name !== 'pg' && !name.startsWith('pg-') && !name.startsWith('.')) symlinkSync(join(modules, name), join(tmp.dir, 'node_modules', name));
    }
    const body = {
      throws: "throw new Error('Failed to load external module node:util/types: TypeError: Native module not found: node:util/types');\n",
      // a broken install: pg there, one of its own dependencies not (as pg's lib/index.js requires pg-pool)
      'broken-dependency': "module.exports = require('pg-pool');\n",
      // a damaged file of pg, in Node
      'syntax-error': 'module.exports = {;\n',
    }[pg as string];
    if (body !== undefined) {
      mkdirSync(join(tmp.dir, 'node_modules/pg'));
      writeFileSync(join(tmp.dir, 'node_modules/pg/package.json'), '{"name":"pg","version":"8.99.0","main":"index.js"}');
      writeFileSync(join(tmp.dir, 'node_modules/pg/index.js'), body);
    }
    const script = join(tmp.dir, 'probe.ts');
    writeFileSync(
      script,
      "import { postgresStore } from './src/stores/postgres.ts';\n" +
        "const store = postgresStore({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });\n" +
        'const error = await store.get("x").then(() => undefined, (e) => e);\n' +
        'console.log(JSON.stringify({ code: error?.code, message: error?.message }));\n' +
        'await store.close().catch(() => undefined);\n',
    );
    const args = ['--import', pathToFileURL(join(modules, 'tsx/dist/loader.mjs')).href, script];
    const stdout = await new Promise<string>((done, fail) => {
      execFile(process.execPath, args, { cwd: tmp.dir, timeout: 30_000 }, (error, out, err) => (error === null ? done(out) : fail(new Error(err))));
    });
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as { code: string; message: string };
  } finally {
    tmp.cleanup();
  }
}

describe('postgresStore when pg cannot be loaded', () => {
  it('pg present but the Node modules it needs missing (an edge runtime): says why, not "npm install pg"', async () => {
    const error = await firstCallError('throws');
    expect(error.code).toBe('STORE_ERROR');
    expect(error.message).not.toMatch(/npm install pg/);
    expect(error.message).toMatch(/could not load the pg package \(Failed to load external module node:util\/types/);
    expect(error.message).toMatch(/edge runtime/);
  });

  it('pg installed but a dependency of its own missing (a broken install): names the missing module, does not say pg is missing', async () => {
    const error = await firstCallError('broken-dependency');
    expect(error.code).toBe('STORE_ERROR');
    expect(error.message).not.toMatch(/needs the pg package/);
    expect(error.message).toMatch(/could not load the pg package \(Cannot find module 'pg-pool'/);
  });

  it('pg installed but damaged, in Node: says to reinstall it, not only to run in Node', async () => {
    const error = await firstCallError('syntax-error');
    expect(error.code).toBe('STORE_ERROR');
    expect(error.message).toMatch(/could not load the pg package \(/);
    expect(error.message).toMatch(/In Node: its install is broken; reinstall it$/);
  });

  it('pg not installed: says to install it', async () => {
    const error = await firstCallError('missing');
    expect(error.code).toBe('STORE_ERROR');
    expect(error.message).toBe('oncefetch/postgres needs the pg package, an optional peer dependency: npm install pg');
  });
});
