/**
 * Typed events emitted through the `onEvent` option (DESIGN §9), and the
 * counters behind `client.stats()`.
 *
 * @module
 */
import type { OutcomeClass } from './classify/classify.js';
import type { OperationState, Scope } from './operation/record.js';

/** Every event names the operation it is about; never its key (but a ref minted, or adopted from a key header, is the key). */
interface EventBase {
  scope: Scope;
  /** epoch ms */
  at: number;
}

/**
 * What oncefetch did, step by step. Discriminated by `type`.
 *
 * @example
 * ```ts
 * createClient({ onEvent: (e) => { if (e.type === 'retry_scheduled') log(e.delayMs, e.source) } })
 * ```
 */
export type OnceEvent =
  | (EventBase & { type: 'operation_created' })
  | (EventBase & { type: 'operation_resumed'; state: OperationState })
  | (EventBase & { type: 'attempt_started'; attempt: number })
  | (EventBase & { type: 'attempt_finished'; attempt: number; class: OutcomeClass; status: number | null; reason: string })
  | (EventBase & { type: 'retry_scheduled'; attempt: number; delayMs: number; source: 'retry-after' | 'backoff' })
  | (EventBase & { type: 'lookup'; outcome: 'found' | 'absent' | 'unknown' | 'none' })
  | (EventBase & { type: 'replay'; state: OperationState })
  | (EventBase & { type: 'conflict'; reason: string })
  | (EventBase & { type: 'waiting'; owner: string })
  | (EventBase & { type: 'takeover'; previousOwner: string | null; previousState: OperationState })
  | (EventBase & { type: 'late_evidence'; detail: string })
  | (EventBase & { type: 'stopped'; code: string; message: string });

/**
 * The type names of {@link OnceEvent}, e.g. to key a metrics counter.
 *
 * @example
 * ```ts
 * const counts: Partial<Record<OnceEventType, number>> = {}
 * createClient({ onEvent: (e) => { counts[e.type] = (counts[e.type] ?? 0) + 1 } })
 * ```
 */
export type OnceEventType = OnceEvent['type'];

/**
 * Counters of one client since it was created (`client.stats()`).
 *
 * @example
 * ```ts
 * const { replays, conflicts, ambiguous, lookups, attemptsPerOperation } = client.stats()
 * ```
 */
export interface OnceStats {
  /** operations this client created in the store */
  operationsCreated: number;
  /** transport attempts sent */
  attempts: number;
  /** calls answered from a stored result without touching the network, or by joining a concurrent identical call of this client */
  replays: number;
  /** local or provider-reported conflicts */
  conflicts: number;
  /** attempts whose outcome was ambiguous, and those whose key conflict answered a resend (recorded `conflict`, the record left ambiguous: counted in `conflicts` too once a settled "absent" lets it stand) */
  ambiguous: number;
  /** lookups run (reconciliations) */
  lookups: number;
  /**
   * retries scheduled (one per `retry_scheduled` event), counted when the wait before the next step
   * begins, so one counted here may send nothing: after an ambiguous outcome that step reconciles
   * first, and a lookup's "found" settles the operation without a resend (an abort or the client's
   * close may also end the wait). `attempts` counts what was sent.
   */
  retries: number;
  /** leases taken over from another owner */
  takeovers: number;
  /** calls that ran an operation's attempt loop (replays and joined calls excluded) */
  operationsExecuted: number;
  /** `attempts / operationsExecuted`: transport attempts an executed operation needed on average; 0 before any */
  attemptsPerOperation: number;
}

/** A fresh zeroed {@link OnceStats}. */
export function emptyStats(): OnceStats {
  return {
    operationsCreated: 0,
    attempts: 0,
    replays: 0,
    conflicts: 0,
    ambiguous: 0,
    lookups: 0,
    retries: 0,
    takeovers: 0,
    operationsExecuted: 0,
    attemptsPerOperation: 0,
  };
}
