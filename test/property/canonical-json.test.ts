/**
 * Property-based tests of the canonical JSON behind every fingerprint:
 * - the same meaning gives the same fingerprint whatever the key order, spacing,
 *   number spelling or string escaping of the bytes sent;
 * - any change of a leaf (or a key) gives another fingerprint;
 * - a value JSON cannot carry faithfully is rejected with a TypeError, never coerced.
 *
 * fast-check prints the seed and the shrunk counterexample when a property fails;
 * rerun one with `{ seed, path }` in the `fc.assert` options.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalizeJsonText } from '../../src/operation/canonical-json.js';
import { fingerprintPayload, fingerprintRequest } from '../../src/operation/fingerprint.js';
import { mulberry32 } from '../../src/testing/provider-faults.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = (string | number)[];

const encoder = new TextEncoder();

/** The fingerprint `client.fetch` computes for a JSON body. */
function fingerprintText(text: string): Promise<string> {
  return fingerprintRequest({
    method: 'POST',
    url: 'https://api.example.test/orders',
    body: encoder.encode(text),
    contentType: 'application/json',
  });
}


/** Numbers JSON carries exactly: safe integers, non-integers, and integers written with an exponent (>= 1e21). */
function isCarried(n: number): boolean {
  return Number.isFinite(n) && (!Number.isInteger(n) || Number.isSafeInteger(n) || Math.abs(n) >= 1e21);
}

const numberArb = fc.oneof(
  fc.maxSafeInteger(),
  fc.integer({ min: -1000, max: 1000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter(isCarried),
  fc.constantFrom(0, -0, 0.1, 1e-7, 1e21, -1e21, 5e-324, Number.MAX_VALUE, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER),
);
const stringArb = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 6 }));
const keyArb = fc.oneof(
  fc.string({ maxLength: 5 }),
  fc.string({ unit: 'binary', maxLength: 3 }),
  fc.constantFrom('', 'a', 'b', 'B', '1', '10', '2', '__proto__', 'constructor', 'toJSON', 'é', 'e\u0301', '\u{1F600}', '\uFB33'),
);
const leafArb: fc.Arbitrary<Json> = fc.oneof(fc.constant(null), fc.boolean(), numberArb, stringArb);

const { json: jsonArb } = fc.letrec<{ json: Json; array: Json[]; object: { [key: string]: Json } }>((tie) => ({
  json: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leafArb, tie('array'), tie('object')),
  array: fc.array(tie('json'), { maxLength: 5 }),
  object: fc
    .uniqueArray(fc.tuple(keyArb, tie('json')), { selector: ([key]) => key, maxLength: 5 })
    .map((entries) => Object.fromEntries(entries) as { [key: string]: Json }),
}));

function isObject(value: Json): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Another spelling of the same number, chosen at random. */
function spellNumber(n: number, random: () => number): string {
  const plain = JSON.stringify(n);
  const r = random();
  if (r < 0.3) return n.toExponential(); // shortest round-trip digits, with an exponent
  if (r < 0.5 && Number.isInteger(n) && Math.abs(n) < 1e21) return `${plain}.0`;
  if (r < 0.6) return n.toExponential().replace('e+', 'E'); // 1.5E300
  return plain;
}

/** Another spelling of the same string: each UTF-16 unit either escaped as `\uXXXX` (either case) or as JSON.stringify writes it. */
function spellString(s: string, random: () => number): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const r = random();
    const hex = s.charCodeAt(i).toString(16).padStart(4, '0');
    if (r < 0.25) out += `\\u${hex}`;
    else if (r < 0.5) out += `\\u${hex.toUpperCase()}`;
    else out += JSON.stringify(s[i]).slice(1, -1);
  }
  return `${out}"`;
}

/** The same JSON value written differently: keys shuffled, random whitespace, numbers and strings respelled. */
function respell(value: Json, random: () => number): string {
  const ws = (): string => [' ', '', '\n', '\t', '\r\n  '][Math.floor(random() * 5)] ?? '';
  if (value === null) return 'null';
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') return spellNumber(value, random);
  if (typeof value === 'string') return spellString(value, random);
  if (Array.isArray(value)) return `[${ws()}${value.map((v) => respell(v, random)).join(`${ws()},${ws()}`)}${ws()}]`;
  const members = shuffled(Object.keys(value), random).map(
    (key) => `${ws()}${spellString(key, random)}${ws()}:${ws()}${respell(value[key] as Json, random)}`,
  );
  return `{${members.join(',')}${ws()}}`;
}

