/**
 * The request fingerprint: SHA-256 (WebCrypto, so Node and browsers agree) over the method,
 * the normalised URL and the canonical body. Same scope with a different fingerprint is a
 * conflict, so two requests share a fingerprint only when they mean the same thing.
 *
 * @module
 */

import { concatBytes } from './body.js';
import { canonicalJson, canonicalizeJsonText } from './canonical-json.js';

/** Version tag at the head of every framed input; bump it if the framing ever changes. */
const FRAME_TAG = 'oncefetch-fp-v1\n';

/** RFC 9110 `token`: what an HTTP method may be made of (and never a newline). */
const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

const JSON_MEDIA_TYPE = /^(?:application\/json|[^\s/;]+\/[^\s/;]+\+json)$/;

/**
 * Normalises a URL for fingerprinting: lower-cased scheme and host, default port removed, an
 * empty path becomes `/` (the WHATWG URL parser does these for http and https), query
 * parameters sorted stably by name (values of equal names keep their order), empty query
 * segments and the fragment removed. A URL with credentials (userinfo) is refused, as fetch
 * refuses it: removing them would make two users' requests one operation, and keeping them
 * would put secrets in a store.
 *
 * The path is kept as the URL parser serialises it, which is what fetch sends. Query pairs are
 * compared as written, without decoding, so `a=%20` and `a=+` stay distinct: a false conflict is
 * safe, a false match would replay another request's result. For the same reason a query that
 * spells one name two ways (`a=1&%61=2`, `A=1&a=2`) is not sorted: its values would change order
 * unseen.
 *
 * @param url - an absolute URL (resolve relative ones against the page first)
 * @returns the normalised URL text
 * @throws TypeError when `url` is not a valid absolute URL, or carries credentials
 * @example
 * ```ts
 * normaliseUrl('HTTPS://API.Example.com:443/orders?b=2&a=1#top');
 * // 'https://api.example.com/orders?a=1&b=2'
 * ```
 */
export function normaliseUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (cause) {
    throw new TypeError(`invalid URL ${JSON.stringify(url)}: an absolute URL is required`, { cause });
  }
  if (parsed.username !== '' || parsed.password !== '') {
    // fetch refuses such URLs; stripping them would make two users' requests one operation.
    throw new TypeError('a URL with credentials (user:password@) cannot be sent; pass an Authorization header instead');
  }
  parsed.hash = '';
  // Special schemes (http, https, ...) already have a lower-cased host; opaque hosts do not.
  const host = parsed.hostname.toLowerCase();
  if (host !== parsed.hostname) parsed.hostname = host;
  if (parsed.pathname === '' && parsed.host !== '') parsed.pathname = '/';
  const pairs = parsed.search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '');
  const byName = pairs.map((pair) => ({ pair, name: pair.split('=', 1)[0] ?? '' }));
  // Sorting keeps the order of equal names only as written: `filter[]` and `filter%5B%5D` (or `a+b`
  // and `a%20b`, or `A` and `a` for servers that ignore case, as ASP.NET does) sort apart, yet a
  // server reads them as one name whose values would change order. Such a query is kept as written.
  // URLSearchParams splits as above and decodes as servers do.
  const decoded = pairs.length < 2 ? [] : [...new URLSearchParams(parsed.search).keys()];
  const spelling = new Map<string, string>();
  let oneSpelling = true;
  byName.forEach(({ name }, i) => {
    const key = (decoded[i] ?? name).toLowerCase();
    const seen = spelling.get(key);
    if (seen === undefined) spelling.set(key, name);
    else if (seen !== name) oneSpelling = false;
  });
  if (oneSpelling) byName.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)); // stable since ES2019
  parsed.search = byName.map(({ pair }) => pair).join('&');
  return parsed.href;
}

/** What replaces a multipart boundary in the fingerprinted bytes (NUL never appears in a boundary). */
const BOUNDARY_TOKEN = new TextEncoder().encode('\u0000boundary\u0000');

/** The boundary of a `multipart/*` Content-Type, unquoted, if any. */
function multipartBoundary(contentType: string | null | undefined): string | undefined {
  if (contentType === null || contentType === undefined) return undefined;
  if (!(contentType.split(';', 1)[0] ?? '').trim().toLowerCase().startsWith('multipart/')) return undefined;
  const m = /;\s*boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const value = m?.[1] ?? m?.[2];
  return value === undefined || value === '' ? undefined : value;
}

