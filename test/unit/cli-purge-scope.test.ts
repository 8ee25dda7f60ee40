/**
 * `oncefetch purge --tenant x` (user trial) got node's parseArgs text ("Unknown option '--tenant'…").
 * Purge is store-wide by design (client.purge() refuses { tenant } too): the command says so in its own
 * words, a usage error (exit 2), before the store is opened.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import type { CliIo } from '../../src/cli/format.js';
import { purgeCommand } from '../../src/cli/purge.js';
import { tempDir } from '../helpers/setup.js';

const io: CliIo = { out: () => undefined, err: () => undefined, errIsTty: false };

describe('oncefetch purge with a scope flag', () => {
  it.each([
    [['--tenant', 'x'], '--tenant'],
    [['--tenant=x'], '--tenant'],
    [['--dry-run', '--action', 'a'], '--action'],
    [['--ref=r1', '--json'], '--ref'],
  ])('%j is a usage error saying purge is store-wide; no store is opened', async (flags, named) => {
    const tmp = tempDir();
    const db = join(tmp.dir, 'records.db');
    const error = await purgeCommand([...flags, '--store', db], io).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(UsageError);
    expect(error?.message).toBe(`purge takes no ${named}: it is store-wide, removing every tenant's terminal records past their expiresAt (set by each client's retentionMs), as client.purge() does`);
    expect(existsSync(db)).toBe(false);
    tmp.cleanup();
  });

  it('after --, a tenant-like argument is a positional, refused as before', async () => {
    const error = await purgeCommand(['--', '--tenant'], io).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toBe('unexpected argument "--tenant"');
  });
});