/** The same JS value with every object's keys inserted in another order. */
function reorder(value: Json, random: () => number): Json {
  if (Array.isArray(value)) return value.map((v) => reorder(v, random));
  if (!isObject(value)) return value;
  return Object.fromEntries(shuffled(Object.keys(value), random).map((key) => [key, reorder(value[key] as Json, random)]));
}

function leafPaths(value: Json, path: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) value.forEach((v, i) => leafPaths(v, [...path, i], out));
  else if (isObject(value)) for (const key of Object.keys(value)) leafPaths(value[key] as Json, [...path, key], out);
  else out.push(path);
  return out;
}

function keyPaths(value: Json, path: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) value.forEach((v, i) => keyPaths(v, [...path, i], out));
  else if (isObject(value)) {
    for (const key of Object.keys(value)) {
      out.push([...path, key]);
      keyPaths(value[key] as Json, [...path, key], out);
    }
  }
  return out;
}

function getAt(value: Json, path: Path): Json {
  let node: Json = value;
  for (const step of path) node = (node as Record<string | number, Json>)[step] as Json;
  return node;
}

/** A copy of `value` with the node at `path` replaced (`rename`: the last key renamed instead). */
function updateAt(value: Json, path: Path, replace: (node: Json) => Json, rename?: string): Json {
  const [step, ...rest] = path;
  if (step === undefined) return replace(value);
  if (Array.isArray(value)) return value.map((v, i) => (i === step ? updateAt(v, rest, replace, rename) : v));
  const obj = value as { [key: string]: Json };
  return Object.fromEntries(
    Object.keys(obj).map((key) => {
      if (key !== step) return [key, obj[key] as Json];
      if (rest.length === 0 && rename !== undefined) return [rename, obj[key] as Json];
      return [key, updateAt(obj[key] as Json, rest, replace, rename)];
    }),
  );
}

/** The next double up: the smallest change a number can undergo. */
function nextUp(n: number): number {
  if (n === 0) return Number.MIN_VALUE;
  const buffer = new DataView(new ArrayBuffer(8));
  buffer.setFloat64(0, n);
  const bits = buffer.getBigUint64(0);
  buffer.setBigUint64(0, n > 0 ? bits + 1n : bits - 1n);
  return buffer.getFloat64(0);
}

/** The smallest change of a leaf that JSON can carry. */
function neighbour(leaf: Json): Json {
  if (leaf === null) return false;
  if (typeof leaf === 'boolean') return !leaf;
  if (typeof leaf === 'string') return `${leaf} `;
  if (typeof leaf === 'number') {
    const up = nextUp(leaf);
    return isCarried(up) ? up : leaf - 1;
  }
  return leaf;
}

describe('canonical JSON: same meaning, same fingerprint', () => {
  it('key order, whitespace, number spelling and string escapes do not change the canonical text or the fingerprint', async () => {
    await fc.assert(
      fc.asyncProperty(jsonArb, fc.integer(), async (value, seed) => {
        const random = mulberry32(seed);
        const canonical = canonicalJson(value);
        const plain = JSON.stringify(value);
        const other = respell(value, random);
        expect(canonicalizeJsonText(plain)).toBe(canonical);
        expect(canonicalizeJsonText(other)).toBe(canonical);
        expect(canonicalizeJsonText(canonical)).toBe(canonical); // a fixed point
        expect(canonicalJson(reorder(value, random))).toBe(canonical);
        expect(await fingerprintText(other)).toBe(await fingerprintText(plain));
        expect(await fingerprintPayload(reorder(value, random))).toBe(await fingerprintPayload(value));
      }),
      { numRuns: 300 },
    );
  });

  it('a number literal of at most 15 significant digits is the double it reads as, whatever its spelling', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[1-9][0-9]{0,14}$/), fc.integer({ min: -290, max: 290 }), fc.nat({ max: 3 }), (digits, exponent, zeros) => {
        const fraction = `${digits.slice(1)}${'0'.repeat(zeros)}`;
        const point = `${digits[0]}${fraction === '' ? '' : `.${fraction}`}e${exponent}`;
        const value = Number(point);
        fc.pre(!Number.isInteger(value) || Number.isSafeInteger(value) || Math.abs(value) >= 1e21);
        expect(canonicalizeJsonText(point)).toBe(canonicalJson(value));
        expect(canonicalizeJsonText(`${digits}${'0'.repeat(zeros)}E${exponent - digits.length + 1 - zeros}`)).toBe(canonicalJson(value));
      }),
      { numRuns: 500 },
    );
  });

  it('the canonical text is what JSON.parse reads back as the same value', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        // -0 is written as 0 (RFC 8785); everything else reads back identical
        const positiveZero = JSON.parse(JSON.stringify(value)) as Json;
        expect(JSON.parse(canonicalJson(value))).toEqual(positiveZero);
      }),
      { numRuns: 300 },
    );
  });
});

