import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  fingerprintPayload,
  fingerprintRequest,
  isJsonContentType,
  normaliseUrl,
  type FingerprintInput,
} from '../../src/operation/fingerprint.js';

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);
const utf8ToText = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
const sha256 = (...parts: Array<string | Uint8Array>): string => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest('hex');
};
const URL_A = 'https://api.example.com/orders';
const json = (body: string, url = URL_A, method = 'POST'): FingerprintInput => ({
  method,
  url,
  body: utf8(body),
  contentType: 'application/json',
});

describe('normaliseUrl', () => {
  it.each([
    ['HTTPS://API.Example.COM/orders', 'https://api.example.com/orders'],
    ['https://api.example.com:443/orders', 'https://api.example.com/orders'],
    ['http://api.example.com:80/orders', 'http://api.example.com/orders'],
    ['http://api.example.com:8080/orders', 'http://api.example.com:8080/orders'],
    ['https://api.example.com', 'https://api.example.com/'],
    ['https://api.example.com/orders#frag', 'https://api.example.com/orders'],
    ['https://api.example.com/orders?', 'https://api.example.com/orders'],
    ['https://api.example.com/Orders/', 'https://api.example.com/Orders/'],
    ['https://api.example.com/a?b=2&a=1&c=3', 'https://api.example.com/a?a=1&b=2&c=3'],
    ['https://api.example.com/a?b=1&a=z&b=0&a=y', 'https://api.example.com/a?a=z&a=y&b=1&b=0'],
    ['https://api.example.com/a?b&a=&&c=1', 'https://api.example.com/a?a=&b&c=1'],
    ['https://api.example.com/a?q=x%20y&p=x+y', 'https://api.example.com/a?p=x+y&q=x%20y'],
    ['https://api.example.com/a?B=1&a=2', 'https://api.example.com/a?B=1&a=2'], // code-unit order: 'B' < 'a'
    // one name spelled two ways (a server decodes, or ignores case): sorting would reorder its values, so it is kept as written
    ['https://api.example.com/a?step[]=charge&step%5B%5D=ship', 'https://api.example.com/a?step[]=charge&step%5B%5D=ship'],
    ['https://api.example.com/a?step%5B%5D=ship&step[]=charge', 'https://api.example.com/a?step%5B%5D=ship&step[]=charge'],
    ['https://api.example.com/a?z=0&a=1&%61=2', 'https://api.example.com/a?z=0&a=1&%61=2'],
    ['https://api.example.com/a?z=0&a+b=1&a%20b=2', 'https://api.example.com/a?z=0&a+b=1&a%20b=2'],
    ['https://api.example.com/a?z=0&Id=1&id=2', 'https://api.example.com/a?z=0&Id=1&id=2'],
    ['https://api.example.com/a?z=0&id=1&id=2', 'https://api.example.com/a?id=1&id=2&z=0'], // one spelling: sorted
    ['foo://Host.Example/p?b=1&a=2#x', 'foo://host.example/p?a=2&b=1'],
  ])('%s → %s', (input, expected) => {
    expect(normaliseUrl(input)).toBe(expected);
  });

  it.each(['/relative/path', 'not a url', 'http://'])('rejects %s with a TypeError', (input) => {
    expect(() => normaliseUrl(input)).toThrow(TypeError);
    expect(() => normaliseUrl(input)).toThrow(/absolute URL/);
  });

  // fetch refuses such URLs; stripping the credentials made two users' requests one operation
  it.each(['https://user:secret@api.example.com/a', 'https://user@api.example.com/a'])('rejects %s (credentials) with a TypeError', (input) => {
    expect(() => normaliseUrl(input)).toThrow(/URL with credentials/);
  });
});

describe('isJsonContentType', () => {
  it.each<[string | null | undefined, boolean]>([
    ['application/json', true],
    ['Application/JSON; charset=utf-8', true],
    ['  application/json  ;x=y', true],
    ['application/problem+json', true],
    ['application/vnd.api+JSON', true],
    ['text/x-custom+json', true],
    ['application/json; charset="UTF-8"', true],
    ['application/json;charset=utf8', true],
    // declared in another charset: a server may decode it so, where canonicalisation reads UTF-8
    ['application/json; charset=iso-8859-1', false],
    ['application/vnd.api+json; charset="windows-1252"', false],
    ['application/json; charset=', false],
    ['text/plain', false],
    ['application/jsonp', false],
    ['application/json-seq', false],
    ['application/x-www-form-urlencoded', false],
    ['+json', false],
    ['application/+json/x', false],
    ['', false],
    [null, false],
    [undefined, false],
  ])('%s → %s', (contentType, expected) => {
    expect(isJsonContentType(contentType)).toBe(expected);
  });
});

