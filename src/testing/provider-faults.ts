/**
 * Scriptable faults for the loopback provider: their types, runtime validation
 * (faults also arrive as JSON over the control endpoint) and the queue that
 * hands the next matching fault to each `POST /orders`.
 *
 * @module
 */

/**
 * Restricts a fault to the requests carrying this `ref` and/or this key, so
 * that one operation is hurt while concurrent ones go through.
 *
 * @example
 * ```ts
 * const match: FaultMatch = { ref: 'A-17' }
 * provider.fault({ kind: 'reset_before_commit', match })
 * ```
 */
export interface FaultMatch {
  /** Only requests whose JSON body has this `ref`. */
  ref?: string;
  /** Only requests carrying this idempotency key (after RFC 8941 unquoting). */
  key?: string;
}

/**
 * One injected failure, consumed by the next matching `POST /orders`.
 *
 * "before commit" kinds never create an order and never record the key;
 * "after commit" kinds act on the response of whatever the request produced
 * (a fresh order, a replay, a 409/422), so a replay can be lost too.
 *
 * @example
 * provider.fault({ kind: 'drop_after_commit', match: { ref: 'A-17' } });
 */
export type Fault = (
  | { kind: 'reset_before_commit' }
  | { kind: 'status_before_commit'; status: number; retryAfter?: string; headers?: Record<string, string> }
  | { kind: 'drop_after_commit' }
  | { kind: 'delay_after_commit'; delayMs: number }
  | { kind: 'error_after_commit'; status?: number }
  | { kind: 'truncate_after_commit' }
  | { kind: 'delay_before_commit'; delayMs: number }
) & { match?: FaultMatch };

/**
 * The discriminant of {@link Fault}; also the key of
 * {@link Provider.faultsInjected}.
 *
 * @example
 * ```ts
 * const kind: FaultKind = 'drop_after_commit'
 * expect(provider.faultsInjected[kind]).toBe(1)
 * ```
 */
export type FaultKind = Fault['kind'];

const KIND_SET: Record<FaultKind, true> = {
  reset_before_commit: true,
  status_before_commit: true,
  drop_after_commit: true,
  delay_after_commit: true,
  error_after_commit: true,
  truncate_after_commit: true,
  delay_before_commit: true,
};

/**
 * Every fault kind, in a stable order.
 *
 * @example
 * ```ts
 * for (const kind of FAULT_KINDS) console.log(kind) // reset_before_commit, status_before_commit, …
 * ```
 */
export const FAULT_KINDS: readonly FaultKind[] = Object.freeze(Object.keys(KIND_SET) as FaultKind[]);

/**
 * Seeded random fault injection: each `POST /orders` gets a fault with
 * probability `rate`. Log the seed of a failing run to replay it exactly.
 *
 * @example
 * ```ts
 * const randomFaults: RandomFaultsOptions = { seed: 42, rate: 0.3, kinds: [{ kind: 'drop_after_commit' }, { kind: 'reset_before_commit' }] }
 * const provider = await startProvider({ randomFaults })
 * ```
 */
export interface RandomFaultsOptions {
  /** PRNG seed (mulberry32); the same seed gives the same fault sequence. */
  seed: number;
  /** Probability in [0, 1] that a request gets a fault. */
  rate: number;
  /** Faults to pick from, uniformly. Their `match`, if any, is honoured. */
  kinds: Fault[];
}

/** The request attributes a {@link FaultMatch} is checked against. */
export interface FaultTarget {
  ref: string | undefined;
  key: string | undefined;
}

/** A fresh zeroed counter per fault kind. */
export function zeroFaultCounts(): Record<FaultKind, number> {
  const counts = {} as Record<FaultKind, number>;
  for (const kind of FAULT_KINDS) counts[kind] = 0;
  return counts;
}

/** mulberry32: a tiny deterministic PRNG returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Whether `fault` applies to a request with these attributes. */
export function faultMatches(fault: Fault, target: FaultTarget): boolean {
  const match = fault.match;
  if (match === undefined) return true;
  if (match.ref !== undefined && match.ref !== target.ref) return false;
  if (match.key !== undefined && match.key !== target.key) return false;
  return true;
}

/**
 * The provider's fault source: a FIFO of scripted faults, then the seeded random
 * faults. Two random numbers are drawn for every request, faulted or not, so the
 * random sequence depends only on how many requests arrived.
 */
export class FaultQueue {
  #queue: Fault[] = [];
  #random: (() => number) | undefined;
  readonly #options: RandomFaultsOptions | undefined;

