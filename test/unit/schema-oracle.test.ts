/**
 * The shipped validator (src/schema.ts) against zod as an independent oracle:
 * the record schema and the option schema are written a second time here in
 * zod, and on generated values both must agree: the same verdict, the same
 * output (unknown record keys stripped), and for a rejection the same path and
 * error class. zod is a dev dependency only: the shipped bundle stays small.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import * as z from 'zod/mini';
import { memoryStore } from '../../src/index.js';
import { validateOptions } from '../../src/options.js';
import { RECORD_CHECK, SCHEMA_VERSION, applyEvent, newRecord, parseRecord, type OperationRecord } from '../../src/operation/record.js';
import { StoreError } from '../../src/errors.js';
import { Issue } from '../../src/schema.js';
import { isExactRecord } from '../../src/operation/record-shape.js';

const nat = z.int().check(z.nonnegative());
const status = z.nullable(z.int());
const ZOD_RECORD = z.object({
  schemaVersion: z.literal(SCHEMA_VERSION),
  id: z.string().check(z.minLength(1)),
  tenant: z.string(),
  action: z.string(),
  ref: z.string(),
  key: z.string().check(z.minLength(1)),
  keySource: z.enum(['minted', 'caller']),
  fingerprint: z.string().check(z.regex(/^[0-9a-f]{64}$/)),
  request: z.nullable(z.object({ method: z.string(), url: z.string() })),
  state: z.enum(['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled']),
  generation: nat,
  lease: z.nullable(z.object({ owner: z.string(), expiresAt: nat })),
  createdAt: nat,
  updatedAt: nat,
  expiresAt: nat,
  attempts: z.array(
    z.object({
      id: z.string().check(z.minLength(1)),
      number: z.int().check(z.positive()),
      generation: nat,
      owner: z.string(),
      startedAt: nat,
      finishedAt: z.nullable(nat),
      class: z.nullable(z.enum(['success', 'not_sent', 'retryable', 'ambiguous', 'terminal', 'conflict'])),
      status,
      reason: z.nullable(z.string()),
    }),
  ),
  evidence: z.array(
    z.object({
      at: nat,
      kind: z.enum(['attempt', 'lookup', 'late_response', 'stale_write', 'takeover', 'cancel', 'stop']),
      generation: nat,
      owner: z.string(),
      detail: z.string(),
      status,
    }),
  ),
  result: z.nullable(
    z.object({
      kind: z.enum(['response', 'value']),
      source: z.enum(['attempt', 'lookup']),
      status: z.int(),
      statusText: z.string(),
      headers: z.array(z.tuple([z.string(), z.string()])),
      body: z.string(),
      bodyTruncated: z.boolean(),
    }),
  ),
  error: z.nullable(z.object({ code: z.string(), message: z.string() })),
  cancelRequestedAt: z.nullable(nat),
});

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

/** `root` with `value` at `path`: copies the objects along the path, shares the rest (functions too). */
function setAt(root: unknown, path: ReadonlyArray<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const [key, ...rest] = path;
  const node = (typeof root === 'object' && root !== null ? root : {}) as Record<string | number, unknown>;
  const copy = (Array.isArray(node) ? [...node] : { ...node }) as Record<string | number, unknown>;
  copy[key!] = setAt(node[key!], rest, value);
  return copy;
}

/** Values that hit every branch of the checks: bounds, types, empty and near-miss strings. */
const odd = fc.oneof(
  fc.anything(),
  fc.constantFrom(-1, 0, 1, 1.5, 99, 100, 101, Number.NaN, Infinity, -Infinity, 2 ** 53, '', 'x', 'in_flight', 'zzz', 'full', null, undefined, [], {}, ['a', 'b'], ['a'], ['a', 1], true, false, 'f'.repeat(64), 'F'.repeat(64), () => 1),
);