/** Whether `needle`, from its index `skip` on, stands in `body` at `at`. */
function standsAt(body: Uint8Array, at: number, needle: Uint8Array, skip = 0): boolean {
  for (let j = skip; j < needle.length; j++) if (body[at + j - skip] !== needle[j]) return false;
  return true;
}

/**
 * `body` with the boundary of each delimiter line (`--B` at the start, `CRLF--B` after it: the only
 * places it may stand) replaced by {@link BOUNDARY_TOKEN}; the same text inside a part stays. Or
 * `undefined` when the body holds the token itself (a field's value can): a delimiter would then
 * read like that text, and a form of one field like a form of two.
 */
function withoutBoundary(body: Uint8Array, boundary: string): Uint8Array | undefined {
  for (let i = body.indexOf(0); i !== -1; i = body.indexOf(0, i + 1)) if (standsAt(body, i, BOUNDARY_TOKEN)) return undefined;
  const needle = new TextEncoder().encode(`\r\n--${boundary}`);
  const parts: Uint8Array[] = [];
  let from = 0;
  // at the very start the delimiter has no CRLF before it
  if (standsAt(body, 0, needle, 2)) {
    parts.push(body.subarray(0, 2), BOUNDARY_TOKEN);
    from = needle.length - 2;
  }
  for (let i = from; i + needle.length <= body.length; ) {
    if (!standsAt(body, i, needle)) {
      i++;
      continue;
    }
    parts.push(body.subarray(from, i + 4), BOUNDARY_TOKEN); // keep CRLF--, set the boundary aside
    i += needle.length;
    from = i;
  }
  parts.push(body.subarray(from));
  return concatBytes(parts);
}

/** A Content-Type compared: the essence lower-cased, parameters trimmed and sorted, charset lower-cased. */
function mediaType(contentType: string | null | undefined, without?: string): string {
  if (contentType === null || contentType === undefined) return '';
  const [essence = '', ...params] = contentType.split(';');
  const normalised = params
    .map((p) => p.trim())
    .filter((p) => p !== '' && (without === undefined || p.split('=', 1)[0]?.trim().toLowerCase() !== without))
    .map((p) => {
      const eq = p.indexOf('=');
      const name = (eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase();
      const value = eq < 0 ? '' : p.slice(eq + 1).trim();
      return `${name}=${name === 'charset' ? value.toLowerCase() : value}`;
    })
    .sort();
  return [essence.trim().toLowerCase(), ...normalised].join(';');
}

/**
 * Tells whether a `Content-Type` denotes JSON to compare as canonical JSON: `application/json` or
 * any `type/subtype+json` (`application/problem+json`, `application/vnd.api+json`), in UTF-8 (no
 * charset, or `utf-8`). Case and other parameters are ignored. JSON text is UTF-8 (RFC 8259 §8.1),
 * but a server may read a body declared in another charset so (a servlet's reader does): decoded as
 * UTF-8 here, `"Ã©"` sent as Latin-1 would compare equal to `"\u00e9"`, so such a body counts by its bytes.
 *
 * @param contentType - a `Content-Type` header value
 * @returns true when the body is to be canonicalised as JSON
 * @example
 * ```ts
 * isJsonContentType('Application/JSON; charset=utf-8'); // true
 * isJsonContentType('application/json; charset=iso-8859-1'); // false
 * isJsonContentType('text/plain'); // false
 * ```
 */
export function isJsonContentType(contentType: string | null | undefined): boolean {
  if (contentType === null || contentType === undefined) return false;
  const essence = (contentType.split(';', 1)[0] ?? '').trim().toLowerCase();
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType)?.[1]?.toLowerCase();
  return JSON_MEDIA_TYPE.test(essence) && (charset === undefined || charset === 'utf-8' || charset === 'utf8');
}

/** What a request fingerprint is computed over. */
export interface FingerprintInput {
  /** The HTTP method; compared upper-cased. */
  method: string;
  /** The absolute request URL; see {@link normaliseUrl}. */
  url: string;
  /** The exact body bytes (see `captureBody`); `undefined` for no body. */
  body?: Uint8Array | undefined;
  /** The effective `Content-Type`; a JSON type makes the body compare as canonical JSON. */
  contentType?: string | null | undefined;
}

