/**
 * Classifies errors thrown by the transport (Node's global fetch / undici, browsers).
 *
 * The one rule that matters: never claim `not_sent` without proof. Proof is a
 * connect-phase or DNS error code somewhere in the `cause` chain, or the engine
 * telling us the attempt never reached dispatch. Everything else is `ambiguous`.
 *
 * @module
 */

import { isOnceError } from '../errors.js';
import type { AttemptPhase, Classification } from './classify.js';

/** How far down `cause` (and `AggregateError.errors`) the walk goes. */
export const MAX_CAUSE_DEPTH = 8;

/** Upper bound on errors inspected, whatever the shape of the graph. */
const MAX_NODES = 32;

/**
 * Error codes proving the request never left: DNS, connect-phase socket errors,
 * undici's connect timeout, an unparsable URL, and TLS certificate failures
 * (request bytes flow only after the handshake, and Node sends no 0-RTT data).
 */
export const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'ERR_INVALID_URL',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * The code of the error the Node transport throws when a request was answered (a redirect) and
 * following that answer then failed: its `cause` may hold a connect-phase code, which proves
 * nothing about the request the provider already received.
 */
export const FAILED_AFTER_RESPONSE = 'ONCEFETCH_FAILED_AFTER_RESPONSE';

/**
 * Error codes meaning the request may have been sent and processed: timeouts and
 * resets after connect, truncated responses, a redirect that failed after the provider
 * answered. They win over any `not_sent` code found elsewhere in the same chain.
 */
export const AMBIGUOUS_CODES: ReadonlySet<string> = new Set([
  FAILED_AFTER_RESPONSE,
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'ECONNRESET',
  'EPIPE',
]);

/** Error names meaning "we stopped waiting"; the server may still have acted. */
export const AMBIGUOUS_NAMES: ReadonlySet<string> = new Set(['AbortError', 'TimeoutError']);

/**
 * Node system calls on an established socket. A "not sent" code raised by one of
 * these (EHOSTUNREACH while reading, ETIMEDOUT on write...) is no longer proof.
 */
const ESTABLISHED_SYSCALLS: ReadonlySet<string> = new Set(['read', 'write', 'writev', 'shutdown']);

interface ErrorFacts {
  code: string | undefined;
  name: string | undefined;
  message: string | undefined;
  syscall: string | undefined;
  /** a OnceError, of any copy of oncefetch */
  once: boolean;
}

