/**
 * Misbehaviour modes of the loopback provider: habits real servers have been
 * seen to have, each one a way an "idempotent" API can still let a retry
 * through or tell the client something untrue. Tests switch them on with
 * `startProvider({ misbehave: { … } })` or `provider.setMisbehave({ … })`.
 *
 * Faults (see `provider-faults.ts`) are one-shot events on the wire; these
 * modes are standing properties of the server.
 *
 * @module
 */

import type { FaultMatch, FaultTarget } from './provider-faults.js';

/**
 * Standing misbehaviours of the provider. All are off by default.
 *
 * @example
 * const provider = await startProvider({ misbehave: { cacheOnly2xx: true } });
 * provider.fault({ kind: 'error_after_commit' }); // the order is created, the key is released
 */
export interface MisbehaveOptions {
  /**
   * `provider.restart()` forgets every idempotency key, as a server that keeps
   * its key table in memory does. Orders (the business database) survive.
   * Without this mode a restart keeps completed keys.
   *
   * @default false
   */
  forgetKeysOnRestart?: boolean;
  /**
   * Only 2xx responses are stored under a key: when a request that committed
   * is answered with a 5xx (an `error_after_commit` fault), the key is
   * released, so the next request with that key executes again.
   *
   * @default false
   */
  cacheOnly2xx?: boolean;
  /**
   * Answer `409` "request in progress" forever to the matching requests
   * (`true`: every request), without ever processing them.
   *
   * @default undefined (never)
   */
  conflictForever?: FaultMatch | true;
  /**
   * Replays of a completed key answer with this status instead of the stored
   * one (the stored body is kept), e.g. `200` for a stored `201`, or a `500`.
   *
   * @default undefined (replay the stored status)
   */
  replayWithDifferentStatus?: number;
}

/** {@link MisbehaveOptions} validated, with defaults applied. */
export interface ResolvedMisbehave {
  forgetKeysOnRestart: boolean;
  cacheOnly2xx: boolean;
  conflictForever: FaultMatch | true | undefined;
  replayWithDifferentStatus: number | undefined;
}

const KNOWN = new Set(['forgetKeysOnRestart', 'cacheOnly2xx', 'conflictForever', 'replayWithDifferentStatus']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalBoolean(value: unknown, path: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new TypeError(`${path} must be a boolean`);
  return value;
}

function parseConflictForever(value: unknown, path: string): FaultMatch | true | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return true;
  if (!isRecord(value)) throw new TypeError(`${path} must be true or an object { ref?, key? }`);
  const match: FaultMatch = {};
  for (const field of ['ref', 'key'] as const) {
    const v = value[field];
    if (v === undefined) continue;
    if (typeof v !== 'string') throw new TypeError(`${path}.${field} must be a string`);
    match[field] = v;
  }
  return match;
}

/**
 * Validates untrusted {@link MisbehaveOptions}; throws a `TypeError`/`RangeError`
 * naming the bad field.
 */
export function parseMisbehave(value: unknown, path = 'misbehave'): ResolvedMisbehave {
  if (value === undefined) value = {};
  if (!isRecord(value)) throw new TypeError(`${path} must be an object`);
  for (const name of Object.keys(value)) {
    if (!KNOWN.has(name)) throw new TypeError(`${path}.${name} is not a misbehaviour (one of ${[...KNOWN].join(', ')})`);
  }
  const status = value['replayWithDifferentStatus'];
  if (status !== undefined && (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599)) {
    throw new RangeError(`${path}.replayWithDifferentStatus must be an integer HTTP status from 200 to 599`);
  }
  return {
    forgetKeysOnRestart: optionalBoolean(value['forgetKeysOnRestart'], `${path}.forgetKeysOnRestart`),
    cacheOnly2xx: optionalBoolean(value['cacheOnly2xx'], `${path}.cacheOnly2xx`),
    conflictForever: parseConflictForever(value['conflictForever'], `${path}.conflictForever`),
    replayWithDifferentStatus: status as number | undefined,
  };
}

/** Whether a request is one that {@link MisbehaveOptions.conflictForever} answers with 409. */
export function conflictsForever(modes: ResolvedMisbehave, target: FaultTarget): boolean {
  const match = modes.conflictForever;
  if (match === undefined) return false;
  if (match === true) return true;
  if (match.ref !== undefined && match.ref !== target.ref) return false;
  if (match.key !== undefined && match.key !== target.key) return false;
  return true;
}