/**
 * Computes the request fingerprint: lower-case hex SHA-256 over an unambiguous framing of the
 * upper-cased method, the {@link normaliseUrl normalised URL} and the body. Under a JSON content
 * type the body counts as its RFC 8785 canonical form (so key order and whitespace do not
 * matter); otherwise, or when a JSON-typed body has no canonical form that keeps its meaning
 * (empty, not JSON, a byte order mark, duplicate keys, unsafe integers or other numbers a double
 * does not give back, lone surrogates, nesting deeper than 512, not UTF-8), its exact bytes
 * count, with their media type (the Content-Type's essence lower-cased, its parameters sorted, a
 * charset lower-cased): a false conflict is safe, a false match is not.
 *
 * Framing: `oncefetch-fp-v1\n<METHOD>\n<url>\n` then `none`, or `json:<length>\n<canonical UTF-8>`,
 * or `bytes:<media type>:<length>\n<bytes>` (before 0.1, `bytes:<length>\n`: a frame of one never
 * reads as the other, and JSON bodies and `client.run` payloads keep their fingerprints). The method is an HTTP token, the URL and the media
 * type cannot hold a newline, and the body is length-prefixed (its length follows the last colon),
 * so no two inputs share a frame.
 *
 * @param input - method, URL, body bytes and content type
 * @returns 64 lower-case hex characters
 * @throws TypeError for an invalid method or URL
 * @example
 * ```ts
 * const body = new TextEncoder().encode('{"qty":1,"sku":"A"}');
 * await fingerprintRequest({ method: 'post', url: 'https://api.example.com/orders', body, contentType: 'application/json' });
 * ```
 */
export async function fingerprintRequest(input: FingerprintInput): Promise<string> {
  if (!METHOD_TOKEN.test(input.method)) {
    throw new TypeError(`invalid HTTP method ${JSON.stringify(input.method)}`);
  }
  const head = `${FRAME_TAG}${input.method.toUpperCase()}\n${normaliseUrl(input.url)}\n`;
  const encoder = new TextEncoder();
  if (input.body === undefined) return sha256Hex([encoder.encode(`${head}none`)]);
  const text = isJsonContentType(input.contentType) ? canonicalBodyText(input.body) : undefined;
  if (text !== undefined) {
    const canonical = encoder.encode(text);
    return sha256Hex([encoder.encode(`${head}json:${canonical.byteLength}\n`), canonical]);
  }
  // Bytes mean what their media type says: the same bytes as text/plain and as a form are two requests.
  // A multipart body is compared with its boundary set aside: the same form serialises under a new one each time.
  // One that holds the token itself keeps its boundary, in its bytes and its media type (so never a frame of the other kind).
  const boundary = multipartBoundary(input.contentType);
  const aside = boundary === undefined ? undefined : withoutBoundary(input.body, boundary);
  const body = aside ?? input.body;
  const type = mediaType(input.contentType, aside === undefined ? undefined : 'boundary');
  return sha256Hex([encoder.encode(`${head}bytes:${type}:${body.byteLength}\n`), body]);
}

/**
 * Fingerprints an arbitrary JSON-able payload, for `client.run()`: lower-case hex SHA-256 of
 * `oncefetch-fp-v1\nrun\n` followed by {@link canonicalJson}`(payload)`.
 *
 * @param payload - what identifies the effect's input; `undefined` is rejected (pass `null`)
 * @returns 64 lower-case hex characters
 * @throws TypeError when the payload cannot be carried faithfully by JSON (see `canonicalJson`)
 * @example
 * ```ts
 * await fingerprintPayload({ amount: 500, currency: 'EUR' }) === await fingerprintPayload({ currency: 'EUR', amount: 500 }); // true
 * ```
 */
export async function fingerprintPayload(payload: unknown): Promise<string> {
  return sha256Hex([new TextEncoder().encode(`${FRAME_TAG}run\n${canonicalJson(payload)}`)]);
}

