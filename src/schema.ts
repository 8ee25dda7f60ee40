/**
 * The validator behind the two runtime checks oncefetch makes: client options
 * (`createClient`) and records read back from a store. A check is a function
 * that returns its input (a copy only when unknown keys were stripped) or an
 * {@link Issue} naming the first bad field. On a valid value it allocates
 * nothing (a whole record costs about a microsecond; the exact-shape
 * pre-check in operation/record-shape.ts, in front of it on Node's hot path, a
 * fifth of that), and the module weighs about 1 kB minified in a browser
 * bundle, where zod/mini weighed 28 kB (8 kB min+gzip).
 *
 * The test suite holds the record and option schemas built from these checks
 * to equivalent zod schemas (test/unit/schema-oracle.test.ts).
 *
 * @internal
 * @module
 */

/** What is wrong with a value: the message, where, and which error class it calls for. */
export class Issue {
  /** keys and indexes from the checked value down to the bad field */
  readonly path: Array<string | number> = [];
  constructor(
    readonly message: string,
    /** `range`: a number or length out of bounds (RangeError); `keys`: unknown keys; `type`: anything else */
    readonly kind: 'type' | 'range' | 'keys' = 'type',
  ) {}

  /** Prefixes the path with the key of the field that held the bad value. */
  at(key: string | number): this {
    this.path.unshift(key);
    return this;
  }
}

/** Returns the valid value, or an {@link Issue}. */
export type Check<T> = (v: unknown) => T | Issue;
type Out<C> = C extends Check<infer T> ? T : never;

const invalidType = (expected: string): Issue => new Issue(`must be of type ${expected}`);

/** A string; `minLength` and `pattern` bound it. */
export function str(minLength = 0, pattern?: RegExp, patternMessage?: string): Check<string> {
  return (v) => {
    if (typeof v !== 'string') return invalidType('string');
    if (v.length < minLength) return new Issue(`must have a length >= ${minLength}`, 'range');
    if (pattern !== undefined && !pattern.test(v)) return new Issue(patternMessage ?? `must match ${String(pattern)}`);
    return v;
  };
}

/** A safe integer within `[min, max]` (bounds within the safe range; an unsafe integer is out of range). */
export function int(min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): Check<number> {
  return (v) => (typeof v !== 'number' ? invalidType('number') : Number.isInteger(v) ? bounded(v, min, max) : new Issue('must be an integer'));
}

/** A finite number within `[min, max]`. */
export function num(min = -Infinity, max = Infinity): Check<number> {
  return (v) => (typeof v === 'number' && Number.isFinite(v) ? bounded(v, min, max) : invalidType('number'));
}

function bounded(v: number, min: number, max: number): number | Issue {
  if (v < min) return new Issue(`must be >= ${min}`, 'range');
  if (v > max) return new Issue(`must be <= ${max}`, 'range');
  return v;
}

/** `true` or `false`. */
export const bool: Check<boolean> = (v) => (typeof v === 'boolean' ? v : invalidType('boolean'));

/** One of the given primitive values. */
export function oneOf<const T extends readonly (string | number | boolean)[]>(values: T): Check<T[number]> {
  return (v) => (values.includes(v as T[number]) ? (v as T[number]) : new Issue(`must be one of ${values.map((x) => JSON.stringify(x)).join(', ')}`));
}

/** Whatever `test` accepts, else `message`. */
export function custom<T>(test: (v: unknown) => boolean, message: string): Check<T> {
  return (v) => (test(v) ? (v as T) : new Issue(message));
}

/** `null` or what `check` accepts. */
export function nullable<T>(check: Check<T>): Check<T | null> {
  return (v) => (v === null ? null : check(v));
}

/** `undefined` (or an absent key) or what `check` accepts. */
export function optional<T>(check: Check<T>): Check<T | undefined> {
  return (v) => (v === undefined ? undefined : check(v));
}

/** An array whose every element `check` accepts. */
export function arr<T>(check: Check<T>): Check<T[]> {
  return (v) => {
    if (!Array.isArray(v)) return invalidType('array');
    let out: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const r = check(v[i]);
      if (r instanceof Issue) return r.at(i);
      if (r !== v[i]) (out ??= v.slice())[i] = r;
    }
    return (out ?? v) as T[];
  };
}

/** A pair of strings (a header). */
export const stringPair: Check<[string, string]> = (v) => {
  if (!Array.isArray(v)) return invalidType('array');
  if (v.length !== 2) return new Issue('must have a length of 2', 'range');
  for (let i = 0; i < 2; i++) if (typeof v[i] !== 'string') return invalidType('string').at(i);
  return v as [string, string];
};

/** An object whose every value `check` accepts (string keys). */
export function dict<T>(check: Check<T>): Check<Record<string, T>> {
  return (v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return invalidType('object');
    for (const [key, value] of Object.entries(v)) {
      const r = check(value);
      if (r instanceof Issue) return r.at(key);
    }
    return v as Record<string, T>;
  };
}

type Shape = Record<string, Check<unknown>>;
type ObjectOf<S extends Shape> = { -readonly [K in keyof S]: Out<S[K]> };

/**
 * Whether `v` is an object as a literal makes it: its prototype `Object.prototype` or null (not an
 * array, a class instance, an event).
 */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * An object with the keys of `shape`. Unknown keys are an issue when `strict`
 * (options: a typo must not pass silently); otherwise they are stripped, in a
 * copy (records: a field a newer version added is dropped, the rest is read).
 */
export function obj<S extends Shape>(shape: S, strict = false): Check<ObjectOf<S>> {
  const keys = Object.keys(shape);
  const checks = keys.map((key) => shape[key]!);
  const hasOwn = Object.prototype.hasOwnProperty;
  return (v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return invalidType('object');
    const o = v as Record<string, unknown>;
    let changed = false;
    let present = 0;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const value = o[key];
      const r = checks[i]!(value);
      if (r instanceof Issue) return r.at(key);
      if (r !== value) changed = true;
      if (hasOwn.call(o, key)) present++;
    }
    let own = 0;
    for (const key in o) if (hasOwn.call(o, key)) own++;
    if (own > present && strict) return unknownKeys(o, (k) => hasOwn.call(shape, k))!;
    if (!changed && own === present && isPlainObject(o)) return o as ObjectOf<S>;
    // A stripped or converted copy; the checks are pure, so running them again is safe (and rare).
    const out: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) if (keys[i]! in o) out[keys[i]!] = checks[i]!(o[keys[i]!]);
    return out as ObjectOf<S>;
  };
}

/** The issue naming the own keys of `o` that are not `known`, or undefined when there are none. */
export function unknownKeys(o: object, known: (key: string) => boolean): Issue | undefined {
  const unknown = Object.keys(o).filter((k) => !known(k));
  return unknown.length === 0 ? undefined : new Issue(`has unknown keys ${unknown.join(', ')}`, 'keys');
}