describe('canonical JSON: any change, another fingerprint', () => {
  it('replacing any one leaf with a different value changes the canonical text and both fingerprints', async () => {
    await fc.assert(
      fc.asyncProperty(jsonArb, fc.nat(), fc.option(leafArb, { nil: undefined }), async (value, pick, replacement) => {
        const paths = leafPaths(value);
        fc.pre(paths.length > 0);
        const path = paths[pick % paths.length] as Path;
        const old = getAt(value, path);
        const next = replacement ?? neighbour(old); // undefined: the smallest change
        fc.pre(canonicalJson(next) !== canonicalJson(old));
        const changed = updateAt(value, path, () => next);
        expect(canonicalJson(changed)).not.toBe(canonicalJson(value));
        expect(await fingerprintText(JSON.stringify(changed))).not.toBe(await fingerprintText(JSON.stringify(value)));
        expect(await fingerprintPayload(changed)).not.toBe(await fingerprintPayload(value));
      }),
      { numRuns: 300 },
    );
  });

  it('renaming any one key changes the canonical text and the fingerprint', async () => {
    await fc.assert(
      fc.asyncProperty(jsonArb, fc.nat(), keyArb, async (value, pick, name) => {
        const paths = keyPaths(value);
        fc.pre(paths.length > 0);
        const path = paths[pick % paths.length] as Path;
        const parent = getAt(value, path.slice(0, -1));
        fc.pre(isObject(parent) && !Object.hasOwn(parent, name));
        const changed = updateAt(value, path, (node) => node, name);
        expect(canonicalJson(changed)).not.toBe(canonicalJson(value));
        expect(await fingerprintText(JSON.stringify(changed))).not.toBe(await fingerprintText(JSON.stringify(value)));
      }),
      { numRuns: 200 },
    );
  });
});

/** Values a JSON text cannot carry faithfully, each with where it may stand. */
const badValueArb: fc.Arbitrary<{ label: string; value: unknown; inObject: boolean }> = fc.oneof(
  fc.constantFrom(
    { label: 'NaN', value: Number.NaN, inObject: true },
    { label: 'Infinity', value: Number.POSITIVE_INFINITY, inObject: true },
    { label: '-Infinity', value: Number.NEGATIVE_INFINITY, inObject: true },
    { label: 'undefined', value: undefined, inObject: false }, // omitted as a property, like JSON.stringify
    { label: 'function', value: () => 1, inObject: true },
    { label: 'symbol', value: Symbol('s'), inObject: true },
    { label: 'invalid Date', value: new Date(Number.NaN), inObject: true },
    { label: 'Map', value: new Map([['a', 1]]), inObject: true },
    { label: 'Set', value: new Set([1]), inObject: true },
    { label: 'Uint8Array', value: new Uint8Array([1, 2]), inObject: true },
    { label: 'boxed number', value: Object(1) as unknown, inObject: true },
    { label: 'class instance', value: new (class Money {
      amount = 1;
    })(), inObject: true },
  ),
  fc.bigInt().map((value) => ({ label: 'bigint', value, inObject: true })),
  fc
    .double({ min: 2 ** 53, max: 1e21, noNaN: true })
    .filter((n) => Number.isInteger(n) && n < 1e21)
    .chain((n) => fc.constantFrom(n, -n))
    .map((value) => ({ label: 'unsafe integer', value, inObject: true })),
  fc
    .tuple(fc.string({ maxLength: 3 }), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 3 }))
    .map(([a, unit, b]) => ({ label: 'lone surrogate', value: `${a}${String.fromCharCode(unit)}${b}`, inObject: true })),
);

function containers(value: Json, out: Json[] = []): Json[] {
  if (Array.isArray(value)) {
    out.push(value);
    value.forEach((v) => containers(v, out));
  } else if (isObject(value)) {
    out.push(value);
    for (const key of Object.keys(value)) containers(value[key] as Json, out);
  }
  return out;
}

/** Puts `bad` inside a deep copy of `value`, in the container picked by `pick`, or at the root. */
function plant(value: Json, bad: { value: unknown; inObject: boolean }, pick: number, key: string): unknown {
  const copy = structuredClone(value);
  const targets = containers(copy).filter((c) => Array.isArray(c) || bad.inObject);
  const target = targets[pick % (targets.length + 1)];
  if (target === undefined) return bad.value; // the root itself
  if (Array.isArray(target)) (target as unknown[]).splice(pick % (target.length + 1), 0, bad.value);
  else (target as Record<string, unknown>)[key] = bad.value;
  return copy;
}

