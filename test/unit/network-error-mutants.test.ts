/**
 * Tests written to kill hand-made mutants of src/classify/network-error.ts that the other suites
 * let survive. The pattern: an ambiguous signal beside a connect-phase code. Alone, a dropped
 * ambiguous code still reads as "unknown error: ambiguous"; next to ECONNREFUSED it would read as
 * proof of `not_sent`, and a resend after a request that may have had its effect.
 */
import { describe, expect, it } from 'vitest';

import { classifyTransportError } from '../../src/classify/network-error.js';
import { DeadlineExceededError, StoreError } from '../../src/errors.js';

const coded = (code: string, extra: Record<string, unknown> = {}, cause?: unknown): Error =>
  Object.assign(new Error(`boom ${code}`, cause === undefined ? undefined : { cause }), { code, ...extra });

const refused = (): Error => coded('ECONNREFUSED', { syscall: 'connect' });

const fetchFailed = (cause: unknown): TypeError => new TypeError('fetch failed', { cause });

describe('every ambiguous code wins over a connect-phase code in the same chain', () => {
  it.each([
    'ONCEFETCH_FAILED_AFTER_RESPONSE',
    'UND_ERR_HEADERS_TIMEOUT',
    'UND_ERR_BODY_TIMEOUT',
    'UND_ERR_SOCKET',
    'UND_ERR_CLOSED',
    'UND_ERR_DESTROYED',
    'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
    'ECONNRESET',
    'EPIPE',
  ])('%s wrapping ECONNREFUSED is ambiguous, named as the reason', (code) => {
    const result = classifyTransportError(fetchFailed(coded(code, {}, refused())), 'awaiting_response');
    expect(result).toEqual({ class: 'ambiguous', reason: code });
  });

  it('a redirect followed after the provider answered, then refused: ambiguous (node transport shape)', () => {
    const error = fetchFailed(
      Object.assign(new Error('following a redirect failed after the provider answered the request', { cause: refused() }), {
        code: 'ONCEFETCH_FAILED_AFTER_RESPONSE',
      }),
    );
    expect(classifyTransportError(error, 'awaiting_response').class).toBe('ambiguous');
  });

  it.each(['AbortError', 'TimeoutError'])('a %s beside a refusal is ambiguous', (name) => {
    const stopped = Object.assign(new Error('stopped', { cause: refused() }), { name });
    expect(classifyTransportError(stopped, 'awaiting_response')).toEqual({ class: 'ambiguous', reason: name });
  });

  it('ETIMEDOUT without a syscall (not the connect phase) beside a refusal is ambiguous', () => {
    expect(classifyTransportError(fetchFailed(coded('ETIMEDOUT', {}, refused())), 'awaiting_response')).toEqual({
      class: 'ambiguous',
      reason: 'ETIMEDOUT',
    });
  });

  it("undici's TypeError('terminated') beside a refusal is ambiguous", () => {
    const terminated = new TypeError('terminated', { cause: refused() });
    expect(classifyTransportError(terminated, 'awaiting_response')).toEqual({ class: 'ambiguous', reason: 'terminated' });
  });
});

describe('a OnceError in the chain is never proof of not sent', () => {
  it('an inner oncefetch client\'s DeadlineExceededError caused by a refusal: ambiguous', () => {
    // the inner operation may have sent requests before its last attempt was refused
    const inner = new DeadlineExceededError('deadline of 1000 ms passed', { cause: refused() });
    const result = classifyTransportError(inner, 'awaiting_response');
    expect(result.class).toBe('ambiguous');
    expect(result.reason).toBe('oncefetch error DEADLINE_EXCEEDED');
  });

  it('a StoreError wrapping a refusal, below a fetch failed: ambiguous', () => {
    const result = classifyTransportError(fetchFailed(new StoreError('store: GET failed', { cause: refused() })), 'awaiting_response');
    expect(result.class).toBe('ambiguous');
  });

  it('a OnceError of another copy of oncefetch (branded only) caused by a refusal: ambiguous', () => {
    const foreign = Object.assign(new Error('foreign', { cause: refused() }), { code: 'DEADLINE_EXCEEDED' });
    Object.defineProperty(foreign, Symbol.for('oncefetch.error'), { value: true });
    expect(classifyTransportError(foreign, 'awaiting_response').class).toBe('ambiguous');
  });
});

