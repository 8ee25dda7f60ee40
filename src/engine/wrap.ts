/**
 * `client.wrap()`: `client.fetch` as another SDK's `fetch`, guarded against the SDK's own
 * retries. A Stainless-generated SDK (openai-node among them) retries a failed call by
 * itself and marks each retry `x-stainless-retry-count: N`. Without an Idempotency-Key
 * oncefetch cannot tie that retry to the call it repeats: sent, it would be a new operation
 * under a new key, a second effect whenever the first call took one. It is refused instead.
 *
 * @module
 */
import type { Engine } from './execute.js';
import { onceFetch } from './fetch-operation.js';
import type { OnceRequestInit } from './fetch-operation.js';

/** The fetch `client.wrap()` returns. */
export async function wrappedFetch(engine: Engine, input: string | URL | Request, init?: OnceRequestInit): Promise<Response> {
  const request = input instanceof Request ? input : undefined;
  const headers = new Headers(init?.headers ?? request?.headers);
  const count = headers.get('x-stainless-retry-count');
  if (count === null) return onceFetch(engine, input, init);
  const { keyHeader, onceMethods } = engine.opts;
  const once = init?.once;
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
  const isOnce = once !== false && (once !== undefined || headers.has(keyHeader) || onceMethods.has(method));
  const tied = headers.has(keyHeader) || (typeof once === 'object' && once.ref !== undefined);
  if (isOnce && !tied && Number(count) >= 1) {
    throw new TypeError(
      `client.wrap(): the SDK is retrying a ${method} on its own (x-stainless-retry-count: ${count}) without an ${keyHeader} header; ` +
        'oncefetch cannot tie it to the call it repeats, and would send it as a new operation under a new key (a second effect if that call took one). ' +
        `Not sent. Set the SDK's maxRetries: 0 (oncefetch retries with one key), or pass an ${keyHeader} header per call.`,
    );
  }
  const res = await onceFetch(engine, input, init);
  // oncefetch returns a non-2xx only as final (terminal, or settled); the SDK would resend a 409 or a 5xx
  // as a new operation, now refused: tell it not to, so its caller gets the response's own error.
  if (isOnce && !res.ok) res.headers.set('x-should-retry', 'false');
  return res;
}