describe('canonical JSON: what JSON cannot carry is rejected, never coerced', () => {
  it('a bad value anywhere in a payload is a TypeError from canonicalJson and from fingerprintPayload', async () => {
    await fc.assert(
      fc.asyncProperty(jsonArb, badValueArb, fc.nat(), keyArb, async (value, bad, pick, key) => {
        const payload = plant(value, bad, pick, `k${key}`);
        expect(() => canonicalJson(payload), bad.label).toThrow(TypeError);
        await expect(fingerprintPayload(payload), bad.label).rejects.toThrow(TypeError);
      }),
      { numRuns: 300 },
    );
  });

  it('a cycle anywhere is a TypeError', () => {
    fc.assert(
      fc.property(jsonArb, fc.nat(), (value, pick) => {
        const copy = structuredClone(value);
        const targets = containers(copy);
        fc.pre(targets.length > 0);
        const target = targets[pick % targets.length] as unknown[] | Record<string, unknown>;
        if (Array.isArray(target)) target.push(copy);
        else target['self'] = copy;
        expect(() => canonicalJson(copy)).toThrow(/cycle/);
      }),
      { numRuns: 200 },
    );
  });

  it('a lone surrogate in a key is a TypeError', () => {
    fc.assert(
      fc.property(jsonArb, fc.integer({ min: 0xd800, max: 0xdfff }), fc.nat(), (value, unit, pick) => {
        const copy = structuredClone(value);
        const objects = containers(copy).filter(isObject);
        const key = `k${String.fromCharCode(unit)}`;
        const target = objects[pick % (objects.length + 1)];
        const payload = target === undefined ? { [key]: copy } : (Object.assign(target, { [key]: 1 }), copy);
        expect(() => canonicalJson(payload)).toThrow(/lone UTF-16 surrogate/);
      }),
      { numRuns: 100 },
    );
  });

  /** JSON text tokens that JSON.parse would accept by rounding or hiding something, or that are not JSON at all. */
  const badTokenArb = fc.oneof(
    fc.bigInt({ min: 2n ** 53n, max: 10n ** 30n }).chain((n) => fc.constantFrom(String(n), `-${n}`)), // rounded by JSON.parse
    // more significant digits (18 or more) than the shortest spelling of any double (at most 17)
    fc
      .tuple(fc.constantFrom('', '-'), fc.stringMatching(/^[1-9][0-9]{16,24}[1-9]$/), fc.integer({ min: -300, max: 300 }))
      .map(([sign, digits, exponent]) => `${sign}${digits[0]}.${digits.slice(1)}e${exponent}`),
    fc.integer({ min: 1, max: 9 }).map((digit) => `${digit}e-${330 + digit}`), // underflows to 0
    fc.constantFrom('1e400', '-1e400', '123e99999', '"\\ud800"', '"a\\udc00b"', '"\\udbff\\u0041"', 'NaN', 'Infinity', '-Infinity', 'undefined', '01', '+1', '.5', '1.', "'single'", '{"a":1,"a":1}', '{"a":1,"a":2}', '[1,]', '{"a":1,}', '"\t"'),
  );

  it('a JSON body holding an unsafe integer literal, a number with more digits than its double, an overflowing number, a lone surrogate escape, a duplicate key or invalid JSON is not canonicalised: its exact bytes count', async () => {
    await fc.assert(
      fc.asyncProperty(jsonArb, fc.nat(), badTokenArb, async (value, pick, token) => {
        const sentinel = '@@planted@@';
        const paths = leafPaths(value);
        const path = paths.length === 0 ? [] : (paths[pick % paths.length] as Path);
        const base = paths.length === 0 ? sentinel : updateAt(value, path, () => sentinel);
        const text = JSON.stringify(base);
        fc.pre(text.split(JSON.stringify(sentinel)).length === 2);
        const bad = text.replace(JSON.stringify(sentinel), token);
        expect(() => canonicalizeJsonText(bad), bad).toThrow(TypeError);
        const asBytes = await fingerprintRequest({ method: 'POST', url: 'https://api.example.test/orders', body: encoder.encode(bad), contentType: 'application/x-oncefetch-test' });
        const asJsonBytes = await fingerprintText(bad);
        expect(asJsonBytes, bad).toMatch(/^[0-9a-f]{64}$/);
        expect(asJsonBytes, bad).not.toBe(asBytes); // the media type counts
        expect(await fingerprintText(`${bad} `), bad).not.toBe(asJsonBytes); // and every byte
        expect(asJsonBytes, bad).not.toBe(await fingerprintText(text)); // never the JSON it was planted in
      }),
      { numRuns: 300 },
    );
  });
});
