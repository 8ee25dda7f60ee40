/**
 * oncefetch — one logical request, at most one business effect.
 *
 * The Node entry: `createClient()` defaults to the embedded SQLite store and
 * a fetch-compatible transport on undici's `request` (no fetch layer; it asks for no
 * compression, and a request that sets `accept-encoding` goes through undici's fetch).
 *
 * @example
 * ```ts
 * import { createClient } from 'oncefetch'
 * const client = createClient({ tenant: 't1' })
 * const res = await client.fetch('https://api.example.com/orders', {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify(order),
 *   once: { action: 'create-order', ref: task.id, lookup: findOrderByRef },
 * })
 * ```
 *
 * @module
 */
import type { OnceClient } from './client.js';
import { createClientWith } from './client.js';
import { nodeDefaults } from './node-defaults.js';
import type { OnceClientOptions } from './options.js';
import { wrapOptions } from './options.js';

/**
 * Creates a once-only client. On Node the store defaults to SQLite at
 * `./.oncefetch/oncefetch.db` (or `$ONCEFETCH_DB`) and the transport to a
 * fetch-compatible one on undici's `request`.
 *
 * @throws TypeError or RangeError naming a bad option.
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1', store: memoryStore() })
 * ```
 */
export function createClient(options: OnceClientOptions = {}): OnceClient {
  return createClientWith(options, nodeDefaults);
}

/**
 * A plain `fetch` with the once-only guarantee, for SDKs that take a `fetch`
 * option. Same options as {@link createClient}. Its client has no `close()`: a `store` given to it
 * stays open, also after the `close()` of the other clients that share it; close it yourself.
 *
 * @example
 * ```ts
 * const openai = new OpenAI({ fetch: wrapFetch(globalThis.fetch, { tenant: 't1' }), maxRetries: 0 })
 * ```
 */
export function wrapFetch(fetch: typeof globalThis.fetch, options: Omit<OnceClientOptions, 'fetch'> = {}): ReturnType<OnceClient['wrap']> {
  return createClientWith(wrapOptions(fetch, options), nodeDefaults, 'wrapFetch').wrap();
}

// Everything else is the same in every entry.
export * from './public.js';
