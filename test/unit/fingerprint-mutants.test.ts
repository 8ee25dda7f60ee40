/**
 * Tests written to kill hand-made mutants of src/operation/canonical-json.ts and
 * src/operation/fingerprint.ts that the other suites let survive: the nesting bound at exactly 513,
 * number literals and whitespace that are not JSON (`0.`, a form feed, a key without its colon),
 * escapes and control characters refused with a TypeError, the method token, which media types
 * count as JSON and how a charset spaced around `=` is read, media type parameters (order, case of
 * values, a boundary only set aside for multipart and whatever the case of its name), a URL with a
 * password only, an empty path on a non-special scheme, and batch element fingerprints after leading
 * whitespace or of an array body with no canonical form. Most are false matches: two requests that
 * differ read as one.
 */
import { describe, expect, it } from 'vitest';

import { canonicalJson, canonicalizeJsonText } from '../../src/operation/canonical-json.js';
import { elementFingerprints, fingerprintRequest, isJsonContentType, normaliseUrl, type FingerprintInput } from '../../src/operation/fingerprint.js';

const URL_A = 'https://api.example.com/orders';
const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);
const jsonBody = (body: string): FingerprintInput => ({ method: 'POST', url: URL_A, body: utf8(body), contentType: 'application/json' });
const INVALID_JSON = /^canonicalizeJsonText: invalid JSON at offset \d+/;

describe('nesting depth: 513 is one too many', () => {
  const nestedText = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
  const nestedValue = (depth: number): unknown => {
    let value: unknown = [];
    for (let i = 1; i < depth; i++) value = [value];
    return value;
  };

  it('canonicalJson accepts 512 nested arrays and refuses 513', () => {
    expect(canonicalJson(nestedValue(512))).toBe(nestedText(512));
    expect(() => canonicalJson(nestedValue(513))).toThrow(/^canonicalJson: value at \$(\[0\]){512} nests more than 512 arrays and objects deep$/);
  });

  it('canonicalizeJsonText accepts 512 nested arrays and refuses 513', () => {
    expect(canonicalizeJsonText(nestedText(512))).toBe(nestedText(512));
    expect(() => canonicalizeJsonText(nestedText(513))).toThrow(
      /^canonicalizeJsonText: value at \$(\[0\]){512} nests more than 512 arrays and objects deep$/,
    );
  });
});

describe('text that is not JSON is never read as the JSON it resembles', () => {
  it.each([
    ['a fraction point with no digits after it', '[0.]'],
    ['a fraction point with no digits, non-zero', '[1.]'],
    ['a key followed by another character than a colon', '{"a"x1}'],
    ['a key followed by a hyphen instead of a colon', '{"a"-1}'],
    ['a form feed before the value', '\f{}'],
    ['a no-break space before the value', '\u00a0{}'],
    ['a form feed between members', '[1,\f2]'],
  ])('refuses %s as invalid JSON', (_name, text) => {
    expect(() => canonicalizeJsonText(text)).toThrow(TypeError);
    expect(() => canonicalizeJsonText(text)).toThrow(INVALID_JSON);
  });

  it.each([
    ['0.', '0'],
    ['[0.]', '[0]'],
    ['{"a"x1}', '{"a":1}'],
    ['\f{}', '{}'],
    ['{"a":\f1}', '{"a":1}'],
  ])('a JSON body %j has another fingerprint than %j', async (invalid, valid) => {
    expect(await fingerprintRequest(jsonBody(invalid))).not.toBe(await fingerprintRequest(jsonBody(valid)));
  });
});

describe('escapes and control characters the strict parser refuses are TypeErrors naming the offset', () => {
  it.each([
    ['a \\v escape', '"a\\vb"', 2],
    ['a \\0 escape', '"\\0"', 1],
    ['a raw U+001F', '"a\u001fb"', 2],
    ['a raw U+0000', '"\u0000"', 1],
  ])('%s', (_name, text, offset) => {
    expect(() => canonicalizeJsonText(text)).toThrow(TypeError);
    expect(() => canonicalizeJsonText(text)).toThrow(new RegExp(`^canonicalizeJsonText: invalid JSON at offset ${offset}: `));
  });

  it('accepts a raw U+0020 and DEL, which need no escape', () => {
    expect(canonicalizeJsonText('"a b\u007f"')).toBe('"a b\u007f"');
  });
});

describe('method token', () => {
  it.each(['PO ST', 'POST ', '\tPOST', 'POST\n', 'PO\nST', 'POST\r'])('refuses the method %j', async (method) => {
    await expect(fingerprintRequest({ method, url: URL_A })).rejects.toThrow(TypeError);
    await expect(fingerprintRequest({ method, url: URL_A })).rejects.toThrow(/^invalid HTTP method /);
  });
});