describe('fingerprintRequest', () => {
  it('is the SHA-256 of the documented framing', async () => {
    const url = 'https://api.example.com/a?b=1&a=2';
    const norm = 'https://api.example.com/a?a=2&b=1';
    expect(await fingerprintRequest({ method: 'post', url })).toBe(sha256(`oncefetch-fp-v1\nPOST\n${norm}\nnone`));
    expect(await fingerprintRequest({ method: 'PUT', url, body: utf8('{ "b":1, "a":2 }'), contentType: 'application/json' })).toBe(
      sha256(`oncefetch-fp-v1\nPUT\n${norm}\njson:13\n{"a":2,"b":1}`),
    );
    const raw = Uint8Array.from([0, 0xff, 10]);
    expect(await fingerprintRequest({ method: 'POST', url, body: raw })).toBe(
      sha256(`oncefetch-fp-v1\nPOST\n${norm}\nbytes::3\n`, raw),
    );
    expect(await fingerprintRequest({ method: 'POST', url, body: raw, contentType: 'Text/Plain; Charset=UTF-8' })).toBe(
      sha256(`oncefetch-fp-v1\nPOST\n${norm}\nbytes:text/plain;charset=utf-8:3\n`, raw),
    );
    // JSON length is in UTF-8 bytes, not code units
    expect(await fingerprintRequest(json('"€"', url))).toBe(sha256(`oncefetch-fp-v1\nPOST\n${norm}\njson:5\n"€"`));
  });

  it('returns 64 lower-case hex characters', async () => {
    expect(await fingerprintRequest(json('{}'))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores JSON key order and whitespace', async () => {
    const a = await fingerprintRequest(json('{"order":{"sku":"A","qty":1},"note":null}'));
    const b = await fingerprintRequest(json('{ "note" : null,\n "order": {"qty":1.0, "sku":"A"} }'));
    expect(a).toBe(b);
  });

  const base = '{"order":{"sku":"A","qty":1,"tags":["x","y"]},"note":null}';
  it.each([
    ['qty changed', '{"order":{"sku":"A","qty":2,"tags":["x","y"]},"note":null}'],
    ['sku changed', '{"order":{"sku":"B","qty":1,"tags":["x","y"]},"note":null}'],
    ['array order', '{"order":{"sku":"A","qty":1,"tags":["y","x"]},"note":null}'],
    ['null → false', '{"order":{"sku":"A","qty":1,"tags":["x","y"]},"note":false}'],
    ['number → string', '{"order":{"sku":"A","qty":"1","tags":["x","y"]},"note":null}'],
    ['key added', '{"order":{"sku":"A","qty":1,"tags":["x","y"],"gift":true},"note":null}'],
    ['key removed', '{"order":{"sku":"A","qty":1,"tags":["x","y"]}}'],
    ['key renamed', '{"order":{"SKU":"A","qty":1,"tags":["x","y"]},"note":null}'],
  ])('any leaf change differs: %s', async (_name, changed) => {
    expect(await fingerprintRequest(json(changed))).not.toBe(await fingerprintRequest(json(base)));
  });

  it.each<[string, FingerprintInput]>([
    ['lower-case method', json(base, URL_A, 'post')],
    ['host and scheme case', json(base, 'HTTPS://API.EXAMPLE.COM/orders')],
    ['default port', json(base, 'https://api.example.com:443/orders')],
    ['fragment', json(base, 'https://api.example.com/orders#x')],
    ['+json content type', { ...json(base), contentType: 'application/vnd.api+json; charset=utf-8' }],
  ])('normalises %s', async (_name, input) => {
    expect(await fingerprintRequest(input)).toBe(await fingerprintRequest(json(base)));
  });

  it('normalises query order', async () => {
    expect(await fingerprintRequest(json(base, `${URL_A}?b=2&a=1`))).toBe(await fingerprintRequest(json(base, `${URL_A}?a=1&b=2`)));
  });

  it.each<[string, FingerprintInput, FingerprintInput]>([
    ['method', json(base, URL_A, 'PUT'), json(base)],
    ['path', json(base, 'https://api.example.com/orders/'), json(base)],
    ['path case', json(base, 'https://api.example.com/Orders'), json(base)],
    ['host', json(base, 'https://api2.example.com/orders'), json(base)],
    ['port', json(base, 'https://api.example.com:8443/orders'), json(base)],
    ['scheme', json(base, 'http://api.example.com/orders'), json(base)],
    ['query value', json(base, `${URL_A}?a=1`), json(base, `${URL_A}?a=2`)],
    ['query presence', json(base, `${URL_A}?a=1`), json(base)],
    ['repeated-name order', json(base, `${URL_A}?a=2&a=1`), json(base, `${URL_A}?a=1&a=2`)],
    // Regression: sorted by the names as written, these two were one URL, while a server reads step[] as [charge, ship] and [ship, charge]
    ['repeated-name order, the name spelled two ways', json(base, `${URL_A}?step[]=charge&step%5B%5D=ship`), json(base, `${URL_A}?step%5B%5D=ship&step[]=charge`)],
    ['repeated-name order, the name in two cases', json(base, `${URL_A}?Id=1&id=2`), json(base, `${URL_A}?id=2&Id=1`)],
  ])('differs by %s', async (_name, a, b) => {
    expect(await fingerprintRequest(a)).not.toBe(await fingerprintRequest(b));
  });

  it('compares multipart bodies with the boundary set aside (it is random per serialisation)', async () => {
    const multipart = (boundary: string, value: string): FingerprintInput => ({
      method: 'POST',
      url: URL_A,
      body: utf8(`--${boundary}\r\nContent-Disposition: form-data; name="qty"\r\n\r\n${value}\r\n--${boundary}--\r\n`),
      contentType: `multipart/form-data; boundary=${boundary}`,
    });
    const a = await fingerprintRequest(multipart('----formdata-undici-0123', '1'));
    expect(await fingerprintRequest(multipart('----WebKitFormBoundaryXyZ', '1'))).toBe(a);
    expect(await fingerprintRequest({ ...multipart('"quoted-b"', '1'), contentType: 'multipart/form-data; boundary="quoted-b"', body: utf8('--quoted-b\r\nContent-Disposition: form-data; name="qty"\r\n\r\n1\r\n--quoted-b--\r\n') })).toBe(a);
    expect(await fingerprintRequest(multipart('----formdata-undici-0123', '2'))).not.toBe(a);
    // Regression (review): only delimiter lines lose their boundary. A boundary that also appears in
    // a value once made two forms equal (a false replay) or the same form differ.
    const withValue = (boundary: string, value: string): FingerprintInput => ({ ...multipart(boundary, value), contentType: `multipart/form-data; boundary=${boundary}` });
    expect(await fingerprintRequest(withValue('100', '100'))).not.toBe(await fingerprintRequest(withValue('999', '999')));
    expect(await fingerprintRequest(withValue('name', '1'))).toBe(await fingerprintRequest(withValue('q7Zk', '1')));
    // Regression: a value holding the token itself made a form of one field compare like a form of two
    // (its text read as the delimiter the other form's boundary was replaced by): a false replay.
    const token = '\u0000boundary\u0000';
    const oneField = (boundary: string): FingerprintInput => ({
      method: 'POST',
      url: URL_A,
      body: utf8(`--${boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\nx\r\n--${token}\r\nContent-Disposition: form-data; name="g"\r\n\r\ny\r\n--${boundary}--\r\n`),
      contentType: `multipart/form-data; boundary=${boundary}`,
    });
    const twoFields = (boundary: string): FingerprintInput => ({
      ...oneField(boundary),
      body: utf8(`--${boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\nx\r\n--${boundary}\r\nContent-Disposition: form-data; name="g"\r\n\r\ny\r\n--${boundary}--\r\n`),
    });
    expect(await fingerprintRequest(oneField('b1'))).not.toBe(await fingerprintRequest(twoFields('b2')));
    // such a body counts by its exact bytes under its full media type, boundary included
    const raw = oneField('b1').body as Uint8Array;
    expect(await fingerprintRequest(oneField('b1'))).toBe(sha256(`oncefetch-fp-v1\nPOST\n${URL_A}\nbytes:multipart/form-data;boundary=b1:${raw.byteLength}\n`, raw));
    // the token's parts alone (a NUL, the word) are only text
    expect(await fingerprintRequest(multipart('b1', '\u0000boundary'))).toBe(await fingerprintRequest(multipart('b2', '\u0000boundary')));
    // not multipart: the same bytes are compared as they are
    expect(await fingerprintRequest({ ...multipart('b1', '1'), contentType: 'text/plain' })).not.toBe(await fingerprintRequest({ ...multipart('b2', '1'), contentType: 'text/plain' }));
  });

  it('hashes non-JSON bodies as exact bytes', async () => {
    const text = (body: string, contentType?: string): FingerprintInput => ({
      method: 'POST',
      url: URL_A,
      body: utf8(body),
      ...(contentType === undefined ? {} : { contentType }),
    });
    expect(await fingerprintRequest(text('{"a":1}', 'text/plain'))).not.toBe(await fingerprintRequest(text('{ "a":1}', 'text/plain')));
    expect(await fingerprintRequest(text('{"a":1}'))).not.toBe(await fingerprintRequest(text('{ "a":1}')));
    expect(await fingerprintRequest(text('{"a":1}', 'application/json'))).toBe(await fingerprintRequest(text('{ "a":1}', 'application/json')));
    // the same bytes as JSON and as text are framed differently
    expect(await fingerprintRequest(text('{"a":1}', 'application/json'))).not.toBe(await fingerprintRequest(text('{"a":1}', 'text/plain')));
    // the same bytes under another media type are another request (a form is not text)
    expect(await fingerprintRequest(text('a=1', 'text/plain'))).not.toBe(await fingerprintRequest(text('a=1', 'application/x-www-form-urlencoded')));
    expect(await fingerprintRequest(text('a=1', 'text/plain;charset=UTF-8'))).toBe(await fingerprintRequest(text('a=1', ' TEXT/plain ; charset=utf-8')));
  });

  it('tells a body from no body, and an empty body from no body', async () => {
    const none = await fingerprintRequest({ method: 'POST', url: URL_A });
    expect(await fingerprintRequest({ method: 'POST', url: URL_A, body: undefined, contentType: 'application/json' })).toBe(none);
    expect(await fingerprintRequest({ method: 'POST', url: URL_A, body: new Uint8Array(0) })).not.toBe(none);
    expect(await fingerprintRequest({ method: 'POST', url: URL_A, body: utf8('none') })).not.toBe(none);
    expect(await fingerprintRequest(json('null'))).not.toBe(none);
  });

  it('reads only the view it is given', async () => {
    const backing = utf8('xx{"a":1}yy');
    const view = backing.subarray(2, 9);
    expect(await fingerprintRequest({ method: 'POST', url: URL_A, body: view })).toBe(
      await fingerprintRequest({ method: 'POST', url: URL_A, body: utf8('{"a":1}') }),
    );
  });

  // fetch sends these; their exact bytes are well defined, and counting them so never makes two
  // different bodies one request (JSON that canonicalisation would change counts as written).
  it.each<[string, Uint8Array]>([
    ['empty', utf8('')],
    ['blank', utf8(' \n')],
    ['not JSON', utf8('not json')],
    ['invalid JSON', utf8('{"a":}')],
    ['duplicate keys', utf8('{"a":1,"a":2}')],
    ['an unsafe integer', utf8('{"id":12345678901234567890}')],
    ['a decimal with more digits than a double keeps', utf8('{"amount":1.000000000000000001}')],
    ['a number that underflows to 0', utf8('{"amount":1e-400}')],
    ['a lone surrogate escape', utf8('"\\ud800"')],
    ['invalid UTF-8', Uint8Array.from([0x22, 0xff, 0x22])],
    ['led by a byte order mark', Uint8Array.from([0xef, 0xbb, 0xbf, ...utf8('{"a":1}')])], // TextDecoder dropped it: one request with {"a":1}
  ])('a body declared as JSON that is %s counts as its exact bytes and media type', async (_name, body) => {
    const input = { method: 'POST', url: URL_A, body, contentType: 'Application/JSON; charset=UTF-8' };
    const expected = sha256(`oncefetch-fp-v1\nPOST\n${URL_A}\nbytes:application/json;charset=utf-8:${body.byteLength}\n`, body);
    expect(await fingerprintRequest(input)).toBe(expected);
    expect(await fingerprintRequest({ ...input, body: Uint8Array.from([...body, 0x20]) })).not.toBe(expected);
    expect(await fingerprintRequest({ ...input, contentType: 'text/plain' })).not.toBe(expected);
    expect(await fingerprintRequest({ method: 'POST', url: URL_A, contentType: 'application/json' })).not.toBe(expected);
  });

  // Regression: canonicalisation recursed until the engine's stack ran out (~2,200 levels here) and
  // a RangeError then made the body count as bytes, so one body had two fingerprints, by the stack
  // left to the caller (and by engine, version, --stack-size): a false conflict on resume.
  it('a body nested deeper than 512 counts as its exact bytes, whatever the stack it is fingerprinted from', async () => {
    const body = utf8('['.repeat(2_190) + ']'.repeat(2_190));
    const input = { method: 'POST', url: URL_A, body, contentType: 'application/json' };
    const fromDeepStack = (levels: number): Promise<string> => (levels === 0 ? fingerprintRequest(input) : fromDeepStack(levels - 1));
    const expected = sha256(`oncefetch-fp-v1\nPOST\n${URL_A}\nbytes:application/json:${body.byteLength}\n`, body);
    expect(await fingerprintRequest(input)).toBe(expected);
    expect(await fromDeepStack(300)).toBe(expected);
    await expect(fingerprintPayload(JSON.parse(utf8ToText(body)))).rejects.toThrow(/nests more than 512 arrays and objects deep/);
  });

  it('a JSON body declared in a charset other than UTF-8 counts by its bytes, so its escapes are not its raw text', async () => {
    const latin1 = 'application/json; charset=iso-8859-1';
    // "\u00e9" is é; the UTF-8 bytes of é read as Latin-1 are Ã©: two strings to a server honouring the charset
    expect(await fingerprintRequest({ ...json('"\\u00e9"'), contentType: latin1 })).not.toBe(await fingerprintRequest({ ...json('"é"'), contentType: latin1 }));
    expect(await fingerprintRequest({ ...json('"\\u00e9"'), contentType: 'application/json; charset=utf-8' })).toBe(await fingerprintRequest(json('"é"')));
  });

  it('JSON that canonicalisation would change is never one request with the JSON it resembles', async () => {
    expect(await fingerprintRequest(json('{"a":1,"a":2}'))).not.toBe(await fingerprintRequest(json('{"a":2}')));
    expect(await fingerprintRequest(json('{"id":9007199254740993}'))).not.toBe(await fingerprintRequest(json('{"id":9007199254740992}')));
    // one double, two amounts to a server that reads decimals
    expect(await fingerprintRequest(json('{"amount":1.000000000000000001}'))).not.toBe(await fingerprintRequest(json('{"amount":1}')));
    expect(await fingerprintRequest(json('{"amount":0.30000000000000001}'))).not.toBe(await fingerprintRequest(json('{"amount":0.3}')));
    expect(await fingerprintRequest(json('{"amount":1e-400}'))).not.toBe(await fingerprintRequest(json('{"amount":0}')));
    // while other spellings of the double's own number stay one request
    expect(await fingerprintRequest(json('{"amount":1.50}'))).toBe(await fingerprintRequest(json('{"amount":15e-1}')));
  });

  it.each<[string, FingerprintInput, RegExp]>([
    ['invalid URL', { method: 'POST', url: '/orders' }, /absolute URL/],
    ['method with a newline', { method: 'POST\nhttps://x/', url: URL_A }, /invalid HTTP method/],
    ['empty method', { method: '', url: URL_A }, /invalid HTTP method/],
  ])('rejects %s with a TypeError', async (_name, input, message) => {
    await expect(fingerprintRequest(input)).rejects.toThrow(TypeError);
    await expect(fingerprintRequest(input)).rejects.toThrow(message);
  });
});

describe('fingerprintPayload', () => {
  it('is the SHA-256 of the documented framing', async () => {
    expect(await fingerprintPayload({ b: [1, 2], a: 'x' })).toBe(sha256('oncefetch-fp-v1\nrun\n{"a":"x","b":[1,2]}'));
  });

  it('ignores key order and differs on any leaf change', async () => {
    const a = await fingerprintPayload({ amount: 500, currency: 'EUR', meta: { x: 1, y: 2 } });
    expect(await fingerprintPayload({ meta: { y: 2, x: 1 }, currency: 'EUR', amount: 500 })).toBe(a);
    expect(await fingerprintPayload({ amount: 501, currency: 'EUR', meta: { x: 1, y: 2 } })).not.toBe(a);
    expect(await fingerprintPayload({ amount: 500, currency: 'EUR', meta: { x: 1, y: 3 } })).not.toBe(a);
  });

  it('never equals a request fingerprint of the same JSON', async () => {
    expect(await fingerprintPayload({ a: 1 })).not.toBe(await fingerprintRequest(json('{"a":1}')));
  });

  it.each<[string, unknown, RegExp]>([
    ['NaN', { a: NaN }, /\$\.a is NaN/],
    ['undefined', undefined, /\$ is undefined/],
    ['bigint', { n: 10n }, /\$\.n is a bigint/],
  ])('rejects %s', async (_name, payload, message) => {
    await expect(fingerprintPayload(payload)).rejects.toThrow(message);
  });
});
