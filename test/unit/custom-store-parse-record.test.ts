/**
 * A custom store validates what it reads back with `parseRecord`, as the OnceStore contract says
 * ("Everything read back is validated (`parseRecord`)"): both entries must export it. A Redis
 * store trial found it named there and importable from neither, so a third party had to write its
 * own, weaker check (it let a record through that the schema refuses, until the suite caught it).
 */
import { describe, expect, it } from 'vitest';
import * as browser from '../../src/browser.js';
import * as node from '../../src/index.js';
import { newRecord } from '../../src/operation/record.js';

const record = newRecord({
  scope: { tenant: 't1', action: 'create-order', ref: 'A-17' },
  key: 'key-1',
  keySource: 'minted',
  fingerprint: 'f'.repeat(64),
  request: { method: 'POST', url: 'https://api.example.test/orders' },
  owner: 'owner-a',
  now: 1_000,
  leaseMs: 100,
  retentionMs: 1_000_000,
});

describe.each([['oncefetch (node)', node], ['oncefetch (browser)', browser]] as const)('%s', (_name, entry) => {
  it('exports parseRecord: a stored record reads back, a corrupt one is a StoreError', () => {
    const parseRecord = (entry as Record<string, unknown>)['parseRecord'] as typeof node.parseRecord | undefined;
    expect(typeof parseRecord).toBe('function');
    expect(parseRecord!(JSON.stringify(record), 'redis:get')).toEqual(record);
    for (const raw of ['{"trunc', '{"hello":"world"}', JSON.stringify({ ...record, fingerprint: 'not-hex' })]) {
      expect(() => parseRecord!(raw, 'redis:get')).toThrow(entry.StoreError);
    }
  });
});
