/**
 * RFC 8785 (JSON Canonicalization Scheme) for oncefetch fingerprints.
 *
 * Two entry points: {@link canonicalJson} for JS values and {@link canonicalizeJsonText} for
 * JSON text (a request body). Both refuse anything JSON cannot carry faithfully, because a
 * fingerprint that silently maps two different requests onto one text would replay the wrong
 * result.
 *
 * @module
 */

/** Integers with a larger magnitude cannot be told apart from their neighbours after parsing. */
const UNSAFE_INTEGER_MESSAGE =
  'is an integer outside the safe range ±(2^53 - 1), so JSON cannot carry it exactly; send it as a string';

/**
 * How many arrays and objects may nest. Both entries recurse, so without a bound of their own the
 * engine's stack would set one: a body would canonicalise or not (and change fingerprint) with the
 * stack left to the caller, the engine and its version. 512 takes ~230 KB of V8's ~1 MB stack, and
 * is deeper than servers parse by default (System.Text.Json 64, serde_json 128).
 */
const MAX_DEPTH = 512;

const TOO_DEEP_MESSAGE = `nests more than ${MAX_DEPTH} arrays and objects deep`;

/** A literal with more precision than its double would share its canonical text with another number. */
const INEXACT_NUMBER_MESSAGE = 'has more digits than a double keeps, so its canonical form would stand for other numbers too; send it as a string';

/**
 * Returns the RFC 8785 canonical JSON text of a JS value.
 *
 * - Object keys are sorted by UTF-16 code units; no whitespace is emitted.
 * - Numbers use the ECMAScript Number-to-String algorithm, as RFC 8785 requires; `-0` becomes `0`.
 * - Objects with a `toJSON` method (such as `Date`) are replaced by its result, as
 *   `JSON.stringify` does; an invalid `Date` is rejected instead of becoming `null`.
 * - Inside objects, properties whose value is `undefined` are omitted, as `JSON.stringify` does.
 *
 * Rejected with a `TypeError` naming the JSON path (e.g. `$.items[2].qty`): `NaN`, `±Infinity`,
 * integer-valued numbers outside `Number.isSafeInteger` range whose canonical form is a plain
 * integer literal (e.g. `12345678901234567890`, already rounded by JS), `bigint`, strings or keys
 * with lone UTF-16 surrogates, `undefined`/functions/symbols in arrays or at the top level,
 * functions and symbols as property values, non-plain objects without `toJSON` (`Map`, `Set`,
 * typed arrays, class instances, boxed primitives), cycles, and arrays and objects nested more
 * than 512 deep (a bound of its own, not the engine's stack, so the outcome is the same everywhere).
 *
 * Integer-valued numbers of magnitude 1e21 and above serialise with an exponent (`1e+21`), so no
 * reader takes them for exact integers; they are accepted, matching the RFC 8785 test vectors.
 *
 * @param value - the value to canonicalise
 * @returns the canonical JSON text
 * @throws TypeError when the value cannot be carried faithfully by JSON
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [true, null, 1e-7] }); // '{"a":[true,null,1e-7],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  const parts: string[] = [];
  const ancestors = new Set<object>();
  // The root is written like an array element: `undefined` there is an error, not an omission.
  writeProperty(parts, { '': value }, '', '$', ancestors, 'array');
  return parts.join('');
}

/**
 * Parses JSON text and returns its RFC 8785 canonical form.
 *
 * Rejects, with a `TypeError` naming the JSON path, everything {@link canonicalJson} rejects plus
 * what `JSON.parse` would hide: integer literals that are not safe integers (JSON.parse rounds
 * `12345678901234567890` silently), numbers that overflow to `Infinity` (`1e400`), any other
 * literal that the double it reads as does not give back (`1.000000000000000001` reads as `1`,
 * `1e-400` as `0`: a server reading decimals sees two amounts where the double sees one), lone
 * surrogates (raw or from `\ud800` escapes) and duplicate object keys (their meaning is
 * ambiguous). Literals that only spell a double differently (`1.0`, `1.5E3`, `-0`) are accepted.
 * Invalid JSON is a `TypeError` giving the offset.
 *
 * @param text - JSON text, e.g. a UTF-8 decoded request body
 * @returns the canonical JSON text
 * @throws TypeError on invalid JSON or on a value JSON cannot carry faithfully
 * @example
 * ```ts
 * canonicalizeJsonText('{ "b": 1.0, "a": -0 }'); // '{"a":0,"b":1}'
 * ```
 */
