/**
 * Regression (review): recover() lists stale records with `onCorrupt`, and a corrupt row keeps its
 * place in the order and counts toward `limit`. A corrupt row is never updated, so it stays oldest:
 * with `limit` of them, every recover() reported the same corrupt rows and settled nothing else, for
 * good, while real ambiguous records waited. `limit` bounds the records recover() settles; the
 * corrupt rows met on the way are reported besides.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const open: OnceClient[] = [];

function client(options: OnceClientOptions = {}): OnceClient {
  const { client: c } = sqliteClient(join(tmp.dir, 'once.db'), { ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  open.push(c);
  return c;
}

const post = (c: OnceClient, ref: string) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref } });
const scope = (ref: string) => ({ tenant: 'default', action: 'create-order', ref });

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
  await provider.close();
  tmp.cleanup();
});

describe('recover() with corrupt rows ahead of the stale records', () => {
  it('corrupt rows do not use up the limit: the records behind them are settled, and the corrupt ones reported once each', async () => {
    const a = client();
    for (const ref of ['K-1', 'K-2', 'K-3', 'K-4']) {
      provider.fault({ kind: 'error_after_commit' });
      await expect(post(a, ref)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    }
    const raw = new Database(join(tmp.dir, 'once.db'));
    for (const ref of ['K-1', 'K-2']) raw.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run('{"truncated', (await a.get(scope(ref)))?.id);
    raw.close();

    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) } });
    const first = await b.recover({ limit: 2 });
    expect(first.resolved).toEqual([scope('K-3'), scope('K-4')]);
    expect(first.errors.map((e) => e.scope)).toEqual([scope('K-1'), scope('K-2')]);
    const second = await b.recover({ limit: 2 });
    expect(second.resolved).toEqual([]);
    expect(second.errors.map((e) => e.scope)).toEqual([scope('K-1'), scope('K-2')]);
    expect(provider.requests).toHaveLength(4);
    expect(provider.effects).toBe(4);
  });

  it('limit 1 behind two corrupt rows settles exactly one record', async () => {
    const a = client();
    for (const ref of ['K-1', 'K-2', 'K-3', 'K-4']) {
      provider.fault({ kind: 'error_after_commit' });
      await expect(post(a, ref)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    }
    const raw = new Database(join(tmp.dir, 'once.db'));
    for (const ref of ['K-1', 'K-2']) raw.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run('not json', (await a.get(scope(ref)))?.id);
    raw.close();
    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) } });
    const report = await b.recover({ limit: 1 });
    expect(report.resolved).toEqual([scope('K-3')]);
    expect(report.errors).toHaveLength(2);
    expect((await b.get(scope('K-4')))?.state).toBe('ambiguous');
  });

  it('more corrupt rows than eight times the limit still do not use it up: the record behind them is settled', async () => {
    const a = client();
    const refs = Array.from({ length: 10 }, (_, i) => `K-${i + 1}`);
    for (const ref of refs) {
      provider.fault({ kind: 'error_after_commit' });
      await expect(post(a, ref)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    }
    const raw = new Database(join(tmp.dir, 'once.db'));
    for (const ref of refs.slice(0, 9)) raw.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run('not json', (await a.get(scope(ref)))?.id);
    raw.close();
    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) } });
    const report = await b.recover({ limit: 1 });
    expect(report.resolved).toEqual([scope('K-10')]);
    expect(report.errors.map((e) => e.scope)).toEqual(refs.slice(0, 9).map(scope));
  });
});
