import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalizeJsonText } from '../../src/operation/canonical-json.js';

/** Builds the IEEE-754 double from its bit pattern, as RFC 8785 appendix B lists them. */
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe('canonicalJson: RFC 8785 appendix B number serialisation', () => {
  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'], // -0
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('bits %s → %s', (bits, expected) => {
    expect(canonicalJson(fromBits(bits))).toBe(expected);
  });

  it.each([
    [1e21, '1e+21'],
    [0.000001, '0.000001'],
    [1e-7, '1e-7'],
    // The RFC's own sample: the literal is meant to round to the nearest double.
    // eslint-disable-next-line no-loss-of-precision
    [333333333.33333329, '333333333.3333333'],
    [-0, '0'],
    [4.5, '4.5'],
    [2e-3, '0.002'],
    [1e-27, '1e-27'],
    [9007199254740991, '9007199254740991'],
    [-9007199254740991, '-9007199254740991'],
  ])('literal %s → %s', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  // RFC 8785 prints these; oncefetch refuses them (see canonicalJson TSDoc): below 1e21 they print
  // as bare digits that a reader takes for an exact integer, which the double no longer is.
  it.each([
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
  ])('bits %s (%s) is rejected as an unsafe integer', (bits) => {
    expect(() => canonicalJson({ n: fromBits(bits) })).toThrow(/\$\.n .*safe range/);
  });

  it.each([
    ['7fffffffffffffff', /NaN/],
    ['7ff0000000000000', /Infinity/],
    ['fff0000000000000', /-Infinity/],
  ])('bits %s is rejected', (bits, message) => {
    expect(() => canonicalJson(fromBits(bits))).toThrow(message);
  });
});

describe('canonicalJson: structure', () => {
  it('sorts keys by UTF-16 code units (RFC 8785 §3.2.3 sample)', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('gives identical text for reordered keys at every depth', () => {
    const a = { z: 1, a: { y: [1, { q: true, p: null }], b: 'x' } };
    const b = { a: { b: 'x', y: [1, { p: null, q: true }] }, z: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"b":"x","y":[1,{"p":null,"q":true}]},"z":1}');
  });

  it.each<[string, unknown, string]>([
    ['empty object', {}, '{}'],
    ['empty array', [], '[]'],
    ['literals', [null, true, false], '[null,true,false]'],
    ['string escapes', '\u20ac$\u000f\nA\'B"\\/\b\t\f\r\u001f', '"\u20ac$\\u000f\\nA\'B\\"\\\\/\\b\\t\\f\\r\\u001f"'],
    ['undefined property omitted', { a: undefined, b: 1, c: undefined }, '{"b":1}'],
    ['only undefined properties', { a: undefined }, '{}'],
    ['Date through toJSON', { at: new Date(Date.UTC(2024, 0, 2, 3, 4, 5)) }, '{"at":"2024-01-02T03:04:05.000Z"}'],
    ['toJSON result canonicalised', { x: { toJSON: () => ({ b: 2, a: -0 }) } }, '{"x":{"a":0,"b":2}}'],
    ['toJSON returning undefined omitted', { x: { toJSON: () => undefined }, y: 1 }, '{"y":1}'],
    ['null-prototype object', Object.assign(Object.create(null) as object, { b: 1, a: 2 }), '{"a":2,"b":1}'],
    ['__proto__ own key is data', JSON.parse('{"__proto__":{"x":1}}') as unknown, '{"__proto__":{"x":1}}'],
    ['valid surrogate pair', '\ud83d\ude00', '"\ud83d\ude00"'],
  ])('%s', (_name, value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('passes the property name to toJSON, as JSON.stringify does', () => {
    const seen: string[] = [];
    const probe = { toJSON: (key: string) => (seen.push(key), key) };
    expect(canonicalJson({ k: probe, list: [probe] })).toBe('{"k":"k","list":["0"]}');
    expect(seen).toEqual(['k', '0']);
  });

  it('accepts a shared (non-cyclic) reference', () => {
    const shared = { v: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"v":1},"b":[{"v":1}]}');
  });
});

describe('canonicalJson: rejections name the JSON path', () => {
  class Order {
    qty = 1;
  }
  const cyclic: Record<string, unknown> = { a: {} };
  (cyclic['a'] as Record<string, unknown>)['back'] = cyclic;

  it.each<[string, unknown, RegExp]>([
    ['NaN', { a: NaN }, /at \$\.a is NaN/],
    ['Infinity deep', { items: [{}, {}, { qty: Infinity }] }, /at \$\.items\[2\]\.qty is Infinity/],
    ['-Infinity', [-Infinity], /at \$\[0\] is -Infinity/],
    ['unsafe integer', { id: 2 ** 53 }, /at \$\.id \(9007199254740992\).*safe range/],
    ['unsafe negative integer', { id: -(2 ** 60) }, /at \$\.id .*safe range/],
    ['bigint', { n: 1n }, /at \$\.n is a bigint/],
    ['lone high surrogate', { s: 'a\ud800b' }, /string at \$\.s has a lone UTF-16 surrogate at index 1/],
    ['lone low surrogate', ['\udc00'], /string at \$\[0\] has a lone/],
    ['reversed pair', '\ude00\ud83d', /string at \$ has a lone UTF-16 surrogate at index 0/],
    ['lone surrogate key', { a: { '\ud800': 1 } }, /key at \$\.a\["\\ud800"\] has a lone/],
    ['undefined in array', { list: [1, undefined] }, /at \$\.list\[1\] is undefined/],
    // eslint-disable-next-line no-sparse-arrays -- a hole is the case under test
    ['hole in array', { list: [1, , 3] }, /at \$\.list\[1\] is undefined/],
    ['function in array', [() => 1], /at \$\[0\] is a function/],
    ['symbol in array', [Symbol('s')], /at \$\[0\] is a symbol/],
    ['function property', { f: () => 1 }, /at \$\.f is a function/],
    ['top-level undefined', undefined, /at \$ is undefined/],
    ['Map', { m: new Map() }, /at \$\.m is a Map instance/],
    ['Set', { s: new Set([1]) }, /at \$\.s is a Set instance/],
    ['class instance', { o: new Order() }, /at \$\.o is a Order instance/],
    ['typed array', { b: new Uint8Array(2) }, /at \$\.b is a Uint8Array instance/],
    ['boxed number', { n: new Number(1) }, /at \$\.n is a Number instance/],
    ['invalid Date', { at: new Date(NaN) }, /at \$\.at is an invalid Date/],
    ['cycle', cyclic, /at \$\.a\.back is a cycle/],
    ['odd key in path', { 'a b': { c: NaN } }, /at \$\["a b"\]\.c is NaN/],
  ])('%s', (_name, value, message) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
    expect(() => canonicalJson(value)).toThrow(message);
  });
});

describe('canonicalizeJsonText', () => {
  // The sample's 333333333.33333329 has one digit more than its double keeps: RFC 8785 rounds it to
  // 333333333.3333333, which would also be the canonical form of 333333333.33333331 and others, so
  // such a literal counts by its exact bytes (see 'rejects a literal with more digits …' below).
  it('canonicalises the RFC 8785 §3.2.2 sample (its 17-digit literal spelled as the double it reads as)', () => {
    const text = `{
      "numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
      "literals": [null, true, false]
    }`;
    expect(canonicalizeJsonText(text)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('gives the same text for reordered keys and other whitespace', () => {
    const a = '{"b":[1,2,{"y":"z","x":null}],"a":{"d":true,"c":false}}';
    const b = ' {\n\t"a" : { "c":false , "d":true },\r\n "b":[ 1 ,2, {"x":null,"y":"z"} ] } ';
    expect(canonicalizeJsonText(a)).toBe(canonicalizeJsonText(b));
    expect(canonicalizeJsonText(a)).toBe('{"a":{"c":false,"d":true},"b":[1,2,{"x":null,"y":"z"}]}');
  });

  it.each([
    ['-0', '0'],
    ['-0.0', '0'],
    ['1.0', '1'],
    ['1.50', '1.5'],
    ['1.5e3', '1500'],
    ['1e21', '1e+21'],
    // other spellings of the number the double gives back are the same number
    ['1000000000000000000000.0', '1e+21'],
    ['0.30000000000000004', '0.30000000000000004'],
    ['30000000000000004E-17', '0.30000000000000004'],
    ['0.1000', '0.1'],
    ['100e-3', '0.1'],
    ['0e-400', '0'],
    ['-0.0E+999', '0'],
    ['5e-324', '5e-324'],
    ['1.7976931348623157e308', '1.7976931348623157e+308'],
    ['0.000001', '0.000001'],
    ['1e-7', '1e-7'],
    ['9007199254740991', '9007199254740991'],
    ['-9007199254740991', '-9007199254740991'],
    ['"\\ud83d\\ude00"', '"\ud83d\ude00"'],
    ['"\\u00e9\\/"', '"\u00e9/"'],
    ['{"__proto__":1,"a":{}}', '{"__proto__":1,"a":{}}'],
    ['{}', '{}'],
    ['[ ]', '[]'],
    ['"x"', '"x"'],
    ['null', 'null'],
  ])('%s → %s', (text, expected) => {
    expect(canonicalizeJsonText(text)).toBe(expected);
  });

  it.each([
    ['unsafe integer literal', '{"a":12345678901234567890}', /\$\.a \(12345678901234567890\).*safe range/],
    ['2^53 literal', '[9007199254740992]', /\$\[0\] \(9007199254740992\).*safe range/],
    ['negative unsafe literal', '{"x":{"y":-9007199254740993}}', /\$\.x\.y .*safe range/],
    ['overflow to Infinity', '{"a":1e400}', /\$\.a \(1e400\) overflows to Infinity/],
    ['overflow to -Infinity', '[-1E+400]', /\$\[0\] .*overflows to -Infinity/],
    ['unsafe integer with a fraction', '{"a":10000000000000000000.0}', /\$\.a .*safe range/],
    // the double each reads as has another canonical text than the number written: a false match
    ['a literal with more digits than a double keeps', '{"amount":1.000000000000000001}', /\$\.amount \(1\.000000000000000001\) has more digits than a double keeps.*reads as 1\)/],
    ['the RFC 8785 sample literal', '[333333333.33333329]', /\$\[0\] \(333333333\.33333329\) has more digits/],
    ['a 17-digit neighbour of it', '[333333333.33333331]', /has more digits than a double keeps/],
    ['a literal that underflows to 0', '{"a":1e-400}', /\$\.a \(1e-400\) .*reads as 0\)/],
    ['a subnormal that loses digits', '[2.5e-324]', /reads as 5e-324/],
    ['a non-integer literal that rounds past 1e21', '[1000000000000000000001.0]', /reads as 1e\+21/],
    ['the exact decimal of the double 0.1', '[0.1000000000000000055511151231257827021181583404541015625]', /reads as 0\.1\)/],
    ['lone surrogate escape', '"\\ud800"', /string at \$ has a lone UTF-16 surrogate/],
    ['lone low surrogate escape', '{"s":["\\udc00x"]}', /string at \$\.s\[0\] has a lone/],
    ['raw lone surrogate', '{"s":"\ud800"}', /string at \$\.s has a lone/],
    ['lone surrogate in key', '{"\\ud800":1}', /key at \$ \(key "\\ud800"\) has a lone/],
    ['duplicate key', '{"a":1,"b":2,"a":1}', /duplicate key at \$\.a/],
    ['duplicate key via escape', '{"a":1,"\\u0061":2}', /duplicate key at \$\.a/],
    ['nested duplicate key', '{"x":[{"k":1,"k":2}]}', /duplicate key at \$\.x\[0\]\.k/],
  ])('rejects %s', (_name, text, message) => {
    expect(() => canonicalizeJsonText(text)).toThrow(TypeError);
    expect(() => canonicalizeJsonText(text)).toThrow(message);
  });

  it.each([
    ['empty text', ''],
    ['whitespace only', '  '],
    ['trailing comma in object', '{"a":1,}'],
    ['trailing comma in array', '[1,]'],
    ['single quotes', "{'a':1}"],
    ['unquoted key', '{a:1}'],
    ['missing colon', '{"a" 1}'],
    ['leading zero', '01'],
    ['leading plus', '+1'],
    ['bare fraction', '.5'],
    ['dangling exponent', '1e'],
    ['NaN literal', 'NaN'],
    ['unterminated string', '"abc'],
    ['unterminated array', '[1'],
    ['raw control character', '"a\nb"'],
    ['invalid escape', '"\\x41"'],
    ['short unicode escape', '"\\u12"'],
    ['two values', '1 2'],
    ['byte order mark', '\ufeff{}'],
    ['truncated literal', 'tru'],
  ])('rejects invalid JSON: %s', (_name, text) => {
    expect(() => canonicalizeJsonText(text)).toThrow(/canonicalizeJsonText: invalid JSON at offset \d+/);
  });

  it('handles a 1 MiB string and deep-ish nesting', () => {
    const big = 'x'.repeat(1 << 20);
    expect(canonicalizeJsonText(`{"s":"${big}"}`)).toBe(`{"s":"${big}"}`);
    const deep = '['.repeat(500) + ']'.repeat(500);
    expect(canonicalizeJsonText(deep)).toBe(deep);
  });
});

describe('nesting depth: a bound of its own, never the stack', () => {
  const nestedText = (depth: number): string => '{"a":['.repeat(depth / 2) + ']}'.repeat(depth / 2);
  const nestedValue = (depth: number): unknown => {
    let value: unknown = {};
    for (let i = 1; i < depth; i++) value = i % 2 === 1 ? [value] : { a: value };
    return value;
  };

  it('accepts 512 nested arrays and objects, text and value alike', () => {
    expect(canonicalizeJsonText(nestedText(512))).toBe(nestedText(512));
    expect(canonicalJson(nestedValue(512))).toMatch(/^\[\{"a":\[/);
  });

  // Before: past ~2,200 levels (with this stack) a RangeError from the engine, so whether a body
  // canonicalised depended on the stack the caller and the engine left, not on the body.
  it.each([514, 5_000, 100_000])('refuses %i levels with a TypeError naming the path, from any stack depth', (depth) => {
    const text = nestedText(depth);
    const value = nestedValue(depth);
    const fromDeepStack = <T>(levels: number, f: () => T): T => (levels === 0 ? f() : fromDeepStack(levels - 1, f));
    for (const levels of [0, 1_000]) {
      expect(() => fromDeepStack(levels, () => canonicalizeJsonText(text))).toThrow(/^canonicalizeJsonText: value at \$\.a\[0\]\.a.* nests more than 512 arrays and objects deep$/);
      expect(() => fromDeepStack(levels, () => canonicalJson(value))).toThrow(/^canonicalJson: value at \$\[0\]\.a\[0\].* nests more than 512 arrays and objects deep$/);
    }
  });
});
