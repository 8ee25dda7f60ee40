/**
 * One chaos call: `client.fetch(POST /orders)` for a ref, and the rule that
 * turns how it ended into `ok`, `fail` or `indeterminate` (see `history.ts`).
 *
 * @module
 */
import { REPLAYED_HEADER, isOnceError } from '../src/index.js';
import type { OnceClient, OperationRecord } from '../src/index.js';
import type { Claim, ObservedState, OutcomeEntry } from './history.js';
import { reliesOnDedupe } from './plan.js';

/** The body of every call for a ref: the same bytes everywhere, so one fingerprint per ref. */
export function orderBody(ref: string): string {
  return JSON.stringify({ ref, sku: 'chaos-17', qty: 1 });
}

/** The order id in a provider response body (an order, fresh, replayed or looked up). */
export function orderIdOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { id?: unknown };
    return typeof parsed.id === 'string' ? parsed.id : null;
  } catch {
    return null;
  }
}

function mayHaveLanded(a: OperationRecord['attempts'][number]): boolean {
  // 409 "in progress": an earlier request with this key is still being processed.
  return a.finishedAt === null || !(a.class === 'not_sent' || (a.class === 'retryable' && a.status !== 409));
}

/**
 * What a record claims about its ref's effect (see {@link Claim}). `pending` claims "none" when
 * the last attempt that may have been delivered was followed by an "absent" lookup from an owner
 * that trusts "absent" only after `settleMs`; after one that trusts it at once (`providerDedupes`),
 * the record only says a same-key resend is safe.
 */
export function claimOf(record: OperationRecord | undefined): Claim {
  if (record === undefined) return 'none';
  switch (record.state) {
    case 'succeeded':
      return 'one';
    case 'failed':
    case 'cancelled':
      return 'none';
    case 'in_flight':
    case 'ambiguous':
      return 'unsettled';
    case 'pending':
      break;
  }
  const risky = record.attempts.filter(mayHaveLanded).at(-1);
  if (risky === undefined) return 'none';
  const absent = record.evidence.find((e) => e.kind === 'lookup' && e.detail.startsWith('absent:') && e.generation > risky.generation);
  if (absent === undefined) return 'resend';
  return reliesOnDedupe(absent.owner) ? 'resend' : 'none';
}

/** Who is calling, for the history. */
export interface Caller {
  op: number;
  worker: string;
  incarnation: number;
  ref: string;
}

/** Reads the record after a call that did not return a 2xx, and classifies the call. */
async function unsuccessful(client: OnceClient, action: string, caller: Caller, code: string): Promise<OutcomeEntry> {
  const checkedAt = Date.now();
  let record: OperationRecord | undefined;
  let state: ObservedState;
  try {
    record = await client.get({ action, ref: caller.ref });
    state = record?.state ?? 'absent';
  } catch {
    return { type: 'indeterminate', ...caller, at: Date.now(), code, state: 'unreadable' };
  }
  if (claimOf(record) === 'none') return { type: 'fail', ...caller, at: Date.now(), code, state, checkedAt };
  return { type: 'indeterminate', ...caller, at: Date.now(), code, state };
}

/** The reason a caller that gives up aborts its call with (see the worker); its outcome's code. */
export const GAVE_UP = 'GAVE_UP';

/** Places the order of `caller.ref` once through `client`; never throws. `signal`: the caller's, aborted with reason {@link GAVE_UP}. */
export async function placeOrder(client: OnceClient, url: string, action: string, caller: Caller, signal?: AbortSignal): Promise<OutcomeEntry> {
  let code: string;
  try {
    const res = await client.fetch(`${url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: orderBody(caller.ref),
      once: { action, ref: caller.ref },
      ...(signal === undefined ? {} : { signal }),
    });
    const body = await res.text();
    if (res.ok) {
      return { type: 'ok', ...caller, at: Date.now(), status: res.status, orderId: orderIdOf(body), replayed: res.headers.has(REPLAYED_HEADER) };
    }
    code = `HTTP_${res.status}`;
  } catch (error) {
    code = isOnceError(error) ? error.code : signal?.aborted === true && error === signal.reason ? GAVE_UP : 'UNEXPECTED';
  }
  return unsuccessful(client, action, caller, code);
}
