/**
 * The store contract suite must be able to fail: it runs here (in a child vitest) against stores
 * that each break one rule of DESIGN §6 (test/fixtures/store-mutants/mutants.contract.ts), and
 * every broken store must fail at least one case, while an honest one passes all.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Report {
  testResults: { assertionResults: { ancestorTitles: string[]; title: string; status: string }[] }[];
}

it('the contract suite fails every broken store and passes the honest one', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'oncefetch-mutants-'));
  try {
    const out = join(dir, 'report.json');
    spawnSync(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--root', 'test/fixtures/store-mutants', '--reporter=json', `--outputFile=${out}`], {
      cwd: ROOT,
      stdio: 'ignore',
      timeout: 110_000,
    });
    const report = JSON.parse(readFileSync(out, 'utf8')) as Report;
    const failed = new Map<string, string[]>();
    for (const file of report.testResults) {
      for (const test of file.assertionResults) {
        const store = (test.ancestorTitles[0] ?? '').replace('store contract: ', '');
        if (!failed.has(store)) failed.set(store, []);
        if (test.status !== 'passed') failed.get(store)!.push(test.title);
      }
    }
    expect([...failed.keys()].sort()).toEqual(['cas-accepts-newer-expected', 'cas-ignores-generation', 'claim-overwrites', 'fences-per-connection', 'honest', 'serialised-per-connection']);
    expect(failed.get('honest')).toEqual([]);
    for (const [store, titles] of failed) if (store !== 'honest') expect(titles, `${store} passed the whole suite`).not.toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
