/**
 * The validator's own behaviour (src/schema.ts), beyond what the zod oracle
 * compares: identity on valid input, copies only when stripping, messages and
 * error kinds, and objects that are not plain literals.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore, type OnceClientOptions } from '../../src/index.js';
import * as s from '../../src/schema.js';

const point = s.obj({ x: s.int(0, 10), label: s.optional(s.str(1)) });
const strictPoint = s.obj({ x: s.int(0, 10), label: s.optional(s.str(1)) }, true);

function issue(r: unknown): s.Issue {
  expect(r).toBeInstanceOf(s.Issue);
  return r as s.Issue;
}

describe('schema checks', () => {
  it('returns the very input when it is valid and has no unknown key', () => {
    const v = { x: 3 };
    expect(point(v)).toBe(v);
    const list = [v, { x: 4, label: 'a' }];
    expect(s.arr(point)(list)).toBe(list);
  });

  it('strips unknown keys into a copy, nested ones too, and leaves the input alone', () => {
    const v = { x: 3, extra: true };
    expect(point(v)).toEqual({ x: 3 });
    expect(v).toEqual({ x: 3, extra: true });
    const list = [{ x: 1 }, { x: 2, more: 1 }];
    const out = s.arr(point)(list) as unknown[];
    expect(out).toEqual([{ x: 1 }, { x: 2 }]);
    expect(out).not.toBe(list);
    expect(out[0]).toBe(list[0]);
  });

  it('copies an object that is not a plain literal into one', () => {
    class P {
      x = 1;
    }
    const out = point(new P());
    expect(out).toEqual({ x: 1 });
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    const bare = Object.assign(Object.create(null) as object, { x: 2 });
    expect(point(bare)).toBe(bare);
  });

  it('words the first issue and says its kind and path', () => {
    expect(issue(point({ x: 11 }))).toMatchObject({ message: 'must be <= 10', kind: 'range', path: ['x'] });
    expect(issue(point({ x: 1.5 }))).toMatchObject({ message: 'must be an integer', kind: 'type' });
    expect(issue(point({ x: 2 ** 53 }))).toMatchObject({ kind: 'range' });
    expect(issue(point({ x: '1' }))).toMatchObject({ message: 'must be of type number', kind: 'type' });
    expect(issue(point({ x: 1, label: '' }))).toMatchObject({ message: 'must have a length >= 1', kind: 'range', path: ['label'] });
    expect(issue(s.arr(point)([{ x: 1 }, {}]))).toMatchObject({ path: [1, 'x'] });
    expect(issue(s.oneOf(['a', 'b'])('c')).message).toBe('must be one of "a", "b"');
    expect(issue(s.str(0, /^a+$/)('b')).message).toBe('must match /^a+$/');
    expect(issue(s.stringPair(['a'])).kind).toBe('range');
    expect(issue(s.stringPair(['a', 1])).path).toEqual([1]);
    expect(issue(s.num()(Number.NaN)).message).toBe('must be of type number');
    expect(issue(s.num()(Infinity)).message).toBe('must be of type number');
    expect(issue(point(null)).message).toBe('must be of type object');
    expect(issue(point([])).message).toBe('must be of type object');
  });

  it('strict: names every unknown own key, also when the prototype supplies a known one', () => {
    expect(issue(strictPoint({ x: 1, y: 2, z: 3 }))).toMatchObject({ message: 'has unknown keys y, z', kind: 'keys', path: [] });
    const inherited = Object.assign(Object.create({ x: 1 }) as object, { typo: 1 });
    expect(issue(strictPoint(inherited)).message).toBe('has unknown keys typo');
  });

  it('createClient names an unknown option even when another comes from the prototype', () => {
    const options = Object.assign(Object.create({ tenant: 't1' }) as object, { store: memoryStore(), retries: 3 }) as OnceClientOptions;
    expect(() => createClient(options)).toThrow(/options has unknown keys retries/);
  });
});
