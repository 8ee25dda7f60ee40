/**
 * Options of the loopback provider and their validation.
 *
 * @module
 */

import { parseRandomFaults, type RandomFaultsOptions } from './provider-faults.js';
import { parseMisbehave, type MisbehaveOptions, type ResolvedMisbehave } from './provider-modes.js';

/**
 * Options of `startProvider()`.
 *
 * @example
 * ```ts
 * const provider = await startProvider({ requireKey: true, randomFaults: { seed: 7, rate: 0.3, kinds: [{ kind: 'drop_after_commit' }] } })
 * ```
 */
export interface ProviderOptions {
  /** TCP port on 127.0.0.1. @default 0 (any free port) */
  port?: number;
  /** Name of the idempotency key header, matched case-insensitively. @default 'Idempotency-Key' */
  keyHeader?: string;
  /** Answer 400 `idempotency-key-missing` to a `POST /orders` without a key. @default false */
  requireKey?: boolean;
  /** A provider that does not dedupe: every POST creates a new order. @default false */
  ignoreKeys?: boolean;
  /** Time spent "processing" (key in progress) before each commit. @default 0 */
  processingMs?: number;
  /** Compare payloads by raw bytes instead of by JSON meaning (sorted keys). @default false */
  rawBodyCompare?: boolean;
  /** Seeded random faults on top of the scripted ones. @default undefined (none) */
  randomFaults?: RandomFaultsOptions;
  /** Standing misbehaviours seen in real servers (see `MisbehaveOptions`). @default {} (none) */
  misbehave?: MisbehaveOptions;
}

/** {@link ProviderOptions} with defaults applied. */
export interface ResolvedOptions {
  port: number;
  /** Lower-case, for lookup in `req.headers`. */
  keyHeader: string;
  keyHeaderName: string;
  requireKey: boolean;
  ignoreKeys: boolean;
  processingMs: number;
  rawBodyCompare: boolean;
  randomFaults: RandomFaultsOptions | undefined;
  misbehave: ResolvedMisbehave;
}

/** Applies defaults; throws a `TypeError`/`RangeError` naming a bad option. */
export function resolveOptions(options: ProviderOptions): ResolvedOptions {
  const { port = 0, keyHeader = 'Idempotency-Key', processingMs = 0 } = options;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError('port must be an integer from 0 to 65535');
  if (typeof keyHeader !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(keyHeader)) {
    throw new TypeError('keyHeader must be a valid HTTP header name');
  }
  if (typeof processingMs !== 'number' || !Number.isFinite(processingMs) || processingMs < 0) {
    throw new RangeError('processingMs must be a finite number >= 0');
  }
  return {
    port,
    keyHeader: keyHeader.toLowerCase(),
    keyHeaderName: keyHeader,
    requireKey: options.requireKey === true,
    ignoreKeys: options.ignoreKeys === true,
    processingMs,
    rawBodyCompare: options.rawBodyCompare === true,
    randomFaults: options.randomFaults === undefined ? undefined : parseRandomFaults(options.randomFaults),
    misbehave: parseMisbehave(options.misbehave),
  };
}
