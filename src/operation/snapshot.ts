/**
 * Result snapshots: what a terminal record stores so that later calls are
 * answered without the network. Secrets are never stored; bodies are capped.
 *
 * @module
 */
import type { ResultSnapshot } from './record.js';

/**
 * Header set (to `'true'`) on every replayed response: the answer came from
 * the store, and this call sent nothing.
 *
 * @example
 * ```ts
 * const res = await client.fetch(url, init)
 * if (res.headers.get(REPLAYED_HEADER) === 'true') log('already done earlier; nothing sent')
 * ```
 */
export const REPLAYED_HEADER = 'oncefetch-replayed';
/**
 * Header set (to `'true'`) on a response whose body is the stored one, capped at
 * `maxStoredBodyBytes` (a replay, or a result found by this call's own lookup):
 * do not parse the body as complete.
 *
 * @example
 * ```ts
 * const order = res.headers.has(TRUNCATED_HEADER) ? await fetchOrderByRef(ref) : await res.json()
 * ```
 */
export const TRUNCATED_HEADER = 'oncefetch-body-truncated';

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Snapshot of a response whose body was already read. */
export function responseSnapshot(
  response: Response,
  body: Uint8Array,
  source: ResultSnapshot['source'],
  sensitive: ReadonlySet<string>,
  maxStoredBodyBytes: number,
): ResultSnapshot {
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => {
    if (!sensitive.has(name.toLowerCase())) headers.push([name, value]);
  });
  const truncated = body.byteLength > maxStoredBodyBytes;
  return {
    kind: 'response',
    source,
    status: response.status,
    statusText: response.statusText,
    headers,
    body: toBase64(truncated ? body.subarray(0, maxStoredBodyBytes) : body),
    bodyTruncated: truncated,
  };
}

/** UTF-8 length of `text`, without encoding it (a surrogate pair counts 2 + 2: JSON.stringify leaves none alone). */
function utf8Length(text: string): number {
  let n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) n += c < 0x800 || (c >= 0xd800 && c < 0xe000) ? 1 : 2;
  }
  return n;
}

const NOT_STORED = /^\(value not stored: (\d+) bytes/;

function value(body: string, status: number, source: ResultSnapshot['source'], truncated: boolean): ResultSnapshot {
  return { kind: 'value', source, status, statusText: '', headers: [], body, bodyTruncated: truncated };
}

/**
 * Snapshot of a `client.run()` value (JSON text). A cut JSON text is no value: one over
 * `maxStoredBodyBytes` (UTF-8) keeps only its size, in a body that is not JSON (see {@link unstoredBytes}).
 */
export function valueSnapshot(json: string, status: number, source: ResultSnapshot['source'], maxStoredBodyBytes: number): ResultSnapshot {
  const bytes = utf8Length(json);
  if (bytes <= maxStoredBodyBytes) return value(json, status, source, false);
  return value(`(value not stored: ${bytes} bytes of JSON, over maxStoredBodyBytes)`, status, source, true);
}

/** The size in bytes of the value a value snapshot did not store (see {@link valueSnapshot}), as it says. */
export function unstoredBytes(snapshot: ResultSnapshot): number | undefined {
  if (snapshot.kind !== 'value' || !snapshot.bodyTruncated) return undefined;
  const match = NOT_STORED.exec(snapshot.body);
  return match === null ? undefined : Number(match[1]);
}

/**
 * Snapshot of a failed `client.run()`: `{"error": message}`, the message cut to its longest prefix
 * (marked `…` and `bodyTruncated`) whose JSON fits `maxStoredBodyBytes`; an empty body when even
 * an empty message would not fit.
 */
export function errorSnapshot(message: string, status: number, maxStoredBodyBytes: number): ResultSnapshot {
  const length = message.length;
  // the JSON of the message's first n characters (never half a surrogate pair), marked when cut
  const json = (n: number): string =>
    JSON.stringify({ error: n < length ? `${message.slice(0, /[\uD800-\uDBFF]/.test(message.charAt(n - 1)) ? n - 1 : n)}…` : message });
  const fits = (n: number): boolean => utf8Length(json(n)) <= maxStoredBodyBytes;
  // (every character is a byte of JSON or more: no need to encode more than maxStoredBodyBytes of them)
  if (length <= maxStoredBodyBytes && fits(length)) return value(json(length), status, 'attempt', false);
  if (!fits(0)) return value('', status, 'attempt', true);
  // binary search: the first `lo` characters fit, more than `hi` do not
  let lo = 0;
  let hi = Math.min(length - 1, maxStoredBodyBytes);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return value(json(lo), status, 'attempt', true);
}

const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);
/**
 * A Content-Encoding (lower-cased) made only of codings every fetch decodes (browsers', undici's), so that a body under it
 * was handed over decoded; fetch hands a body under any other list over as received. zstd, last (applied last), is
 * captured: only some fetches decode it (Chromium, Firefox, Node's where node:zlib has it).
 */