describe('record schema vs zod', () => {
  it('accepts every record the state machine produces, unchanged (the same object), also after a JSON round trip', () => {
    for (const r of lifecycle()) {
      expect(RECORD_CHECK(r)).toBe(r);
      const copy = JSON.parse(JSON.stringify(r)) as unknown;
      expect(RECORD_CHECK(copy)).toBe(copy);
      expect(ZOD_RECORD.safeParse(r).success).toBe(true);
    }
  });

  it('strips unknown keys at every level, as zod does', () => {
    const [, , , found] = lifecycle();
    const padded = { ...found!, padding: 'x', lease: { owner: 'o', expiresAt: 5, extra: 1 }, attempts: found!.attempts.map((a) => ({ ...a, more: true })) };
    const ours = RECORD_CHECK(padded);
    expect(ours).toEqual(ZOD_RECORD.parse(padded));
    expect(ours).not.toHaveProperty('padding');
    expect(parseRecord(JSON.stringify(padded), 'test')).toEqual(ours);
  });

  it('whatever one field is replaced with: the same verdict, output and path as zod', () => {
    const records = lifecycle();
    let rejected = 0;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: records.length - 1 }), fc.nat(), odd, (which, pick, value) => {
        const base = records[which]!;
        const all = paths(base);
        const path = all[pick % all.length]!;
        const mutated = setAt(base, path, value);
        const ours = RECORD_CHECK(mutated);
        const theirs = ZOD_RECORD.safeParse(mutated);
        expect(ours instanceof Issue).toBe(!theirs.success);
        if (theirs.success) expect(ours).toEqual(theirs.data);
        else {
          rejected++;
          expect((ours as Issue).path).toEqual(theirs.error.issues[0]?.path);
        }
      }),
      { numRuns: 4000 },
    );
    expect(rejected).toBeGreaterThan(1000); // the generator does reach the rejections
  });

  it('the fast pre-check (isExactRecord) accepts what the engine writes, and only what the schema returns unchanged', () => {
    const records = lifecycle();
    for (const r of records) expect(isExactRecord(JSON.parse(JSON.stringify(r)), SCHEMA_VERSION)).toBe(true);
    expect(isExactRecord({ ...records[0]!, padding: 'x' }, SCHEMA_VERSION)).toBe(false); // the schema would strip it
    let accepted = 0;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: records.length - 1 }), fc.nat(), odd, (which, pick, value) => {
        const base = records[which]!;
        const all = paths(base);
        const mutated = setAt(base, all[pick % all.length]!, value);
        if (!isExactRecord(mutated, SCHEMA_VERSION)) return;
        accepted++;
        expect(RECORD_CHECK(mutated)).toBe(mutated);
      }),
      { numRuns: 3000 },
    );
    expect(accepted).toBeGreaterThan(100);
  });

  it('the Node entry points install the pre-check, and parseRecord then consults it first', async () => {
    vi.resetModules();
    const fresh = await import('../../src/operation/record.js');
    expect(fresh.installedPrecheck()).toBeUndefined(); // the browser entry's state: the schema alone
    const [r] = lifecycle();
    const copy = JSON.parse(JSON.stringify(r)) as unknown;
    expect(fresh.parseRecord(copy, 'test')).toBe(copy);
    await import('../../src/index.js');
    const shape = await import('../../src/operation/record-shape.js');
    expect(fresh.installedPrecheck()).toBe(shape.isExactRecord);
    const seen: unknown[] = [];
    fresh.usePrecheck((v, version): v is OperationRecord => (seen.push(v), shape.isExactRecord(v, version)));
    expect(fresh.parseRecord(copy, 'test')).toBe(copy);
    expect(() => fresh.parseRecord({ ...(copy as object), generation: -1 }, 'w')).toThrow('invalid at "generation"');
    expect(seen).toHaveLength(2);
    fresh.usePrecheck(shape.isExactRecord);
    for (const entry of ['../../src/stores/sqlite.js', '../../src/stores/postgres.js']) {
      vi.resetModules();
      const again = await import('../../src/operation/record.js');
      await import(entry);
      expect(again.installedPrecheck(), entry).toBeDefined();
    }
  });

  it('a rejected row is a StoreError naming the field', () => {
    const [r] = lifecycle();
    expect(() => parseRecord({ ...r, generation: -1 }, 'sqlite record x')).toThrow(StoreError);
    expect(() => parseRecord({ ...r, generation: -1 }, 'sqlite record x')).toThrow('sqlite record x: stored record is invalid at "generation": must be >= 0');
    expect(() => parseRecord({ ...r, attempts: [{}] }, 'w')).toThrow('w: stored record is invalid at "attempts.0.id": must be of type string');
    expect(() => parseRecord({ ...r, state: 'done' }, 'w')).toThrow(/invalid at "state": must be one of "pending", /);
    expect(() => parseRecord('{', 'w')).toThrow('w: stored record is not valid JSON');
  });
});

