/**
 * The cause walk is bounded (MAX_CAUSE_DEPTH levels, 32 errors). A "not sent" code is proof only
 * when nothing was left unread: an ambiguous signal beyond the bound would have won. A cut walk
 * with a connect error in what it read is `ambiguous`, never `not_sent`.
 */
import { describe, expect, it } from 'vitest';
import { MAX_CAUSE_DEPTH, classifyTransportError } from '../../src/classify/network-error.js';

const coded = (code: string, extra: Record<string, unknown> = {}, cause?: unknown): Error =>
  Object.assign(new Error(code, cause === undefined ? undefined : { cause }), { code, ...extra });

/** `levels` plain errors deep, then `tail`, with a connect refusal at the top. */
function deep(levels: number, tail: unknown): Error {
  let node: unknown = tail;
  for (let i = 0; i < levels; i++) node = new Error(`wrapper ${i}`, { cause: node });
  return coded('ECONNREFUSED', { syscall: 'connect' }, node);
}

describe('a cause walk cut short is never proof of not sent', () => {
  it('an ambiguous signal below the depth bound: ambiguous, not not_sent', () => {
    const timeout = Object.assign(new Error('timed out'), { name: 'TimeoutError' });
    // within the bound the signal is seen
    expect(classifyTransportError(deep(MAX_CAUSE_DEPTH - 2, timeout), 'awaiting_response').class).toBe('ambiguous');
    // past it, it is not: still ambiguous, because the walk did not read everything
    const cut = classifyTransportError(deep(MAX_CAUSE_DEPTH + 2, timeout), 'awaiting_response');
    expect(cut.class).toBe('ambiguous');
    expect(cut.reason).toMatch(/cause chain cut/);
  });

  it('an ambiguous signal past the node bound (a wide AggregateError): ambiguous', () => {
    const refusals = Array.from({ length: 40 }, () => coded('ECONNREFUSED', { syscall: 'connect' }));
    const wide = new TypeError('fetch failed', { cause: new AggregateError([...refusals, Object.assign(new Error('reset'), { code: 'ECONNRESET', syscall: 'read' })]) });
    expect(classifyTransportError(wide, 'awaiting_response').class).toBe('ambiguous');
  });

  it('a chain read to its end is still proof: not_sent (a cycle is not a cut)', () => {
    expect(classifyTransportError(deep(MAX_CAUSE_DEPTH - 3, undefined), 'awaiting_response').class).toBe('not_sent');
    const a = coded('ECONNREFUSED', { syscall: 'connect' });
    const b = new TypeError('fetch failed', { cause: a });
    (a as { cause?: unknown }).cause = b; // a cycle
    expect(classifyTransportError(b, 'awaiting_response').class).toBe('not_sent');
    // the Happy Eyeballs aggregate within the bounds
    const agg = new TypeError('fetch failed', { cause: new AggregateError([coded('ECONNREFUSED'), coded('ETIMEDOUT', { syscall: 'connect' })]) });
    expect(classifyTransportError(agg, 'awaiting_response').class).toBe('not_sent');
  });
});
