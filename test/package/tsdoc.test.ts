/**
 * STYLE.md: "TSDoc on every export, with @default and a short @example".
 * Runs scripts/check-tsdoc.mjs (npm run check:tsdoc) as a child process, so
 * that `npm test` fails on an export added without its summary or @example,
 * or on an option added without its @default. The script's own header states
 * the rules and the `@default undefined` convention.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('TSDoc of the public API', () => {
  it('every export has a summary and an @example, every optional option a @default', () => {
    const run = spawnSync(process.execPath, ['scripts/check-tsdoc.mjs'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    // The script prints one `file:line symbol: missing …` line per gap: show them on failure.
    expect(run.error).toBeUndefined();
    expect(run.stderr).toBe('');
    expect(run.status, run.stdout).toBe(0);
    expect(run.stdout).toMatch(/^check-tsdoc: \d+ exports documented/m);
  });
});
