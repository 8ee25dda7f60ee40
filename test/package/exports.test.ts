/**
 * The exports map, read as it is now, agrees with the sources and with the
 * API docs: every subpath is built from a file in src/ and is a typedoc entry
 * point. Fast; runs everywhere (the tarball itself is checked by install.test.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { exports: Record<string, string | Record<string, string>> };
const typedoc = JSON.parse(readFileSync(`${ROOT}typedoc.json`, 'utf8')) as { entryPoints: string[] };

/** `./dist/stores/sqlite.d.ts` → `src/stores/sqlite.ts` */
const sourceOf = (target: string): string => target.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$|\.js$/, '.ts');

const codeSubpaths = Object.entries(pkg.exports).filter((entry): entry is [string, Record<string, string>] => typeof entry[1] === 'object');

describe('package exports', () => {
  it.each(codeSubpaths)('%s: types come first and every target is built from src/', (_subpath, conditions) => {
    expect(Object.keys(conditions)[0]).toBe('types');
    for (const target of Object.values(conditions)) expect(existsSync(`${ROOT}${sourceOf(target)}`), `${target} has no source ${sourceOf(target)}`).toBe(true);
  });

  it('typedoc.json documents exactly the exported entry points', () => {
    const expected = codeSubpaths.map(([, c]) => sourceOf(c['types'] ?? '')).sort();
    expect([...typedoc.entryPoints].sort(), 'typedoc.json "entryPoints" must list the source of every export\'s types').toEqual(expected);
  });

  // `oncefetch/testing` imports vitest (the contract suite); its provider alone must run under
  // jest, node:test or a plain script, where vitest is not installed.
  it('./testing/provider imports nothing but node: built-ins', async () => {
    const provider = codeSubpaths.find(([subpath]) => subpath === './testing/provider')?.[1];
    expect(provider, 'the exports map has ./testing/provider').toBeDefined();
    const result = await build({
      entryPoints: [`${ROOT}${sourceOf(provider?.['default'] ?? '')}`],
      bundle: true,
      write: false,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      metafile: true,
      logLevel: 'silent',
    });
    const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((p) => !p.startsWith('node:'))).toEqual([]);
  });
});
