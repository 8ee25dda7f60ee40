/**
 * Since 12efd68 a transport error with no code nor known signal is described by its message, which is
 * stored as the attempt's reason. Some fetches put the request URL in that message: node-fetch's
 * FetchError ('network timeout at: <url>', 'maximum redirect reached at: <url>', no code), Deno's
 * TypeError ('error sending request for url (<url>): …'). The README says query strings are never
 * stored (the record's request URL keeps '?…' only): a reason must not carry one either.
 */
import { describe, expect, it } from 'vitest';
import { classifyError } from '../../src/classify/classify.js';

class FetchError extends Error {
  override name = 'FetchError';
  type = 'request-timeout';
}

describe("an error message's URL in an attempt's reason", () => {
  it.each([
    ['node-fetch', new FetchError('network timeout at: https://api.example.com/orders?token=s3cr3t&x=1')],
    ['deno', new TypeError('error sending request for url (https://api.example.com/orders?token=s3cr3t#frag): client error (Connect)')],
    ['userinfo', new TypeError('failed: https://user:pa55@api.example.com/orders')],
  ])('%s: no query string, fragment nor credentials', (_, error) => {
    const { reason } = classifyError(error, 'awaiting_response');
    expect(reason).not.toMatch(/s3cr3t|frag|pa55/);
    expect(reason).toContain('api.example.com/orders');
  });

  it('a message without a URL is kept as it was', () => {
    expect(classifyError(new TypeError('Failed to fetch'), 'awaiting_response').reason).toBe('unknown error: TypeError: Failed to fetch');
  });
});