export function canonicalizeJsonText(text: string): string {
  const parser = new JsonTextParser(text);
  return canonicalJson(parser.parseDocument());
}

type Container = 'array' | 'object';

/**
 * Serialises `holder[key]` into `parts`. Returns false when the value is omitted
 * (an `undefined` property inside an object); elsewhere an unrepresentable value throws.
 */
function writeProperty(
  parts: string[],
  holder: Record<string, unknown> | readonly unknown[],
  key: string,
  path: string,
  ancestors: Set<object>,
  container: Container,
): boolean {
  let value: unknown = (holder as Record<string, unknown>)[key];
  if (typeof value === 'object' && value !== null) {
    const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      if (value instanceof Date && Number.isNaN(value.getTime())) {
        throw new TypeError(`canonicalJson: value at ${path} is an invalid Date`);
      }
      value = (toJSON as (this: unknown, key: string) => unknown).call(value, key);
    }
  }
  switch (typeof value) {
    case 'string':
      parts.push(quoteString(value, path));
      return true;
    case 'number':
      parts.push(formatNumber(value, path));
      return true;
    case 'boolean':
      parts.push(value ? 'true' : 'false');
      return true;
    case 'undefined':
      if (container === 'object') return false;
      throw new TypeError(`canonicalJson: value at ${path} is undefined, which JSON cannot represent`);
    case 'bigint':
      throw new TypeError(`canonicalJson: value at ${path} is a bigint; convert it to a string or a safe integer`);
    case 'function':
    case 'symbol':
      throw new TypeError(`canonicalJson: value at ${path} is a ${typeof value}, which JSON cannot represent`);
    case 'object':
      if (value === null) {
        parts.push('null');
        return true;
      }
      writeContainer(parts, value, path, ancestors);
      return true;
  }
}

function writeContainer(parts: string[], value: object, path: string, ancestors: Set<object>): void {
  if (ancestors.has(value)) throw new TypeError(`canonicalJson: value at ${path} is a cycle back to one of its ancestors`);
  if (ancestors.size === MAX_DEPTH) throw new TypeError(`canonicalJson: value at ${path} ${TOO_DEEP_MESSAGE}`);
  ancestors.add(value);
  if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) parts.push(',');
      writeProperty(parts, value, String(i), `${path}[${i}]`, ancestors, 'array');
    }
    parts.push(']');
  } else {
    if (!isPlainObject(value)) {
      throw new TypeError(
        `canonicalJson: value at ${path} is ${describe(value)}; only plain objects, arrays and objects with toJSON() are accepted`,
      );
    }
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort(compareCodeUnits);
    parts.push('{');
    let first = true;
    for (const key of keys) {
      const childPath = appendKey(path, key);
      const quotedKey = quoteString(key, childPath, 'key');
      const mark = parts.length;
      parts.push(first ? '' : ',', quotedKey, ':');
      if (writeProperty(parts, record, key, childPath, ancestors, 'object')) first = false;
      else parts.length = mark;
    }
    parts.push('}');
  }
  ancestors.delete(value);
}

