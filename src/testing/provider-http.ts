/**
 * Small HTTP helpers for the loopback provider: body reading, replies, problem
 * documents, key-header parsing, payload fingerprints and an abortable sleep.
 *
 * @module
 */

import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

/** A reply the provider is about to send. */
export interface Reply {
  status: number;
  contentType: string;
  bodyText: string;
  headers: Record<string, string>;
}

/** Base URI of the provider's problem types. */
export const PROBLEM_BASE = 'https://oncefetch.dev/problems/';

/** An RFC 9457 problem+json reply. */
export function problem(status: number, type: string, title: string, headers: Record<string, string> = {}): Reply {
  return {
    status,
    contentType: 'application/problem+json',
    bodyText: JSON.stringify({ type: PROBLEM_BASE + type, title, status }),
    headers,
  };
}

/** A JSON reply. */
export function json(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return { status, contentType: 'application/json', bodyText: JSON.stringify(value), headers };
}

/** Writes a whole reply. Writing to a socket the client already closed is a no-op. */
export function send(res: ServerResponse, reply: Reply): void {
  if (res.destroyed || res.headersSent) return;
  const body = Buffer.from(reply.bodyText, 'utf8');
  res.writeHead(reply.status, {
    ...reply.headers,
    'content-type': reply.contentType,
    'content-length': String(body.length),
  });
  res.end(body);
}

/**
 * Sends the headers with the full `Content-Length` but only the first half of the
 * body, then closes the socket once that half has been flushed.
 */
export function sendTruncated(res: ServerResponse, reply: Reply): void {
  if (res.destroyed || res.headersSent) return;
  const body = Buffer.from(reply.bodyText, 'utf8');
  const written = body.subarray(0, Math.floor(body.length / 2));
  res.writeHead(reply.status, {
    ...reply.headers,
    'content-type': reply.contentType,
    'content-length': String(Math.max(body.length, written.length + 1)),
  });
  res.flushHeaders();
  res.write(written, () => res.socket?.destroy());
}

/** Thrown by {@link readBody} past the size limit. */
export class BodyTooLargeError extends Error {}

/** Reads the whole request body, rejecting past `limitBytes`. */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        reject(new BodyTooLargeError(`request body over ${limitBytes} bytes`));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
    // A client that vanishes mid-body may end the stream with 'close' alone.
    req.once('close', () => reject(new Error('request closed before its body was read')));
  });
}

/** Header map flattened to `name → value` (lower-case names, repeated values joined by `, `). */
export function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/**
 * The idempotency key from a header value: an RFC 8941 sf-string (`"abc"`) is
 * unquoted, a bare token is taken as is; empty means absent.
 */
export function parseKeyHeader(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const raw = (Array.isArray(value) ? value.join(', ') : value).trim();
  const quoted = /^"((?:[^"\\]|\\.)*)"$/.exec(raw);
  const key = quoted?.[1] !== undefined ? quoted[1].replace(/\\(.)/g, '$1') : raw;
  return key === '' ? undefined : key;
}

/** JSON with object keys sorted recursively: equal meaning, equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(value).sort()) out[name] = sortKeys((value as Record<string, unknown>)[name]);
  return out;
}

/** SHA-256 (hex) over the canonical JSON of `parsed`, or over `raw` bytes when `rawCompare`. */
export function fingerprint(raw: Buffer, parsed: unknown, rawCompare: boolean): string {
  const hash = createHash('sha256');
  hash.update(rawCompare ? raw : Buffer.from(canonicalJson(parsed), 'utf8'));
  return hash.digest('hex');
}

/** Parses JSON without throwing. */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

/**
 * Resolves `true` after `ms`, or `false` as soon as `signal` aborts. The timer is
 * unref'd and cleared on abort, so a pending delay never keeps the process alive.
 */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    timer.unref();
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