  constructor(randomFaults: RandomFaultsOptions | undefined) {
    this.#options = randomFaults;
    this.#random = randomFaults === undefined ? undefined : mulberry32(randomFaults.seed);
  }

  /** Faults still waiting for a matching request. */
  get pending(): number {
    return this.#queue.length;
  }

  enqueue(faults: readonly Fault[]): void {
    this.#queue.push(...faults);
  }

  /** Removes and returns the fault for this request, if any. */
  take(target: FaultTarget): Fault | undefined {
    const roll = this.#random?.();
    const pick = this.#random?.();
    const index = this.#queue.findIndex((fault) => faultMatches(fault, target));
    if (index >= 0) return this.#queue.splice(index, 1)[0];
    const options = this.#options;
    if (options === undefined || roll === undefined || pick === undefined || roll >= options.rate) return undefined;
    const fault = options.kinds[Math.floor(pick * options.kinds.length)];
    return fault !== undefined && faultMatches(fault, target) ? fault : undefined;
  }

  /** Drops scripted faults and restarts the random sequence from its seed. */
  clear(): void {
    this.#queue = [];
    this.#random = this.#options === undefined ? undefined : mulberry32(this.#options.seed);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown, path: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new TypeError(`${path} must be a string`);
  return value;
}

function status(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 200 || value > 599) {
    throw new RangeError(`${path} must be an integer HTTP status from 200 to 599`);
  }
  return value;
}

function delayMs(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${path} must be a finite number of milliseconds >= 0`);
  }
  return value;
}

function parseMatch(value: unknown, path: string): FaultMatch | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) throw new TypeError(`${path} must be an object { ref?, key? }`);
  const match: FaultMatch = {};
  const ref = optionalString(value['ref'], `${path}.ref`);
  const key = optionalString(value['key'], `${path}.key`);
  if (ref !== undefined) match.ref = ref;
  if (key !== undefined) match.key = key;
  return match;
}

function parseHeaders(value: unknown, path: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (!isRecord(value)) throw new TypeError(`${path} must be an object of string values`);
  const headers: Record<string, string> = {};
  for (const [name, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new TypeError(`${path}.${name} must be a string`);
    headers[name] = v;
  }
  return headers;
}

/**
 * Validates an untrusted value (user code or control-endpoint JSON) and returns a
 * fresh copy, so later mutation by the caller cannot change a queued fault.
 * Throws a `TypeError`/`RangeError` naming the bad field.
 */
export function parseFault(value: unknown, path = 'fault'): Fault {
  if (!isRecord(value)) throw new TypeError(`${path} must be an object with a "kind"`);
  const match = parseMatch(value['match'], `${path}.match`);
  const base = match === undefined ? {} : { match };
  const kind = value['kind'];
  switch (kind) {
    case 'reset_before_commit':
    case 'drop_after_commit':
    case 'truncate_after_commit':
      return { kind, ...base };
    case 'delay_after_commit':
    case 'delay_before_commit':
      return { kind, delayMs: delayMs(value['delayMs'], `${path}.delayMs`), ...base };
    case 'error_after_commit': {
      const s = value['status'] === undefined ? undefined : status(value['status'], `${path}.status`);
      return s === undefined ? { kind, ...base } : { kind, status: s, ...base };
    }
    case 'status_before_commit': {
      const fault: Fault = { kind, status: status(value['status'], `${path}.status`), ...base };
      const retryAfter = optionalString(value['retryAfter'], `${path}.retryAfter`);
      const headers = parseHeaders(value['headers'], `${path}.headers`);
      if (retryAfter !== undefined) fault.retryAfter = retryAfter;
      if (headers !== undefined) fault.headers = headers;
      return fault;
    }
    default:
      throw new TypeError(`${path}.kind must be one of ${FAULT_KINDS.join(', ')}`);
  }
}

/** Validates {@link RandomFaultsOptions}; throws naming `randomFaults.<field>`. */
export function parseRandomFaults(value: RandomFaultsOptions): RandomFaultsOptions {
  if (!isRecord(value)) throw new TypeError('randomFaults must be an object { seed, rate, kinds }');
  const { seed, rate, kinds } = value;
  if (typeof seed !== 'number' || !Number.isInteger(seed)) throw new TypeError('randomFaults.seed must be an integer');
  if (typeof rate !== 'number' || !(rate >= 0 && rate <= 1)) throw new RangeError('randomFaults.rate must be a number from 0 to 1');
  if (!Array.isArray(kinds) || kinds.length === 0) throw new TypeError('randomFaults.kinds must be a non-empty array of faults');
  return { seed, rate, kinds: kinds.map((f, i) => parseFault(f, `randomFaults.kinds[${i}]`)) };
}
