/**
 * A string flag's value that starts with '-' (a tenant "-1", an action "-x"). Before: `--tenant -1`
 * got node's parseArgs message ("argument is ambiguous … use '--tenant=-XYZ'") in every command,
 * and `--tenant --limit 5` (a forgotten value) the same words. Now a value with one leading dash is
 * the flag's value; a flag where the value should be (`--limit`, `-h`) is refused in our words,
 * naming the `--tenant=VALUE` form, never swallowed as the value.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import { explainCommand } from '../../src/cli/explain.js';
import type { CliIo } from '../../src/cli/format.js';
import { inspectCommand } from '../../src/cli/inspect.js';
import { purgeCommand } from '../../src/cli/purge.js';
import { showCommand } from '../../src/cli/show.js';
import { createClient } from '../../src/index.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { orderInit, tempDir } from '../helpers/setup.js';

function capture(): CliIo & { stdout: () => string; stderr: () => string } {
  let out = '';
  let err = '';
  return {
    out: (t) => void (out += t),
    err: (t) => void (err += t),
    errIsTty: false,
    stdout: () => out,
    stderr: () => err,
  };
}

async function usageError(run: Promise<number>): Promise<UsageError> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  return error as UsageError;
}

describe('a flag value that starts with a dash', () => {
  const tmp = tempDir();
  const db = join(tmp.dir, 'records.db');
  let sends = 0;

  beforeAll(async () => {
    const client = createClient({
      store: sqliteStore({ path: db }),
      tenant: '-1',
      settleMs: 0,
      fetch: () => {
        sends++;
        return Promise.resolve(new Response('{"id":"o1"}', { status: 201, headers: { 'content-type': 'application/json' } }));
      },
    });
    try {
      await client.fetch('https://api.example.test/orders', { ...orderInit('-abc'), once: { action: '-x', ref: '-abc' } });
    } finally {
      await client.close();
    }
    expect(sends).toBe(1);
  });

  afterAll(() => tmp.cleanup());

  it('show --tenant -1 --action -x reads that record (a ref with a dash goes after --)', async () => {
    const io = capture();
    expect(await showCommand(['--tenant', '-1', '--action', '-x', '--store', db, '--json', '--', '-abc'], io)).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({ tenant: '-1', action: '-x', ref: '-abc', state: 'succeeded' });
  });

  it('explain --action -x --tenant -1 explains it', async () => {
    const io = capture();
    expect(await explainCommand(['--action', '-x', '--tenant', '-1', '--store', db, '--json', '--', '-abc'], io)).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({ diagnosis: { code: 'succeeded' } });
  });

  it('inspect --tenant -1 counts that tenant only', async () => {
    const io = capture();
    expect(await inspectCommand(['--tenant', '-1', '--store', db, '--json'], io)).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({ tenant: '-1', total: 1, counts: { succeeded: 1 } });
  });

  it('the --tenant=-1 form is unchanged', async () => {
    const io = capture();
    expect(await inspectCommand(['--tenant=-1', '--store', db, '--json'], io)).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({ tenant: '-1', total: 1 });
  });

  it('a flag where a value should be is refused, naming the --flag=VALUE form, not taken as the value', async () => {
    const limit = await usageError(inspectCommand(['--tenant', '--limit', '5', '--store', db], capture()));
    expect(limit.message).toBe("--tenant needs a value, got the flag '--limit' (a value that starts with '-' is written --tenant=--limit)");
    const help = await usageError(showCommand(['A-1', '--action', '-h'], capture()));
    expect(help.message).toBe("--action needs a value, got the flag '-h' (a value that starts with '-' is written --action=-h)");
    const end = await usageError(purgeCommand(['--store', '--', 'x.db'], capture()));
    expect(end.message).toBe("--store needs a value, got the flag '--' (a value that starts with '-' is written --store=--)");
  });

  it('a number flag still refuses a negative number in its own words', async () => {
    const error = await usageError(inspectCommand(['--limit', '-1', '--store', db], capture()));
    expect(error.message).toBe('--limit must be a whole number from 0 to 10000 (got "-1")');
    const word = await usageError(inspectCommand(['--limit', '-x', '--store', db], capture()));
    expect(word.message).toBe('--limit must be a whole number from 0 to 10000 (got "-x")');
  });
});
