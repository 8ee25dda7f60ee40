/**
 * `oncefetch/testing`: the tools oncefetch proves itself with, for your own
 * agents and stores.
 *
 * - {@link startProvider}: a fault-injecting loopback "orders" API that honours
 *   `Idempotency-Key` (IETF draft), counts **business effects**, serves lookups
 *   (`GET /orders?ref=…`, `?key=…`) and takes scripted or seeded random faults
 *   around its commit point, in process or over `/__control/*`.
 * - {@link describeStoreContract}: the contract suite every store passes, to run
 *   against a custom {@link OnceStore} from a vitest test file.
 *
 * This entry imports `vitest` (an optional peer dependency): install it as a dev
 * dependency to use it. Without vitest (jest, `node:test`, a script), import
 * the provider alone from `oncefetch/testing/provider`.
 *
 * @example
 * ```ts
 * import { createClient, memoryStore } from 'oncefetch'
 * import { startProvider } from 'oncefetch/testing'
 *
 * const provider = await startProvider()
 * provider.fault({ kind: 'drop_after_commit' }) // the order is created, the response is lost
 * const client = createClient({ store: memoryStore(), providerDedupes: true })
 * await client.fetch(`${provider.url}/orders`, {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify({ ref: 'A-17', sku: 'book' }),
 *   once: { action: 'create-order', ref: 'A-17' },
 * })
 * console.log(provider.effectsFor('A-17')) // 1
 * await provider.close()
 * ```
 *
 * @module
 */
import type { OnceStore } from '../stores/contract.js';

export { startProvider, FAULT_KINDS } from './provider.js';
export type {
  Fault,
  FaultKind,
  FaultMatch,
  MisbehaveOptions,
  Order,
  Provider,
  ProviderOptions,
  ProviderRequest,
  ProviderState,
  RandomFaultsOptions,
} from './provider.js';
export { describeStoreContract } from './store-contract.js';
export type { StoreContractFactory, StoreContractSubject } from './store-contract.js';
export type { OnceStore };