/** ECMAScript Number-to-String (RFC 8785 §3.2.2.3), after the faithfulness checks. */
function formatNumber(value: number, path: string): string {
  if (!Number.isFinite(value)) {
    throw new TypeError(`canonicalJson: number at ${path} is ${String(value)}, which JSON cannot represent`);
  }
  // Below 1e21 an integer prints as a bare digit string that readers take as exact.
  if (Number.isInteger(value) && !Number.isSafeInteger(value) && Math.abs(value) < 1e21) {
    throw new TypeError(`canonicalJson: number at ${path} (${String(value)}) ${UNSAFE_INTEGER_MESSAGE}`);
  }
  return String(value); // String(-0) === '0'
}

/** JSON string literal as RFC 8785 §3.2.2.2 prescribes (identical to well-formed JSON.stringify). */
function quoteString(value: string, path: string, what: 'string' | 'key' = 'string'): string {
  const bad = findLoneSurrogate(value);
  if (bad !== -1) {
    throw new TypeError(
      `canonicalJson: ${what} at ${path} has a lone UTF-16 surrogate at index ${bad}, which is not valid Unicode text`,
    );
  }
  return JSON.stringify(value);
}

/** Index of the first unpaired surrogate code unit, or -1. */
export function findLoneSurrogate(value: string): number {
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1); // NaN past the end
      if (next >= 0xdc00 && next <= 0xdfff) i++;
      else return i;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return i;
    }
  }
  return -1;
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0; // relational comparison of strings is by UTF-16 code units
}

function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || proto === Object.prototype;
}

function describe(value: unknown): string {
  if (typeof value !== 'object' || value === null) return `a ${typeof value}`;
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? `a ${name} instance` : 'a non-plain object';
}