const FETCH_DECODES = /^(?:\s*(?:(?:x-)?gzip|deflate|br)\s*,)*\s*(?:(?:x-)?gzip|deflate|br|(zstd))\s*$/;

/** The live result of one attempt: the body read whole and the headers as received (secrets included). */
export interface LiveBody {
  bytes: Uint8Array;
  headers: Headers;
  /** the final URL, after redirects, as the transport's response gave it */
  url?: string;
  redirected?: boolean;
  /** a 2xx event stream, passed through as it arrives (`bytes` is then empty); for the live caller only */
  stream?: ReadableStream<Uint8Array>;
}

/**
 * A `Response` for the caller: from this call's live body and headers, or from
 * a stored snapshot (a replay, marked with {@link REPLAYED_HEADER}). `cap` cuts a live body
 * (an error's cause keeps no more than the record stores), marked with {@link TRUNCATED_HEADER}.
 */
export function buildResponse(snapshot: ResultSnapshot, live: LiveBody | undefined, replayed: boolean, cap = Infinity): Response {
  const headers = new Headers(live?.headers ?? snapshot.headers);
  // Response copies the bytes it is given, so one live body can serve several callers. Cut, a copy: Node's
  // Response keeps the view it is given too (its `source`), and a view keeps its whole buffer.
  const whole = (live?.bytes ?? fromBase64(snapshot.body)) as Uint8Array<ArrayBuffer>;
  const bytes = whole.byteLength > cap ? whole.slice(0, cap) : whole;
  // The body we hand back is complete (or capped), and decoded where fetch decodes; stale framing headers would lie.
  // A Content-Length that still describes it is kept: the bytes as received, or none (a HEAD, a 304).
  // A Content-Encoding fetch did not decode (`compress`) still says what the body is: kept, as fetch keeps it.
  // The body given is cut only where it is the stored one, or a stream's empty stand-in for a call that
  // joined it: the live bytes (the live caller's, and a joined call's) are whole, but in an error's cause (`cap`).
  const cut = bytes !== whole || (snapshot.bodyTruncated && (live === undefined || (live.stream !== undefined && replayed)));
  const length = headers.get('content-length');
  const encoding = headers.get('content-encoding')?.toLowerCase() ?? '';
  const coded = FETCH_DECODES.exec(encoding);
  // A live stream goes to its caller unread: its bytes are an empty stand-in here.
  const streamed = live?.stream !== undefined && !replayed;
  // (a zstd body tells whether this fetch decoded it: still a zstd frame when it did not; a live stream's
  // does not, and keeps the header as fetch gave it)
  const decoded = coded !== null && (coded[1] === undefined || (!streamed && (bytes[0] !== 0x28 || bytes[1] !== 0xb5 || bytes[2] !== 0x2f || bytes[3] !== 0xfd)));
  if (decoded || cut || (bytes.byteLength !== 0 && length !== String(bytes.byteLength))) {
    headers.delete('content-length');
  }
  if (decoded || /^\s*(?:identity)?\s*$/.test(encoding)) headers.delete('content-encoding');
  headers.delete('transfer-encoding');
  if (replayed) headers.set(REPLAYED_HEADER, 'true');
  // A cut body says so to every call it answers: a replay, a joined call of a stream, or the call whose
  // own lookup found it (the lookup's whole body is not kept) or that followed another owner's record.
  if (cut) headers.set(TRUNCATED_HEADER, 'true');
  const init: ResponseInit = { status: snapshot.status, statusText: snapshot.statusText, headers };
  // A live stream has one reader: the live caller; joined callers get the (truncated) snapshot.
  const body = streamed ? live.stream : bytes;
  const response = new Response(NULL_BODY_STATUS.has(snapshot.status) ? null : body, init);
  // The live caller sees where the request ended up, as from fetch (a replay has no live URL).
  if (live?.url !== undefined && live.url !== '') Object.defineProperty(response, 'url', { value: live.url });
  if (live?.redirected === true) Object.defineProperty(response, 'redirected', { value: true });
  return response;
}
