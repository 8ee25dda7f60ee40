/**
 * The fast record pre-check (`isExactRecord`) never accepts what the zod
 * schema would reject or change, and accepts the records the engine writes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isExactRecord } from '../../src/operation/record-shape.js';
import { RECORD_SCHEMA, SCHEMA_VERSION, applyEvent, newRecord, parseRecord, type OperationRecord } from '../../src/operation/record.js';

function lifecycle(): OperationRecord[] {
  const fresh = newRecord({
    scope: { tenant: 't', action: 'create', ref: 'r1' },
    key: 'k-1',
    keySource: 'minted',
    fingerprint: 'a'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'o',
    now: 1_000,
    leaseMs: 100,
    retentionMs: 10_000,
  });
  const started = applyEvent(fresh, { type: 'attempt_started', attemptId: 'a1' }, 1_001, 'o');
  const ambiguous = applyEvent(started, { type: 'attempt_finished', class: 'ambiguous', status: 502, reason: 'HTTP 502', result: null }, 1_002, 'o');
  const found = applyEvent(
    ambiguous,
    {
      type: 'lookup_found',
      detail: 'by ref',
      result: { kind: 'response', source: 'lookup', status: 200, statusText: 'OK', headers: [['content-type', 'application/json']], body: 'e30=', bodyTruncated: false },
    },
    1_003,
    'o',
  );
  const stopped = applyEvent(started, { type: 'stopped', code: 'ABORTED', message: 'stop' }, 1_004, 'o');
  const cancelled = applyEvent(fresh, { type: 'cancel' }, 1_005, 'o');
  return [fresh, started, ambiguous, found, stopped, cancelled, { ...fresh, request: null }];
}

/** Every path to a value inside `v`, objects and arrays included. */
function paths(v: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (typeof v !== 'object' || v === null) return [prefix];
  const out: Array<Array<string | number>> = [prefix];
  for (const [k, child] of Object.entries(v)) out.push(...paths(child, [...prefix, Array.isArray(v) ? Number(k) : k]));
  return out;
}

function setAt(root: unknown, path: ReadonlyArray<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let node = copy;
  for (const k of path.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = value;
  return copy;
}

describe('isExactRecord', () => {
  it('accepts every record the state machine produces, also after a JSON round trip', () => {
    for (const r of lifecycle()) {
      expect(isExactRecord(r, SCHEMA_VERSION)).toBe(true);
      expect(isExactRecord(JSON.parse(JSON.stringify(r)), SCHEMA_VERSION)).toBe(true);
      expect(RECORD_SCHEMA.safeParse(r).success).toBe(true);
    }
  });

  it('rejects extra keys, which the schema would strip (so the result could differ)', () => {
    const [r] = lifecycle();
    expect(isExactRecord({ ...r, padding: 'x' }, SCHEMA_VERSION)).toBe(false);
    expect(parseRecord({ ...r, padding: 'x' }, 'test')).toEqual(r);
  });

  it('whatever one field is replaced with: accepted only if the schema accepts it unchanged', () => {
    const records = lifecycle();
    const values = fc.oneof(
      fc.anything(),
      fc.constantFrom(-1, 0, 1, 1.5, Number.NaN, Infinity, 2 ** 53, '', 'x', 'in_flight', 'zzz', null, [], {}, ['a', 'b'], ['a'], true),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: records.length - 1 }), fc.nat(), values, (which, pick, value) => {
        const base = records[which]!;
        const all = paths(base);
        const path = all[pick % all.length]!;
        const mutated = setAt(base, path, value);
        if (!isExactRecord(mutated, SCHEMA_VERSION)) return;
        const parsed = RECORD_SCHEMA.safeParse(mutated);
        expect(parsed.success).toBe(true);
        expect(parsed.data).toEqual(mutated);
      }),
      { numRuns: 3000 },
    );
  });
});