function stringProp(node: object, key: string): string | undefined {
  const value: unknown = (node as Record<string, unknown>)[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Breadth-first walk of `cause` and `AggregateError.errors`, cycle-safe and bounded. `cut`: the
 * bounds left an error unread, so what was read proves nothing absent (no `not_sent` from it).
 */
function collectChain(error: unknown): { facts: ErrorFacts[]; cut: boolean } {
  const seen = new Set<object>();
  const facts: ErrorFacts[] = [];
  const unread = (node: unknown): node is object => typeof node === 'object' && node !== null && !seen.has(node);
  let level: unknown[] = [error];
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && level.length > 0; depth++) {
    const next: unknown[] = [];
    for (const node of level) {
      if (!unread(node)) continue;
      if (facts.length >= MAX_NODES) return { facts, cut: true };
      seen.add(node);
      facts.push({
        code: stringProp(node, 'code'),
        name: stringProp(node, 'name'),
        message: stringProp(node, 'message'),
        syscall: stringProp(node, 'syscall'),
        once: isOnceError(node),
      });
      const { cause, errors } = node as { cause?: unknown; errors?: unknown };
      next.push(cause);
      if (Array.isArray(errors)) next.push(...(errors as unknown[]));
    }
    level = next;
  }
  return { facts, cut: level.some(unread) };
}

function isAmbiguousSignal(node: ErrorFacts): string | undefined {
  if (node.code !== undefined && AMBIGUOUS_CODES.has(node.code)) return node.code;
  if (node.code !== undefined && NOT_SENT_CODES.has(node.code) && isEstablished(node)) {
    return `${node.code} on ${node.syscall ?? 'socket'}`;
  }
  if (node.code === 'ETIMEDOUT' && node.syscall !== 'connect') return node.code;
  if (node.name !== undefined && AMBIGUOUS_NAMES.has(node.name)) return node.name;
  // undici rejects a body cut mid-stream with TypeError('terminated').
  if (node.message === 'terminated') return 'terminated';
  return undefined;
}

function isNotSentSignal(node: ErrorFacts): string | undefined {
  if (node.code === undefined) return undefined;
  if (NOT_SENT_CODES.has(node.code) && !isEstablished(node)) return node.code;
  if (node.code === 'ETIMEDOUT' && node.syscall === 'connect') return node.code;
  return undefined;
}

function isEstablished(node: ErrorFacts): boolean {
  return node.syscall !== undefined && ESTABLISHED_SYSCALLS.has(node.syscall);
}

/** A URL in a message: its scheme, credentials (dropped), host and path, then its query or fragment (`tail`). */
const URL_PARTS = /\b([a-z][\w+.-]*:\/\/)(?:[^\s/?#@]*@)?([^\s?#"'<>()]*)([?#][^\s"'<>()]*)?/gi;

/**
 * A short label for reasons: first recognised signal, else first code, else the first error's name
 * and message (a browser's fetch says no more than "TypeError: Failed to fetch"), cut at 100 characters.
 */
function describe(chain: readonly ErrorFacts[]): string {
  for (const node of chain) {
    const signal = isAmbiguousSignal(node) ?? isNotSentSignal(node);
    if (signal !== undefined) return signal;
  }
  const withCode = chain.find((node) => node.code !== undefined);
  if (withCode?.code !== undefined) return withCode.code;
  const first = chain[0];
  if (first?.name === undefined) return 'non-error value';
  // (a URL in it, as node-fetch's and Deno's give, loses its credentials, query and fragment: never stored)
  const message = (first.message ?? '').replace(URL_PARTS, (_, scheme: string, rest: string, tail?: string) => `${scheme}${rest}${tail === undefined ? '' : '?…'}`);
  if (message === '' || message === first.name) return first.name;
  return `${first.name}: ${message.length > 100 ? `${message.slice(0, 99)}…` : message}`;
}

/**
 * Classifies a thrown transport error.
 *
 * - `before_dispatch`: always `not_sent` (the engine had not handed the request over).
 * - `reading_body`: always `ambiguous` (the status line arrived; the body is truncated).
 * - `awaiting_response`: walks the `cause` chain (depth {@link MAX_CAUSE_DEPTH}, including
 *   `AggregateError.errors` from Happy Eyeballs; at most 32 errors). An ambiguous signal anywhere
 *   wins; else a code from {@link NOT_SENT_CODES} gives `not_sent`, unless the bounds left part of
 *   the chain unread (an ambiguous signal may be there); else `ambiguous`. A chain holding a
 *   OnceError (of any copy of oncefetch: a `fetch` that is another oncefetch client's) is never
 *   `not_sent`: it ends a whole operation, whose requests may have left before the connect error
 *   in its chain (its lookup's, its store's, its last attempt's).
 *
 * Never throws: an error whose properties cannot be read is `ambiguous`.
 *
 * @example
 * const error = new TypeError('fetch failed', {
 *   cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
 * });
 * classifyTransportError(error, 'awaiting_response'); // { class: 'not_sent', reason: 'ECONNREFUSED' }
 */
export function classifyTransportError(error: unknown, phase: AttemptPhase): Classification {
  let chain: ErrorFacts[];
  let cut: boolean;
  try {
    ({ facts: chain, cut } = collectChain(error));
  } catch {
    // A hostile getter or revoked Proxy: we know nothing, so assume the worst.
    return phase === 'before_dispatch'
      ? { class: 'not_sent', reason: 'before dispatch: unreadable error' }
      : { class: 'ambiguous', reason: 'unreadable error' };
  }
  if (phase === 'before_dispatch') {
    return { class: 'not_sent', reason: `before dispatch: ${describe(chain)}` };
  }
  if (phase === 'reading_body') {
    return { class: 'ambiguous', reason: `reading body: ${describe(chain)}` };
  }
  for (const node of chain) {
    const signal = isAmbiguousSignal(node);
    if (signal !== undefined) return { class: 'ambiguous', reason: signal };
  }
  const once = chain.find((node) => node.once);
  if (once !== undefined) return { class: 'ambiguous', reason: `oncefetch error ${once.code ?? ''}` };
  // an ambiguous signal may lie past the bounds: a connect error read before them proves nothing
  if (cut) return { class: 'ambiguous', reason: `cause chain cut before its end: ${describe(chain)}` };
  for (const node of chain) {
    const signal = isNotSentSignal(node);
    if (signal !== undefined) return { class: 'not_sent', reason: signal };
  }
  return { class: 'ambiguous', reason: `unknown error: ${describe(chain)}` };
}
