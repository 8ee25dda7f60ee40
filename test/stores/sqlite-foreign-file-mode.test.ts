/**
 * The store tightens its database file to 0600 before it opens it. A path that names another
 * program's file (a typo, a config pointing at the wrong file, a symlink planted at a store path
 * under a shared directory) is refused as "not a database": its mode must be left as it was, not
 * changed first and refused after (a 0644 file a web server or another user reads went 0600).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { sqliteStore } from '../../src/stores/sqlite.js';

const mode = (p: string): number => statSync(p).mode & 0o777;

describe('sqliteStore on a file that is not a database', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'oncefetch-foreign-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const refused = (path: string): unknown => {
    try {
      sqliteStore({ path });
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it('refuses it and leaves its mode and bytes alone', () => {
    const path = join(dir, 'notes.db');
    writeFileSync(path, 'precious notes, not a database\n'.repeat(40));
    chmodSync(path, 0o644);
    const error = refused(path);
    expect(isOnceError(error) && error.code === 'STORE_ERROR').toBe(true);
    expect(mode(path)).toBe(0o644);
    expect(readFileSync(path, 'utf8')).toBe('precious notes, not a database\n'.repeat(40));
  });

  it('refuses one reached through a symlink at the store path, and leaves the target mode alone', () => {
    const target = join(dir, 'victim.txt');
    writeFileSync(target, 'served by another process\n');
    chmodSync(target, 0o644);
    const path = join(dir, 'store.db');
    symlinkSync(target, path);
    const error = refused(path);
    expect(isOnceError(error) && error.code === 'STORE_ERROR').toBe(true);
    expect(mode(target)).toBe(0o644);
    expect(readFileSync(target, 'utf8')).toBe('served by another process\n');
  });

  it('still tightens an existing database (and an empty file it makes one) to 0600', async () => {
    const path = join(dir, 'once.db');
    const first = sqliteStore({ path });
    await first.close();
    chmodSync(path, 0o644);
    const again = sqliteStore({ path });
    expect(mode(path)).toBe(0o600);
    await again.close();
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    chmodSync(empty, 0o644);
    const made = sqliteStore({ path: empty });
    expect(mode(empty)).toBe(0o600);
    await made.close();
  });

  // A device reads as empty (/dev/null: 0 bytes), which the header check took for a new file: as root,
  // `--store /dev/null` or a symlink to it at a store path made /dev/null 0600 for every other user.
  // (mknod of a null device in the test directory: root only, skipped otherwise)
  const nullDevice = (path: string): boolean => {
    try {
      execFileSync('mknod', ['-m', '666', path, 'c', '1', '3'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  it('leaves a device reached through a symlink at the store path alone (it reads as empty)', (ctx) => {
    const device = join(dir, 'null');
    if (!nullDevice(device)) return ctx.skip();
    const path = join(dir, 'store.db');
    symlinkSync(device, path);
    const error = refused(path);
    expect(isOnceError(error) && error.code === 'STORE_ERROR').toBe(true);
    expect(mode(device)).toBe(0o666);
  });
});
