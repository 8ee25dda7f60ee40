/**
 * Fingerprint test vectors: requests and `client.run()` payloads of every body kind, each with the
 * fingerprint it had when this table was written. A stored record is matched by its fingerprint
 * alone (records carry no fingerprint version), so a vector that changes is an operation that
 * conflicts when it is resumed across the upgrade (or, for FormData, across a runtime whose fetch
 * serialises forms differently). The values are what oncefetch 0.1.0 (d9f4108) gave. Imported by the
 * Node unit test and by the page bundled for Chromium, where the digest is WebCrypto's: both must
 * give these values.
 */
import { captureBody } from '../../src/operation/body.js';
import { fingerprintPayload, fingerprintRequest } from '../../src/operation/fingerprint.js';

const URL_WITH_QUERY = 'HTTPS://API.Example.com:443/orders?b=2&a=1&a=0#top';

/** A request as `client.fetch` fingerprints it: the captured body and its effective Content-Type. */
async function request(method: string, body: BodyInit | null, contentType?: string, url = URL_WITH_QUERY): Promise<string> {
  const captured = await captureBody(body);
  return fingerprintRequest({ method, url, body: captured.bytes, contentType: contentType ?? captured.impliedContentType });
}

/** A form of two fields and a file, rebuilt on every call: its boundary is new each time. */
function form(): FormData {
  const f = new FormData();
  f.set('sku', 'A-17');
  f.set('note', 'line 1\r\nline 2 é');
  f.set('file', new Blob(['x\r\ny\u0000z'], { type: 'text/plain' }), 'a b"c.txt');
  return f;
}

/** Each vector: its name, how to compute it, and the fingerprint it must give. */
export const FINGERPRINT_VECTORS: ReadonlyArray<readonly [name: string, compute: () => Promise<string>, expected: string]> = [
  ['no body', () => request('post', null), 'c0eb383deac5c637c5d901d0ae3fb04aae6efd74778c01f28d7669eb78abb581'],
  ['JSON', () => request('POST', '{ "qty": 1.0, "sku": "A-17", "tags": ["x", "\\u00e9\ud83d\ude00"], "n": -0, "big": 1e21, "tiny": 5e-324 }', 'application/json'), '4e49d92e97074e522491fe4d2184c784b0b8578191f77f742f775b55bcd4fb16'],
  ['JSON with charset', () => request('POST', '{"sku":"A-17","qty":1}', 'Application/JSON; charset=UTF-8'), 'c37fdf4090cba9a2f2a8d822da18e21d1dfdb8eb6cb99aab2ba64324f7c970f8'],
  ['+json', () => request('PATCH', '{"data":{"type":"orders"}}', 'application/vnd.api+json'), '359ea40b3e587190f4581ac8d3f9f07a87704187b0ff54066fc6a69af22f9f46'],
  ['JSON that counts by its bytes', () => request('POST', '{"id":9007199254740993,"id":1}', 'application/json'), '1fc4f8506fe686b6d5fc7f8f2cc1680fecbc3866e83f34c18aa1f9a2b90a48d9'],
  ['string (text/plain)', () => request('POST', 'hello é'), '6e39031125278fdd726f63aac911d12c928383824c451525022a1b442af1b2e9'],
  ['URLSearchParams', () => request('POST', new URLSearchParams([['q', 'a b'], ['r', 'é&=']])), '10ffa5e5d1ce81d9907c0b667d35f4acca2d800a3f7e2ea4fc3b5e0802d480a9'],
  ['Blob with a type', () => request('PUT', new Blob(['abc'], { type: 'Text/Plain' })), '7cbe0e29db284491ab58ce4b7e8c430df4b0b3db0b8cb6b6456bd695e2f51bd9'],
  ['bytes, no type', () => request('POST', new Uint8Array([0, 1, 255])), '89b52dbbb9be4ec63adc1dbc2fd5ed38a3767dcb0e2dbf278515bd4674d0f1c8'],
  ['ArrayBuffer view window', () => request('POST', new Uint8Array([9, 0, 1, 255, 9]).subarray(1, 4), 'application/octet-stream'), 'cb87eb3f77bcd55407786c05f2b71c9f8d35ca16164379597e10edac0193b730'],
  ['FormData', () => request('POST', form()), 'cea51abd12415c2a1e8d9b7dedf5876657409240d4e2ab0e72e8a656bc995ea8'],
  ['query with one name spelled once', () => request('POST', null, undefined, 'https://api.example.com/o?z=1&filter%5Bs%5D=2&filter%5Bs%5D=3'), '73e0a6476f1e661a60d69002dd4afb4babb0bdea69dcd2c5d729f8b0e7c646a2'],
  ['run payload', () => fingerprintPayload({ amount: 500, currency: 'EUR', at: new Date(0), items: [{ sku: 'A-17', qty: 1.5 }], note: null }), 'ef24ea5ae145eb3c006213af64d86d55340636e3894ed2f76af52dc1d321dc41'],
  ['run payload null', () => fingerprintPayload(null), '3a50c0fb576aa905b18a0f6d715fe0ff8df3211e96dc2d596331452b2bc6e779'],
];

/** Every vector computed here, by name. */
export async function computeFingerprintVectors(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, compute] of FINGERPRINT_VECTORS) out[name] = await compute();
  return out;
}

/** The fingerprint each vector must give, by name. */
export const EXPECTED_FINGERPRINTS: Readonly<Record<string, string>> = Object.fromEntries(FINGERPRINT_VECTORS.map(([name, , expected]) => [name, expected]));