function appendKey(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

const NUMBER_TOKEN = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const SIMPLE_ESCAPE = /["\\/bfnrt]/;
const UNICODE_ESCAPE = /^u[0-9a-fA-F]{4}$/;

const DECIMAL_PARTS = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/**
 * The exact value of a decimal number text (a JSON literal, or what `String(number)` gives) as
 * `<sign><significant digits>e<exponent>`, zero as `0` whatever its sign: equal for two texts
 * exactly when they denote the same number (`1.50`, `15e-1` and `1.5` all give `15e-1`).
 */
function decimalValue(text: string): string {
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = DECIMAL_PARTS.exec(text) ?? [];
  const digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  return `${sign}${significant}e${Number(exponent) - fraction.length + digits.length - significant.length}`;
}

/**
 * A strict RFC 8259 parser that keeps what JSON.parse discards: duplicate keys and the literal
 * text of each number. Produces null-prototype objects so a `__proto__` key stays data.
 */
class JsonTextParser {
  private pos = 0;
  /** arrays and objects open around the current position */
  private depth = 0;

  constructor(private readonly text: string) {}

  parseDocument(): unknown {
    const value = this.parseValue('$');
    this.skipWhitespace();
    if (this.pos < this.text.length) this.fail('unexpected text after the JSON value');
    return value;
  }

  private parseValue(path: string): unknown {
    this.skipWhitespace();
    const char = this.text[this.pos];
    if (char === '{' || char === '[') {
      if (this.depth === MAX_DEPTH) throw new TypeError(`canonicalizeJsonText: value at ${path} ${TOO_DEEP_MESSAGE}`);
      this.depth++;
      const value = char === '{' ? this.parseObject(path) : this.parseArray(path);
      this.depth--;
      return value;
    }
    if (char === '"') return this.parseString(path, 'string');
    if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) return this.parseNumber(path);
    for (const [word, value] of LITERALS) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    return this.fail(char === undefined ? 'unexpected end of text' : `unexpected character ${JSON.stringify(char)}`);
  }

  private parseObject(path: string): Record<string, unknown> {
    const result: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    this.pos++; // '{'
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return result;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.pos] !== '"') this.fail('expected a string key');
      const key = this.parseString(path, 'key');
      const childPath = appendKey(path, key);
      if (Object.hasOwn(result, key)) {
        throw new TypeError(`canonicalizeJsonText: duplicate key at ${childPath}; its meaning is ambiguous`);
      }
      this.skipWhitespace();
      if (this.text[this.pos] !== ':') this.fail("expected ':'");
      this.pos++;
      result[key] = this.parseValue(childPath);
      if (this.endOfList('}')) return result;
    }
  }

  private parseArray(path: string): unknown[] {
    const result: unknown[] = [];
    this.pos++; // '['
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return result;
    }
    for (;;) {
      result.push(this.parseValue(`${path}[${result.length}]`));
      if (this.endOfList(']')) return result;
    }
  }

  /** After a member: consumes ',' (false) or the closing bracket (true). */
  private endOfList(close: '}' | ']'): boolean {
    this.skipWhitespace();
    const char = this.text[this.pos];
    if (char === ',') {
      this.pos++;
      return false;
    }
    if (char === close) {
      this.pos++;
      return true;
    }
    return this.fail(`expected ',' or '${close}'`);
  }

  private parseString(path: string, what: 'string' | 'key'): string {
    const start = this.pos;
    this.pos++; // opening quote
    for (;;) {
      const char = this.text[this.pos];
      if (char === undefined) this.fail('unterminated string');
      if (char === '"') break;
      if (char < ' ') this.fail('control character in string; escape it');
      if (char === '\\') {
        const escape = this.text[this.pos + 1] ?? '';
        if (SIMPLE_ESCAPE.test(escape)) this.pos += 2;
        else if (UNICODE_ESCAPE.test(this.text.slice(this.pos + 1, this.pos + 6))) this.pos += 6;
        else this.fail('invalid escape sequence');
      } else {
        this.pos++;
      }
    }
    this.pos++; // closing quote
    // The literal is validated above, so JSON.parse only decodes its escapes.
    const value = JSON.parse(this.text.slice(start, this.pos)) as string;
    const bad = findLoneSurrogate(value);
    if (bad !== -1) {
      const where = what === 'key' ? `${path} (key ${JSON.stringify(value)})` : path;
      throw new TypeError(`canonicalizeJsonText: ${what} at ${where} has a lone UTF-16 surrogate, which is not valid Unicode text`);
    }
    return value;
  }

  private parseNumber(path: string): number {
    NUMBER_TOKEN.lastIndex = this.pos;
    const match = NUMBER_TOKEN.exec(this.text);
    if (match === null) this.fail('invalid number literal');
    const literal = match[0];
    this.pos += literal.length;
    const value = Number(literal);
    if (match[1] === undefined && match[2] === undefined) {
      // an integer literal: exact when safe
      if (Number.isSafeInteger(value)) return value;
      throw new TypeError(`canonicalizeJsonText: number at ${path} (${literal}) ${UNSAFE_INTEGER_MESSAGE}`);
    }
    if (!Number.isFinite(value)) {
      throw new TypeError(`canonicalizeJsonText: number at ${path} (${literal}) overflows to ${String(value)}`);
    }
    // RFC 8785 writes the double, so a literal with more digits than the double keeps (or one that
    // underflows to 0) would share its text with another number: 1.000000000000000001 and 1 are two
    // amounts to a server that reads decimals (BigDecimal, Python's Decimal, PostgreSQL numeric).
    const written = String(value); // what JSON.stringify writes, and so what most bodies hold
    if (literal !== written && decimalValue(literal) !== decimalValue(written)) {
      throw new TypeError(`canonicalizeJsonText: number at ${path} (${literal}) ${INEXACT_NUMBER_MESSAGE} (it reads as ${written})`);
    }
    return value;
  }

  private skipWhitespace(): void {
    for (;;) {
      const char = this.text[this.pos];
      if (char !== ' ' && char !== '\t' && char !== '\n' && char !== '\r') return;
      this.pos++;
    }
  }

  private fail(reason: string): never {
    throw new TypeError(`canonicalizeJsonText: invalid JSON at offset ${this.pos}: ${reason}`);
  }
}

const LITERALS: ReadonlyArray<readonly [string, boolean | null]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];
