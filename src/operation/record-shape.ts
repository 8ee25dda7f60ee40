/**
 * A fast, allocation-free pre-check of the record schema for the hot path:
 * every store write and read validates a record, and the generic checks of
 * `RECORD_CHECK` (record.ts) cost about a microsecond per record (keyed loads and
 * calls through closures) where these plain checks cost a fifth of that.
 *
 * It only ever says "exactly a valid record" (every field of the schema, of
 * the right type and range, and no other key), in which case the schema would
 * return the same object; on `false`, the caller runs the schema, which
 * decides and words the error. So the schema stays the single definition of
 * validity: this can make validation faster, never looser
 * (test/unit/schema-oracle.test.ts checks both directions on generated
 * records).
 *
 * Node only: the SQLite and PostgreSQL stores install it (`installRecordPrecheck`);
 * the browser bundle does without it.
 *
 * @internal
 * @module
 */
import type { OperationRecord } from './record.js';
import { usePrecheck } from './record.js';

const STATES: ReadonlySet<unknown> = new Set(['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled']);
const CLASSES: ReadonlySet<unknown> = new Set(['success', 'not_sent', 'retryable', 'ambiguous', 'terminal', 'conflict']);
const EVIDENCE_KINDS: ReadonlySet<unknown> = new Set(['attempt', 'lookup', 'late_response', 'stale_write', 'takeover', 'cancel', 'stop']);
const FINGERPRINT = /^[0-9a-f]{64}$/;

type Obj = Record<string, unknown>;

/** A plain object (the kind JSON.parse and object literals make) with exactly `keys` own keys. */
function plain(v: unknown, keys: number): v is Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  let n = 0;
  for (const key in v) {
    if (!Object.prototype.hasOwnProperty.call(v, key)) return false;
    n++;
  }
  return n === keys;
}

const str = (v: unknown): v is string => typeof v === 'string';
const nonEmpty = (v: unknown): boolean => typeof v === 'string' && v.length > 0;
const int = (v: unknown): boolean => Number.isSafeInteger(v);
const nat = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;
const natOrNull = (v: unknown): boolean => v === null || nat(v);
const intOrNull = (v: unknown): boolean => v === null || int(v);
const strOrNull = (v: unknown): boolean => v === null || typeof v === 'string';

function attempt(v: unknown): boolean {
  return (
    plain(v, 9) &&
    nonEmpty(v['id']) &&
    Number.isSafeInteger(v['number']) &&
    (v['number'] as number) > 0 &&
    nat(v['generation']) &&
    str(v['owner']) &&
    nat(v['startedAt']) &&
    natOrNull(v['finishedAt']) &&
    (v['class'] === null || CLASSES.has(v['class'])) &&
    intOrNull(v['status']) &&
    strOrNull(v['reason'])
  );
}

function evidence(v: unknown): boolean {
  return (
    plain(v, 6) &&
    nat(v['at']) &&
    EVIDENCE_KINDS.has(v['kind']) &&
    nat(v['generation']) &&
    str(v['owner']) &&
    str(v['detail']) &&
    intOrNull(v['status'])
  );
}

function header(v: unknown): boolean {
  return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string';
}

function result(v: unknown): boolean {
  if (v === null) return true;
  return (
    plain(v, 7) &&
    (v['kind'] === 'response' || v['kind'] === 'value') &&
    (v['source'] === 'attempt' || v['source'] === 'lookup') &&
    int(v['status']) &&
    str(v['statusText']) &&
    Array.isArray(v['headers']) &&
    (v['headers'] as unknown[]).every(header) &&
    str(v['body']) &&
    typeof v['bodyTruncated'] === 'boolean'
  );
}

/** True only for exactly a valid record (see the module doc); false means "ask the schema". */
export function isExactRecord(v: unknown, schemaVersion: number): v is OperationRecord {
  if (!plain(v, 20)) return false;
  const request = v['request'];
  const lease = v['lease'];
  const error = v['error'];
  return (
    v['schemaVersion'] === schemaVersion &&
    nonEmpty(v['id']) &&
    str(v['tenant']) &&
    str(v['action']) &&
    str(v['ref']) &&
    nonEmpty(v['key']) &&
    (v['keySource'] === 'minted' || v['keySource'] === 'caller') &&
    typeof v['fingerprint'] === 'string' &&
    FINGERPRINT.test(v['fingerprint']) &&
    (request === null || (plain(request, 2) && str(request['method']) && str(request['url']))) &&
    STATES.has(v['state']) &&
    nat(v['generation']) &&
    (lease === null || (plain(lease, 2) && str(lease['owner']) && nat(lease['expiresAt']))) &&
    nat(v['createdAt']) &&
    nat(v['updatedAt']) &&
    nat(v['expiresAt']) &&
    Array.isArray(v['attempts']) &&
    (v['attempts'] as unknown[]).every(attempt) &&
    Array.isArray(v['evidence']) &&
    (v['evidence'] as unknown[]).every(evidence) &&
    result(v['result']) &&
    (error === null || (plain(error, 2) && str(error['code']) && str(error['message']))) &&
    natOrNull(v['cancelRequestedAt'])
  );
}

/**
 * Installs {@link isExactRecord} in front of the record schema (`usePrecheck`).
 * Called at load by the SQLite and PostgreSQL stores, so by every Node entry
 * (the Node defaults import the SQLite store); idempotent.
 */
export function installRecordPrecheck(): void {
  usePrecheck(isExactRecord);
}