describe('JSON media types', () => {
  it.each(['text/json', 'application/x-json', 'application/vndjson', 'application/geojson', 'text/application/json', 'a/b/c+json', 'xapplication/json'])(
    '%s is not JSON (only application/json and type/subtype+json are)',
    (contentType) => {
      expect(isJsonContentType(contentType)).toBe(false);
    },
  );

  it('a text/json body counts by its bytes, so reordered keys are another request', async () => {
    const as = (body: string): FingerprintInput => ({ method: 'POST', url: URL_A, body: utf8(body), contentType: 'text/json' });
    expect(await fingerprintRequest(as('{"a":1,"b":2}'))).not.toBe(await fingerprintRequest(as('{"b":2,"a":1}')));
  });
});

describe('charset and media type parameters', () => {
  it.each(['application/json; charset = iso-8859-1', 'application/json;charset =windows-1252', 'application/json; CHARSET= latin1'])(
    '%s is not UTF-8 JSON: spaces around "=" do not hide the charset',
    (contentType) => {
      expect(isJsonContentType(contentType)).toBe(false);
    },
  );

  it('a body in another charset, spaced around "=", counts by its bytes', async () => {
    const latin1 = (body: string): FingerprintInput => ({ method: 'POST', url: URL_A, body: utf8(body), contentType: 'application/json; charset = iso-8859-1' });
    expect(await fingerprintRequest(latin1('{"a":1}'))).not.toBe(await fingerprintRequest(latin1('{ "a":1}')));
  });

  it('parameters of a non-JSON media type compare in any order', async () => {
    const typed = (contentType: string): FingerprintInput => ({ method: 'POST', url: URL_A, body: utf8('x'), contentType });
    expect(await fingerprintRequest(typed('text/plain; format=flowed; charset=utf-8'))).toBe(
      await fingerprintRequest(typed('text/plain; charset=utf-8; format=flowed')),
    );
  });

  it('a multipart boundary parameter is found whatever the case of its name', async () => {
    const form = (boundary: string, param: string): FingerprintInput => ({
      method: 'POST',
      url: URL_A,
      body: utf8(`--${boundary}\r\nContent-Disposition: form-data; name="qty"\r\n\r\n1\r\n--${boundary}--\r\n`),
      contentType: `multipart/form-data; ${param}=${boundary}`,
    });
    const lower = await fingerprintRequest(form('b1', 'boundary'));
    expect(await fingerprintRequest(form('b2', 'BOUNDARY'))).toBe(lower);
    expect(await fingerprintRequest(form('b3', 'Boundary'))).toBe(lower);
  });
});

describe('media type parameters other than a multipart boundary are part of the request', () => {
  it('a parameter value other than charset keeps its case', async () => {
    const typed = (contentType: string): FingerprintInput => ({ method: 'POST', url: URL_A, body: utf8('x'), contentType });
    expect(await fingerprintRequest(typed('application/x-custom; profile=A'))).not.toBe(await fingerprintRequest(typed('application/x-custom; profile=a')));
  });

  it('a boundary parameter on a type that is not multipart is not set aside', async () => {
    const text = (boundary: string): FingerprintInput => ({
      method: 'POST',
      url: URL_A,
      body: utf8(`--${boundary}\r\nx\r\n--${boundary}--\r\n`),
      contentType: `text/plain; boundary=${boundary}`,
    });
    expect(await fingerprintRequest(text('b1'))).not.toBe(await fingerprintRequest(text('b2')));
  });
});

describe('URL credentials', () => {
  it('refuses a URL with a password and no user name', () => {
    expect(() => normaliseUrl('https://:secret@api.example.com/a')).toThrow(TypeError);
    expect(() => normaliseUrl('https://:secret@api.example.com/a')).toThrow(/credentials/);
  });
});

describe('elementFingerprints after leading JSON whitespace', () => {
  it.each(['\n[{"a":1},{"b":2}]', '\t[{"a":1},{"b":2}]', '\r\n [{"a":1},{"b":2}]'])('a batch led by whitespace %j gives one fingerprint per operation', async (body) => {
    expect(await elementFingerprints(jsonBody(body))).toEqual([await fingerprintRequest(jsonBody('{"a":1}')), await fingerprintRequest(jsonBody('{"b":2}'))]);
  });
});

describe('elementFingerprints of a body that opens with [ but has no canonical form', () => {
  it.each(['[{"a":1},', '[{"a":1,"a":2}]', '[{"n":1.000000000000000001}]'])('%j gives none, without throwing', async (body) => {
    expect(await elementFingerprints(jsonBody(body))).toEqual([]);
  });
});

describe('an empty path of a URL with a host becomes /', () => {
  it('for a scheme the URL parser leaves alone', async () => {
    expect(normaliseUrl('foo://Host.Example')).toBe('foo://host.example/');
    expect(await fingerprintRequest({ method: 'GET', url: 'foo://host.example' })).toBe(await fingerprintRequest({ method: 'GET', url: 'foo://host.example/' }));
  });
});
