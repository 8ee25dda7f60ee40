/**
 * Cloudflare Workers (workerd) binds every AbortController to the request that created it: reading
 * `signal.aborted` from another request's handler throws "Cannot perform I/O on behalf of a different
 * request". A client created in one request (cached at module scope with `client ??= createClient()`,
 * as on Node) then failed every call of the next request with that bare runtime error, which said
 * neither what to do nor whether anything was sent. Measured in workerd 2026-04-26 (Miniflare 4):
 * request 1 placed its order, request 2 threw it from `acquire`, 0 POSTs. Emulated here: an
 * AbortController whose signal throws that error outside the "request" it was made in.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/browser.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';

const RealAbortController = globalThis.AbortController;
/** the request being handled, as workerd's I/O context */
let request = 'A';

/** An AbortController bound to the request that made it, as workerd's. */
class BoundAbortController extends RealAbortController {
  constructor() {
    super();
    const madeIn = request;
    const signal = super.signal;
    const check = (): void => {
      if (request !== madeIn) {
        throw new Error(
          'Cannot perform I/O on behalf of a different request. I/O objects (such as streams, request/response bodies, and others) created in the context of one request handler cannot be accessed from a different request\'s handler. (I/O type: RefcountedCanceler)',
        );
      }
    };
    const aborted = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;
    Object.defineProperty(signal, 'aborted', { get: () => (check(), aborted.call(signal)) });
    const throwIfAborted = signal.throwIfAborted.bind(signal);
    Object.defineProperty(signal, 'throwIfAborted', { value: () => (check(), throwIfAborted()) });
  }
}

let provider: Provider | undefined;
afterEach(async () => {
  vi.unstubAllGlobals();
  request = 'A';
  await provider?.close();
  provider = undefined;
});

describe('a client created while handling another request (Cloudflare Workers)', () => {
  it('is refused with an error that says to create the client per request and that nothing was sent', async () => {
    provider = await startProvider();
    vi.stubGlobal('AbortController', BoundAbortController);
    const store = memoryStore();
    const post = (ref: string): Promise<Response> =>
      client.fetch(`${provider!.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ref }),
        once: { action: 'create-order', ref },
      });
    request = 'A';
    const client = createClient({ tenant: 't1', store, settleMs: 0 });
    expect((await post('a-1')).status).toBe(201);

    request = 'B';
    const error = await post('b-1').then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/client\.fetch: this client was created while handling another request/);
    expect((error as Error).message).toMatch(/create the client inside the handler, one per request/);
    expect((error as Error).message).toMatch(/nothing was recorded or sent/);
    expect((error as Error).cause).toBeInstanceOf(Error);
    expect(provider.effectsFor('a-1')).toBe(1);
    expect(provider.requests.filter((r) => r.ref === 'b-1')).toHaveLength(0);
    expect(await store.get(JSON.stringify(['t1', 'create-order', 'b-1']))).toBeUndefined();

    // the same client is still usable from the request that made it
    request = 'A';
    expect((await post('a-2')).status).toBe(201);
    expect(provider.effects).toBe(2);
    await client.close();
  });
});