const fn = z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function');
const ms = z.int().check(z.nonnegative());
const positiveMs = z.int().check(z.positive());
const nonEmpty = z.string().check(z.minLength(1));
const nonNegative = z.number().check(z.nonnegative());
/** The option schema as it was written in zod before the shipped validator replaced it. */
const ZOD_OPTIONS = z.strictObject({
  store: z.optional(z.custom((v) => typeof v === 'object' && v !== null && typeof (v as { claim?: unknown }).claim === 'function')),
  tenant: z.optional(nonEmpty),
  fetch: z.optional(fn),
  keyHeader: z.optional(z.string().check(z.regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/))),
  quoteKey: z.optional(z.boolean()),
  retry: z.optional(
    z.strictObject({
      maxAttempts: z.optional(z.int().check(z.minimum(1), z.maximum(100))),
      baseDelayMs: z.optional(ms),
      maxDelayMs: z.optional(ms),
      attemptTimeoutMs: z.optional(positiveMs),
      deadlineMs: z.optional(positiveMs),
      maxRetryAfterMs: z.optional(ms),
      jitter: z.optional(z.enum(['full', 'decorrelated', 'none'])),
      budget: z.optional(
        z.union([
          z.literal(false),
          z.strictObject({ ratio: z.optional(z.number().check(z.minimum(0), z.maximum(1))), reserve: z.optional(nonNegative), maxTokens: z.optional(nonNegative) }),
        ]),
      ),
    }),
  ),
  retentionMs: z.optional(positiveMs),
  providerRetentionMs: z.optional(positiveMs),
  leaseMs: z.optional(z.int().check(z.minimum(100))),
  inFlightWaitMs: z.optional(ms),
  providerDedupes: z.optional(z.boolean()),
  settleMs: z.optional(ms),
  lookups: z.optional(z.record(z.string(), fn)),
  sensitiveHeaders: z.optional(z.array(nonEmpty)),
  maxBodyBytes: z.optional(positiveMs),
  maxStoredBodyBytes: z.optional(ms),
  onceMethods: z.optional(z.array(nonEmpty)),
  onEvent: z.optional(fn),
  telemetry: z.optional(z.boolean()),
  owner: z.optional(nonEmpty),
  now: z.optional(fn),
  random: z.optional(fn),
});

const GOOD_OPTIONS = {
  store: memoryStore(),
  tenant: 't1',
  fetch: globalThis.fetch,
  keyHeader: 'X-Key',
  quoteKey: true,
  retry: { maxAttempts: 3, baseDelayMs: 0, maxDelayMs: 10, attemptTimeoutMs: 1, deadlineMs: 5, maxRetryAfterMs: 0, jitter: 'none', budget: { ratio: 0.5, reserve: 1, maxTokens: 2 } },
  retentionMs: 1,
  providerRetentionMs: 2,
  leaseMs: 100,
  inFlightWaitMs: 0,
  providerDedupes: false,
  settleMs: 0,
  lookups: { a: async () => null },
  sensitiveHeaders: ['x-a'],
  maxBodyBytes: 1,
  maxStoredBodyBytes: 0,
  onceMethods: ['PUT'],
  onEvent: () => undefined,
  telemetry: false,
  owner: 'w',
  now: Date.now,
  random: Math.random,
};

function verdict(options: unknown): { ok: true } | { ok: false; error: Error } {
  try {
    validateOptions(options, 'createClient');
    return { ok: true };
  } catch (error) {
    return { ok: false, error: error as Error };
  }
}

describe('option schema vs zod', () => {
  it('the documented options pass both', () => {
    expect(verdict(GOOD_OPTIONS)).toEqual({ ok: true });
    expect(ZOD_OPTIONS.safeParse(GOOD_OPTIONS).success).toBe(true);
  });

  it('whatever one option (or a new key) is set to: the same verdict; a range issue is a RangeError at the same path', () => {
    const keys = paths(GOOD_OPTIONS).filter((p) => p.length > 0 && p[0] !== 'store' && p[0] !== 'lookups' || p.length === 1);
    let rejected = 0;
    fc.assert(
      fc.property(fc.nat(), odd, fc.boolean(), (pick, value, newKey) => {
        const path = newKey ? ['retry', 'budget', 'extra'].slice(0, (pick % 3) + 1).concat('zz') : keys[pick % keys.length]!;
        const options = setAt({ ...GOOD_OPTIONS, store: undefined }, path, value);
        const ours = verdict(options);
        const theirs = ZOD_OPTIONS.safeParse(options);
        expect(ours.ok).toBe(theirs.success);
        if (!ours.ok && !theirs.success) {
          rejected++;
          expect(ours.error.message).toMatch(/^createClient: /);
          const issue = theirs.error.issues[0]!;
          if (issue.code === 'too_small' || issue.code === 'too_big') {
            expect(ours.error).toBeInstanceOf(RangeError);
            expect(ours.error.message).toContain(`option "${issue.path.join('.')}" must `);
          } else {
            expect(ours.error).toBeInstanceOf(TypeError);
            const name = issue.path.length === 0 ? 'options' : `option "${issue.path.join('.')}"`;
            expect(ours.error.message).toContain(`createClient: ${name} `);
          }
        }
      }),
      { numRuns: 4000 },
    );
    expect(rejected).toBeGreaterThan(1000);
  });
});