describe('a connect-phase code raised on an established socket is no proof', () => {
  it.each(['read', 'write', 'writev', 'shutdown'])('EHOSTUNREACH on %s is ambiguous', (syscall) => {
    const result = classifyTransportError(fetchFailed(coded('EHOSTUNREACH', { syscall })), 'awaiting_response');
    expect(result).toEqual({ class: 'ambiguous', reason: `EHOSTUNREACH on ${syscall}` });
  });

  it('ETIMEDOUT on connect is proof: not_sent', () => {
    expect(classifyTransportError(fetchFailed(coded('ETIMEDOUT', { syscall: 'connect' })), 'awaiting_response')).toEqual({
      class: 'not_sent',
      reason: 'ETIMEDOUT',
    });
  });
});

describe('the walk bounds: 8 levels of cause, 32 errors', () => {
  /** a chain of `length` errors: ECONNREFUSED on top, plain wrappers below it, `bottom` (if given) the deepest */
  function chainOf(length: number, bottom?: Error): Error {
    let node: unknown = bottom;
    for (let i = bottom === undefined ? 1 : 2; i < length; i++) node = new Error(`wrapper ${i}`, node === undefined ? undefined : { cause: node });
    return coded('ECONNREFUSED', { syscall: 'connect' }, node);
  }

  it('a chain of 8 errors is read to its end: not_sent', () => {
    expect(classifyTransportError(chainOf(8), 'awaiting_response').class).toBe('not_sent');
  });

  it('a chain of 9 errors is cut: ambiguous', () => {
    const result = classifyTransportError(chainOf(9), 'awaiting_response');
    expect(result.class).toBe('ambiguous');
    expect(result.reason).toMatch(/cause chain cut/);
  });

  // A connect error is proof of not_sent only when nothing was left unread: an ambiguous signal
  // past the bounds would have won (f1d0032).
  it('a TimeoutError within the depth bound, under a connect error, is seen; past it, the cut walk is still ambiguous', () => {
    const timeout = (): Error => Object.assign(new Error('timed out'), { name: 'TimeoutError' });
    expect(classifyTransportError(chainOf(8, timeout()), 'awaiting_response').class).toBe('ambiguous');
    const cut = classifyTransportError(chainOf(12, timeout()), 'awaiting_response');
    expect(cut.class).toBe('ambiguous');
    expect(cut.reason).toMatch(/cause chain cut/);
  });

  it('a reset on read past the node bound (a wide AggregateError of refusals): ambiguous', () => {
    const refusals = Array.from({ length: 40 }, () => refused());
    const reset = coded('ECONNRESET', { syscall: 'read' });
    expect(classifyTransportError(fetchFailed(new AggregateError([...refusals, reset])), 'awaiting_response').class).toBe('ambiguous');
  });

  /** fetch failed → AggregateError → `n` refusals: n + 2 errors, 3 levels */
  const wide = (n: number): TypeError =>
    fetchFailed(new AggregateError(Array.from({ length: n }, () => refused())));

  it('32 errors in all are read to the end: not_sent', () => {
    expect(classifyTransportError(wide(30), 'awaiting_response').class).toBe('not_sent');
  });

  it('33 errors in all are cut: ambiguous', () => {
    const result = classifyTransportError(wide(31), 'awaiting_response');
    expect(result.class).toBe('ambiguous');
    expect(result.reason).toMatch(/cause chain cut/);
  });

  it('a cycle is walked once, not taken for a cut: not_sent', () => {
    const top = refused();
    (top as { cause?: unknown }).cause = top;
    expect(classifyTransportError(top, 'awaiting_response').class).toBe('not_sent');
    // a two-error cycle
    const a = refused();
    const b = fetchFailed(a);
    (a as { cause?: unknown }).cause = b;
    expect(classifyTransportError(b, 'awaiting_response').class).toBe('not_sent');
  });

  it('a chain read to its end is proof: a short chain, and the Happy Eyeballs aggregate', () => {
    expect(classifyTransportError(chainOf(6), 'awaiting_response').class).toBe('not_sent');
    const agg = fetchFailed(new AggregateError([coded('ECONNREFUSED'), coded('ETIMEDOUT', { syscall: 'connect' })]));
    expect(classifyTransportError(agg, 'awaiting_response').class).toBe('not_sent');
  });
});

describe('phases', () => {
  it('reading_body with a refusal in the chain is ambiguous', () => {
    expect(classifyTransportError(fetchFailed(refused()), 'reading_body').class).toBe('ambiguous');
  });

  it('an unreadable error while reading the body is ambiguous, before dispatch not_sent', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('no');
        },
      },
    );
    expect(classifyTransportError(hostile, 'reading_body').class).toBe('ambiguous');
    expect(classifyTransportError(hostile, 'awaiting_response').class).toBe('ambiguous');
    expect(classifyTransportError(hostile, 'before_dispatch').class).toBe('not_sent');
  });
});
