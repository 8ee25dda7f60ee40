/**
 * oncefetch in browsers (and web workers): the package's `browser` export.
 * `createClient()` defaults to the IndexedDB store shared by every tab of the
 * origin and to the page's `fetch`, and runs each operation under a Web Lock
 * so that two tabs with one scope make one send. It imports neither
 * better-sqlite3, undici nor any `node:` module.
 *
 * Needs a secure context (https, or http on localhost) for WebCrypto,
 * `crypto.randomUUID()` and Web Locks.
 *
 * @example
 * ```ts
 * import { createClient } from 'oncefetch' // resolved here by bundlers targeting browsers
 * const client = createClient({ tenant: 't1' })
 * const res = await client.fetch('/api/orders', {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify(order),
 *   once: { action: 'create-order', ref: order.ref, lookup: findOrderByRef },
 * })
 * ```
 *
 * @module
 */
import type { OnceClient, PlatformDefaults } from './client.js';
import { createClientWith } from './client.js';
import type { OnceClientOptions } from './options.js';
import { wrapOptions } from './options.js';
import { indexedDbStore } from './stores/indexeddb.js';
import { webLocks } from './web-locks.js';

/**
 * Calls `fetch` as a plain function. `window.fetch` throws "Illegal invocation"
 * when called as a method of another object, which is how the engine holds it.
 */
function unbound(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
  return (input, init) => fetch(input, init);
}

const browserDefaults: PlatformDefaults = {
  store: () => indexedDbStore(),
  fetch: () => unbound(globalThis.fetch),
  cli: false,
};

/**
 * Resolves a relative URL against the document (or worker) location, as
 * `fetch` does; the engine fingerprints absolute URLs only.
 */
function absolute(input: string | URL | Request): string | URL | Request {
  if (typeof input !== 'string') return input;
  const doc = (globalThis as { document?: { baseURI?: string } }).document;
  const base = doc?.baseURI ?? (globalThis as { location?: { href?: string } }).location?.href;
  return base === undefined ? input : new URL(input, base).href;
}

/**
 * Creates a once-only client. In browsers the store defaults to IndexedDB
 * (database `oncefetch`, shared by the origin's tabs) and the transport to the
 * page's `fetch`; with `navigator.locks`, calls of one scope from several tabs
 * take turns under a Web Lock. Relative URLs resolve against the page, as with
 * `fetch`.
 *
 * @throws TypeError or RangeError naming a bad option.
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1', leaseMs: 5_000 })
 * ```
 */
export function createClient(options: OnceClientOptions = {}): OnceClient {
  return browserClient(options, 'createClient');
}

function browserClient(options: OnceClientOptions, where: string): OnceClient {
  // (null reaches createClientWith, which names it)
  const fetch = options?.fetch;
  const resolved = typeof fetch === 'function' ? { ...options, fetch: unbound(fetch) } : options;
  const client = createClientWith(resolved, { ...browserDefaults, exclusive: webLocks() }, where);
  const wrapped = client.wrap();
  return {
    ...client,
    // async: a URL that cannot be resolved rejects, as from fetch, instead of throwing
    fetch: async (input, init) => client.fetch(absolute(input), init),
    wrap: () => (async (input: string | URL | Request, init?: RequestInit) => wrapped(absolute(input), init)) as typeof globalThis.fetch,
  };
}

/**
 * A plain `fetch` with the once-only guarantee, for SDKs that take a `fetch`
 * option. Same options as {@link createClient}. Its client has no `close()`: a `store` given to it
 * stays open, also after the `close()` of the other clients that share it; close it yourself.
 *
 * @example
 * ```ts
 * const sdk = new PaymentsSdk({ fetch: wrapFetch(globalThis.fetch, { tenant: 't1' }) })
 * ```
 */
export function wrapFetch(fetch: typeof globalThis.fetch, options: Omit<OnceClientOptions, 'fetch'> = {}): ReturnType<OnceClient['wrap']> {
  return browserClient(wrapOptions(fetch, options), 'wrapFetch').wrap();
}

// Everything else is the same in every entry.
export * from './public.js';
