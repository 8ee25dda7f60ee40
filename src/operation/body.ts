/**
 * Request body capture: turns a fetch `BodyInit` into the exact bytes that are fingerprinted
 * and re-sent on every attempt. And a response body read whole, cancelled at its source when the
 * read is given up.
 *
 * @module
 */
import { isPlainObject } from '../schema.js';

/**
 * Default cap, in bytes, for buffering a request body: 1 MiB. Raise it with the
 * `maxBodyBytes` option.
 *
 * @default 1_048_576
 */
export const DEFAULT_MAX_BODY_BYTES: number = 1_048_576;

/**
 * Marks a `Response` whose body is already whole in memory (the default Node transport's small
 * answers): reading it cancels nothing and needs no reader, so it is read with `arrayBuffer()`.
 */
export const WHOLE_BODY: unique symbol = Symbol.for('oncefetch.whole-body');

/** The outcome of {@link captureBody}. */
export interface CapturedBody {
  /** The exact bytes to fingerprint and to send on every attempt; `undefined` for no body. */
  bytes: Uint8Array<ArrayBuffer> | undefined;
  /**
   * The `Content-Type` fetch would add for this body when the caller sets none
   * (`URLSearchParams`, `string`, typed `Blob`); `undefined` otherwise.
   */
  impliedContentType: string | undefined;
}

const FORM_URLENCODED = 'application/x-www-form-urlencoded;charset=UTF-8';
const TEXT_PLAIN = 'text/plain;charset=UTF-8';

/**
 * Reads a fetch `BodyInit` into exact bytes, once, so every attempt re-sends the same bytes and
 * the fingerprint covers exactly what goes on the wire.
 *
 * Accepts `string` (UTF-8, as fetch encodes it), `ArrayBuffer`, any `ArrayBufferView` (only the
 * view's bytes are copied), `Blob`, `URLSearchParams` and `ReadableStream<Uint8Array>` (consumed).
 * `FormData` is serialised once (multipart, with its boundary as the implied content type).
 * `null`/`undefined` mean no body. The cap applies to every body type, so the same content is
 * accepted or refused whatever form it arrives in; a stream is cancelled as soon as it exceeds it.
 *
 * @param body - the request body as passed to fetch
 * @param maxBytes - the largest body accepted, in bytes; `Infinity` disables the cap
 * @default maxBytes {@link DEFAULT_MAX_BODY_BYTES} (1 MiB)
 * @returns the bytes and the content type implied by the body
 * @throws RangeError when the body exceeds `maxBytes`, or `maxBytes` is not a non-negative integer
 * @throws TypeError for unsupported body types
 * @example
 * ```ts
 * const { bytes, impliedContentType } = await captureBody(new URLSearchParams({ q: 'a b' }));
 * // bytes: 'q=a+b' in UTF-8, impliedContentType: 'application/x-www-form-urlencoded;charset=UTF-8'
 * ```
 */
export async function captureBody(
  body: BodyInit | null | undefined,
  maxBytes: number = DEFAULT_MAX_BODY_BYTES,
): Promise<CapturedBody> {
  if (!(maxBytes === Infinity || (Number.isSafeInteger(maxBytes) && maxBytes >= 0))) {
    throw new RangeError(`maxBodyBytes must be a non-negative integer or Infinity, got ${String(maxBytes)}`);
  }
  if (body === null || body === undefined) return { bytes: undefined, impliedContentType: undefined };
  if (typeof body === 'string') {
    return { bytes: withinCap(new TextEncoder().encode(body), maxBytes), impliedContentType: TEXT_PLAIN };
  }
  if (body instanceof URLSearchParams) {
    return { bytes: withinCap(new TextEncoder().encode(body.toString()), maxBytes), impliedContentType: FORM_URLENCODED };
  }
  if (typeof FormData !== 'undefined' && body instanceof FormData) {
    // Serialised once, here, as fetch would: every attempt resends these bytes under this boundary.
    // The boundary is random per serialisation, so the fingerprint sets it aside (fingerprint.ts).
    const serialised = new Response(body);
    const bytes = new Uint8Array(await serialised.arrayBuffer());
    return { bytes: withinCap(bytes, maxBytes), impliedContentType: serialised.headers.get('content-type') ?? undefined };
  }
  if (typeof Blob !== 'undefined' && body instanceof Blob) {
    checkCap(body.size, maxBytes);
    const bytes = new Uint8Array(await body.arrayBuffer());
    return { bytes: withinCap(bytes, maxBytes), impliedContentType: body.type === '' ? undefined : body.type };
  }
  if (ArrayBuffer.isView(body)) {
    checkCap(body.byteLength, maxBytes);
    // Copy only the view's window, never the whole underlying buffer, and detach from later writes.
    const bytes = new Uint8Array(body.byteLength);
    bytes.set(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
    return { bytes, impliedContentType: undefined };
  }
  if (isArrayBuffer(body)) {
    checkCap(body.byteLength, maxBytes);
    return { bytes: new Uint8Array(body.slice(0)), impliedContentType: undefined };
  }
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) {
    // As fetch does, refuse a stream already read from or locked: the rest of it is not the body.
    if (body.locked || isDisturbed(body)) throw new TypeError('a request body stream must not be locked or already read from');
    return { bytes: await readStream(body as ReadableStream<unknown>, maxBytes), impliedContentType: undefined };
  }
  // (fetch would send a plain object as "[object Object]": JSON is what was meant)
  const json = isPlainObject(body) || Array.isArray(body) ? ' (pass JSON.stringify(body) with a content-type: application/json header)' : '';
  throw new TypeError(`oncefetch cannot capture a request body of type ${describeBody(body)}${json}`);
}

