/**
 * The browser entry, without a browser: it exports what the Node entry
 * exports (values and types: `types` in package.json points both at one
 * declaration file), bundles for browsers without any Node module, and the
 * package's conditional exports send browsers to it.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

function exportedNames(file: string, program: ts.Program): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  if (source === undefined) throw new Error(`${file} is not in the program`);
  const symbol = checker.getSymbolAtLocation(source);
  if (symbol === undefined) throw new Error(`${file} has no module symbol`);
  return checker.getExportsOfModule(symbol).map((s) => s.name).sort();
}

describe('browser entry', () => {
  it('exports the same names, values and types, as the Node entry', { timeout: 20_000 }, () => {
    const index = `${root}src/index.ts`;
    const browser = `${root}src/browser.ts`;
    const program = ts.createProgram([index, browser], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
      types: ['node'],
      strict: true,
      skipLibCheck: true,
      noEmit: true,
    });
    expect(exportedNames(browser, program)).toEqual(exportedNames(index, program));
  });

  it('bundles for browsers without node:*, better-sqlite3, undici or pg', async () => {
    const result = await build({
      entryPoints: [`${root}src/browser.ts`],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((p) => /^node:|node_modules\/(better-sqlite3|undici|pg)\//.test(p))).toEqual([]);
    expect(inputs.some((p) => p.includes('node_modules/idb-keyval/'))).toBe(true);
    // validation is src/schema.ts (zod is a dev dependency, the test oracle); the attempt loop is the engine's own (p-retry serves only the demo's naive client)
    expect(inputs.filter((p) => /node_modules\/(zod|p-retry)\//.test(p))).toEqual([]);
    // Node-only: the OpenTelemetry bridge (no import map in a bundled page) and the record pre-check (a hot-path shortcut)
    expect(inputs.filter((p) => /src\/(telemetry|operation\/record-shape)\.ts$/.test(p))).toEqual([]);
  });

  it('code-split as a bundler does: explain() is a lazy chunk and the page loads one file', async () => {
    const result = await build({
      entryPoints: [`${root}src/browser.ts`],
      bundle: true,
      write: false,
      splitting: true,
      outdir: `${root}.entry-test-out`,
      format: 'esm',
      platform: 'browser',
      metafile: true,
      logLevel: 'silent',
    });
    const outputs = Object.values(result.metafile.outputs);
    const entry = outputs.find((o) => o.entryPoint !== undefined);
    // A module shared by the entry and the lazy chunk would become a third file the page must load first.
    expect(entry?.imports.filter((i) => i.kind === 'import-statement')).toEqual([]);
    const lazy = outputs.filter((o) => o !== entry);
    expect(lazy.map((o) => Object.keys(o.inputs).filter((p) => p.startsWith('src/')).sort())).toEqual([
      ['src/explain/explain.ts', 'src/explain/facts.ts', 'src/explain/plan.ts'],
    ]);
  });

  it('package.json sends browsers to dist/browser.js and Node to dist/index.js', () => {
    const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, Record<string, string>> };
    const dot = pkg.exports['.'];
    expect(dot).toMatchObject({ browser: './dist/browser.js', node: './dist/index.js', default: './dist/browser.js' });
    expect(Object.keys(dot ?? {})[0]).toBe('types');
    expect(pkg.exports['./indexeddb']).toEqual({ types: './dist/stores/indexeddb.d.ts', default: './dist/stores/indexeddb.js' });
  });
});