/**
 * The fingerprint of each element of a JSON-array body (a batch: GraphQL, JSON-RPC), each as
 * {@link fingerprintRequest} gives it for that element sent alone; `[]` for any other body (an array
 * of values, or of more than 10,000 elements, is data, not a batch).
 * A batching client resends the operations of a lost batch regrouped, whose whole fingerprints differ.
 *
 * @param input - as for {@link fingerprintRequest}
 * @returns one fingerprint per element, in order
 * @example
 * ```ts
 * const body = new TextEncoder().encode('[{"query":"mutation A"},{"query":"mutation B"}]');
 * await elementFingerprints({ method: 'POST', url: 'https://api.example.com/graphql', body, contentType: 'application/json' }); // [fp(A), fp(B)]
 * ```
 */
export async function elementFingerprints(input: FingerprintInput): Promise<string[]> {
  if (input.body === undefined || !isJsonContentType(input.contentType)) return [];
  // (a body that does not open with '[', after JSON whitespace and a BOM, is no array: not canonicalised again)
  let at = input.body[0] === 0xef && input.body[1] === 0xbb && input.body[2] === 0xbf ? 3 : 0;
  while (input.body[at] === 0x20 || input.body[at] === 0x09 || input.body[at] === 0x0a || input.body[at] === 0x0d) at++;
  if (input.body[at] !== 0x5b) return [];
  const text = canonicalBodyText(input.body);
  if (text?.startsWith('[') !== true) return [];
  const elements = JSON.parse(text) as unknown[];
  // A batch is an array of operations (objects: GraphQL's, JSON-RPC's); a list of values is data, whose elements would be
  // refused apart after an unknown outcome; past 10,000 elements, more than the guard keeps, each would be hashed for nothing.
  if (elements.length > MAX_BATCH || !elements.every((e) => typeof e === 'object' && e !== null && !Array.isArray(e))) return [];
  const encoder = new TextEncoder();
  return Promise.all(elements.map((element) => fingerprintRequest({ ...input, body: encoder.encode(JSON.stringify(element)) })));
}

/** The most elements a JSON-array body may hold to count as a batch: as many as the guard remembers (wrap.ts), and a bound on the hashing. */
const MAX_BATCH = 10_000;

/**
 * The RFC 8785 form of a body declared as JSON, or `undefined` when it has none that keeps its
 * meaning (not UTF-8, a byte order mark, or anything `canonicalizeJsonText` refuses: not JSON, or
 * JSON that canonicalisation would change). fetch sends such a body as is, so its exact bytes count.
 */
function canonicalBodyText(body: Uint8Array): string | undefined {
  try {
    // ignoreBOM keeps a leading BOM in the text, where the strict parser refuses it (RFC 8259 §8.1:
    // not JSON text; JSON.parse and Go refuse it): dropped here, `BOM{…}` was one request with `{…}`.
    return canonicalizeJsonText(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body));
  } catch {
    return undefined;
  }
}

/** The part of `node:crypto` used here, typed structurally so browser builds need no Node types. */
interface NodeHash {
  createHash(algorithm: 'sha256'): { update(data: Uint8Array): unknown; digest(encoding: 'hex'): string };
}

/**
 * On Node, `node:crypto`'s SHA-256 (the same digest): WebCrypto's `digest` is a
 * thread-pool job that costs tens of µs of main-thread time per call, this
 * about one. Reached through `process.getBuiltinModule`, so no bundler sees an
 * import and browsers keep WebCrypto.
 */
const nodeHash: NodeHash | undefined = (() => {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  let mod: Partial<NodeHash> | undefined;
  try {
    mod = typeof proc?.getBuiltinModule === 'function' ? (proc.getBuiltinModule('node:crypto') as Partial<NodeHash> | undefined) : undefined;
  } catch {
    // Next.js's Edge Runtime: its process.getBuiltinModule throws "A Node.js API is used". WebCrypto then.
  }
  return typeof mod?.createHash === 'function' ? (mod as NodeHash) : undefined;
})();

async function sha256Hex(parts: readonly Uint8Array[]): Promise<string> {
  if (nodeHash !== undefined) {
    const hash = nodeHash.createHash('sha256');
    for (const part of parts) hash.update(part);
    return hash.digest('hex');
  }
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined) {
    throw new Error(
      'WebCrypto (crypto.subtle) is unavailable; browsers expose it only in secure contexts (https or localhost)',
    );
  }
  const digest = new Uint8Array(await subtle.digest('SHA-256', concatBytes(parts)));
  let hex = '';
  for (const byte of digest) hex += byte.toString(16).padStart(2, '0');
  return hex;
}