/** Whether `stream` was read from, by asking the platform's `Response`, which refuses such a stream. */
function isDisturbed(stream: ReadableStream): boolean {
  const node = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  let streams: { isDisturbed?: (s: unknown) => boolean } | undefined;
  try {
    streams = typeof node?.getBuiltinModule === 'function' ? (node.getBuiltinModule('node:stream') as typeof streams) : undefined;
  } catch {
    // Next.js's Edge Runtime: its process.getBuiltinModule throws. Ask Response below.
  }
  if (typeof streams?.isDisturbed === 'function') return streams.isDisturbed(stream);
  try {
    // Browsers: constructing a Response from a disturbed stream throws; from a fresh one it locks
    // nothing until read, and the stream is read below through its own reader anyway.
    new Response(stream);
    return false;
  } catch {
    return true;
  }
}

async function readStream(stream: ReadableStream<unknown>, maxBytes: number): Promise<Uint8Array<ArrayBuffer>> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!(value instanceof Uint8Array)) {
        // fetch itself rejects such a stream, so refuse it before it is recorded.
        throw new TypeError(`a request body stream must yield Uint8Array chunks, got ${describeBody(value)}`);
      }
      total += value.byteLength;
      checkCap(total, maxBytes);
      chunks.push(value.slice());
    }
  } catch (error) {
    await reader.cancel(error).catch(() => undefined);
    throw error;
  } finally {
    reader.releaseLock();
  }
  return concatBytes(chunks, total);
}

/** A response body being read by {@link readBody}: the bytes read so far, and how to give the read up. */
export interface BodyRead {
  size: number;
  /** cancels the body's source with `reason` (never throws): the read then rejects with the signal's reason */
  cancel: (reason: unknown) => void;
}

/**
 * `response`'s body, whole. `watch(read)` is called before the first read, to give it up (`read.cancel`)
 * when its reader stops waiting for it; what it returns is called once the read ends. Already aborted
 * (`signal`): cancelled at once. A body tied to no signal (a custom fetch's, one trickling forever) is
 * otherwise never cancelled: its producer would go on, its connection open, for nobody. A reader, not
 * `arrayBuffer()`, which holds the body locked out of a cancel's reach (and is no faster).
 */
export async function readBody(response: Response, signal: AbortSignal, watch: (read: BodyRead) => (() => void) | void): Promise<Uint8Array> {
  // already whole in memory (the default Node transport's small answers): `body` would build a stream
  // for nothing (read through it, 20 us a body against 0.6 us)
  if (WHOLE_BODY in response) return new Uint8Array(await response.arrayBuffer());
  const body = response.body as ReadableStream<Uint8Array> | null | undefined;
  // no body; one already read (arrayBuffer refuses it as fetch does); another fetch's (node-fetch's Node
  // stream, a lookup's Response-like shape with none)
  if (typeof body?.getReader !== 'function' || response.bodyUsed) return new Uint8Array(await response.arrayBuffer());
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let cut = false;
  // A source's cancel that throws rejects, caught. A reader not the platform's (a polyfill's, a
  // Response-like shape's) may throw at once or return no promise: called from an abort listener,
  // that would be an uncaught exception, and stop the engine's own give-up before it rejects.
  const stop = (reason?: unknown): void => {
    try {
      Promise.resolve(reader.cancel(reason)).catch(() => undefined);
    } catch {
      // not cancelled: the loop stops at its next chunk all the same
    }
  };
  const read: BodyRead = {
    size: 0,
    cancel: (reason) => {
      cut = true;
      stop(reason);
    },
  };
  const unwatch = watch(read);
  try {
    if (signal.aborted) read.cancel(signal.reason);
    for (;;) {
      const next = await reader.read();
      // (given up: a source whose cancel failed is read no further, for nobody)
      if (next.done || cut) break;
      // as arrayBuffer() refuses them; by tag, not `instanceof`: a Uint8Array of another realm (Node's fetch
      // seen from a Jest test's vm context, whose Uint8Array is its own) is one all the same, as arrayBuffer() takes it
      if (!ArrayBuffer.isView(next.value) || Object.prototype.toString.call(next.value) !== '[object Uint8Array]') {
        stop();
        throw new TypeError('a response body chunk is not a Uint8Array');
      }
      chunks.push(next.value);
      read.size += next.value.byteLength;
    }
  } finally {
    unwatch?.();
  }
  if (cut) throw signal.reason;
  // (a copy, as arrayBuffer() gives: a chunk may be a window on a larger, pooled or reused buffer)
  return concatBytes(chunks, read.size);
}

/** `parts` as one new array (`length`, when the caller already knows it, saves a pass). */
export function concatBytes(parts: readonly Uint8Array[], length = parts.reduce((n, p) => n + p.byteLength, 0)): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}

function withinCap(bytes: Uint8Array<ArrayBuffer>, maxBytes: number): Uint8Array<ArrayBuffer> {
  checkCap(bytes.byteLength, maxBytes);
  return bytes;
}

function checkCap(size: number, maxBytes: number): void {
  if (size > maxBytes) {
    throw new RangeError(
      `request body exceeds the ${maxBytes}-byte buffering cap (maxBodyBytes); oncefetch keeps the exact bytes ` +
        'to fingerprint and re-send them, so raise the maxBodyBytes option if larger bodies are expected',
    );
  }
}

/** Cross-realm safe: an ArrayBuffer from another realm fails `instanceof`. */
function isArrayBuffer(value: unknown): value is ArrayBuffer {
  return value instanceof ArrayBuffer || Object.prototype.toString.call(value) === '[object ArrayBuffer]';
}

function describeBody(value: unknown): string {
  if (typeof value !== 'object' || value === null) return typeof value;
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? name : 'object';
}
