/**
 * Only an array of operations (objects), of at most 10,000 (as many as the keyless guard remembers), is
 * a batch whose elements the guard remembers: a list of values is data. Before, after an unknown
 * `[1,2,3]` a later `[3,4]` to the same URL was refused, and every keyless array call hashed each
 * element while anything was remembered (a review: a 20,000-element array took 1.7 s instead of 0.44 s).
 */
import { describe, expect, it } from 'vitest';
import { elementFingerprints } from '../../src/operation/fingerprint.js';

const fps = (body: string): Promise<string[]> =>
  elementFingerprints({ method: 'POST', url: 'https://api.example.test/graphql', body: new TextEncoder().encode(body), contentType: 'application/json' });

describe('elementFingerprints', () => {
  it('gives one per operation of a batch of objects', async () => {
    expect(await fps('[{"query":"mutation A"},{"query":"mutation B"}]')).toHaveLength(2);
    expect(await fps(`[${Array.from({ length: 10_000 }, (_, i) => `{"i":${i}}`).join(',')}]`)).toHaveLength(10_000);
  });
  it('gives none for an array of values, a mixed array, nested arrays or more than 10,000 elements', async () => {
    expect(await fps('[1,2,3]')).toEqual([]);
    expect(await fps('["a","b"]')).toEqual([]);
    expect(await fps('[{"a":1},2]')).toEqual([]);
    expect(await fps('[[{"a":1}]]')).toEqual([]);
    expect(await fps('[{"a":1},null]')).toEqual([]);
    expect(await fps(`[${Array.from({ length: 10_001 }, (_, i) => `{"i":${i}}`).join(',')}]`)).toEqual([]);
  });
});
