/**
 * The chaos run's checker: a pure function from a history and the providers'
 * effect logs to the rules they break. Rules are per ref, since refs are shared
 * by every process and one ref is one business intent:
 *
 * 1. effects ≤ 1 (`duplicate_effect`; duplicates = Σ max(0, effects − 1));
 * 2. every `ok` names the ref's one order (`ok_without_effect`, `ok_wrong_order`);
 * 3. a `fail` had no effect behind it: none existed at its `checkedAt`, and a ref whose calls
 *    all failed has none (`fail_with_effect`);
 * 4. every reading of the final recovery agrees with the provider: claim `one` ↔ exactly one
 *    effect, already there, with the stored order id; claim `none` ↔ no effect until the next
 *    call (`reconciled_wrong`); and a ref with an `indeterminate` call ends settled, `one` or
 *    `none` (`unreconciled`);
 * 5. every invoke has exactly one outcome, every outcome an invoke (`missing_outcome`,
 *    `orphan_outcome`);
 * 6. every request the providers saw for a ref carried the same key (`key_reminted`).
 *
 * @module
 */
import type { CheckInput, CheckResult, EffectEntry, HistoryEntry, InvokeEntry, OutcomeEntry, ReconciledEntry, Violation } from './history.js';

interface RefView {
  invokes: InvokeEntry[];
  outcomes: OutcomeEntry[];
  reconciled: ReconciledEntry[];
  effects: EffectEntry[];
}

function byRef(input: CheckInput): Map<string, RefView> {
  const refs = new Map<string, RefView>();
  const view = (ref: string): RefView => {
    let v = refs.get(ref);
    if (v === undefined) {
      v = { invokes: [], outcomes: [], reconciled: [], effects: [] };
      refs.set(ref, v);
    }
    return v;
  };
  for (const e of input.history) {
    if (e.type === 'invoke') view(e.ref).invokes.push(e);
    else if (e.type === 'reconciled') view(e.ref).reconciled.push(e);
    else view(e.ref).outcomes.push(e);
  }
  for (const e of input.effects) if (e.ref !== undefined) view(e.ref).effects.push(e);
  return refs;
}

function callKey(e: { worker: string; incarnation: number; op: number }): string {
  return `${e.worker}#${e.incarnation}#${e.op}`;
}

function checkPairs(ref: string, v: RefView, out: Violation[]): void {
  const outcomes = new Map<string, number>();
  for (const o of v.outcomes) outcomes.set(callKey(o), (outcomes.get(callKey(o)) ?? 0) + 1);
  const invoked = new Set(v.invokes.map(callKey));
  for (const i of v.invokes) {
    const n = outcomes.get(callKey(i)) ?? 0;
    if (n !== 1) out.push({ kind: 'missing_outcome', ref, op: i.op, detail: `call ${callKey(i)} has ${n} outcomes, expected 1` });
  }
  for (const o of v.outcomes) {
    if (!invoked.has(callKey(o))) out.push({ kind: 'orphan_outcome', ref, op: o.op, detail: `outcome ${o.type} of ${callKey(o)} has no invoke` });
  }
}

function checkOutcomes(ref: string, v: RefView, out: Violation[]): void {
  const order = v.effects[0];
  const anyOk = v.outcomes.some((o) => o.type === 'ok');
  // With an indeterminate call the effect may be that call's: rule 4 (the reconciled truth) decides.
  const anyIndeterminate = v.outcomes.some((o) => o.type === 'indeterminate');
  for (const o of v.outcomes) {
    if (o.type === 'ok') {
      if (order === undefined) out.push({ kind: 'ok_without_effect', ref, op: o.op, detail: `${o.worker} got ${o.orderId ?? 'no order id'} but the provider has no effect for ${ref}` });
      else if (o.orderId !== order.id || v.effects.length !== 1) {
        out.push({ kind: 'ok_wrong_order', ref, op: o.op, detail: `${o.worker} got ${o.orderId ?? 'no order id'}; the provider has ${v.effects.map((e) => e.id).join(', ')}` });
      }
    } else if (o.type === 'fail') {
      const before = v.effects.find((e) => e.createdAt < o.checkedAt);
      if (before !== undefined) {
        out.push({ kind: 'fail_with_effect', ref, op: o.op, detail: `${o.worker} failed (${o.code}, record ${o.state}) at ${o.checkedAt}, but ${before.id} existed since ${before.createdAt}` });
      } else if (order !== undefined && !anyOk && !anyIndeterminate) {
        out.push({ kind: 'fail_with_effect', ref, op: o.op, detail: `${o.worker} failed (${o.code}, record ${o.state}); ${order.id} exists and no call of ${ref} returned it` });
      }
    }
  }
}

/** Whether one reading of a ref agrees with the provider. */
function checkClaim(ref: string, v: RefView, truth: ReconciledEntry, out: Violation[]): void {
  if (truth.claim === 'one') {
    const there = v.effects.filter((e) => e.createdAt <= truth.at);
    if (v.effects.length !== 1 || there.length !== 1 || there[0]?.id !== truth.orderId) {
      out.push({ kind: 'reconciled_wrong', ref, detail: `read ${truth.state} with ${truth.orderId ?? 'no order id'} (${truth.phase}); the provider has ${v.effects.map((e) => `${e.id}@${e.createdAt}`).join(', ') || 'none'} (read at ${truth.at})` });
    }
  } else if (truth.claim === 'none') {
    // No effect may exist before the next call of the ref could have made one.
    const next = v.invokes.filter((i) => i.at >= truth.at).reduce((min, i) => Math.min(min, i.at), Number.POSITIVE_INFINITY);
    const early = v.effects.find((e) => e.createdAt < next);
    if (early !== undefined) {
      out.push({ kind: 'reconciled_wrong', ref, detail: `read ${truth.state}, no effect possible (${truth.phase}, at ${truth.at}), but ${early.id} was created at ${early.createdAt}, before any later call` });
    }
  }
}

function checkReconciled(ref: string, v: RefView, out: Violation[]): void {
  for (const truth of v.reconciled) checkClaim(ref, v, truth, out);
  if (!v.outcomes.some((o) => o.type === 'indeterminate')) return;
  const last = v.reconciled.at(-1);
  if (last === undefined) return void out.push({ kind: 'unreconciled', ref, detail: `${ref} had an indeterminate call and the final recovery never read it` });
  if (last.claim !== 'one' && last.claim !== 'none') {
    out.push({ kind: 'unreconciled', ref, detail: `the final recovery left ${ref} ${last.state} (${last.claim}, ${last.phase})` });
  }
}

function checkKeys(input: CheckInput, out: Violation[]): void {
  const keys = new Map<string, Set<string | undefined>>();
  for (const r of input.requests ?? []) {
    if (r.ref === undefined) continue;
    let set = keys.get(r.ref);
    if (set === undefined) keys.set(r.ref, (set = new Set()));
    set.add(r.key);
  }
  for (const [ref, set] of keys) {
    if (set.size > 1) out.push({ kind: 'key_reminted', ref, detail: `${set.size} different keys were sent for ${ref}` });
  }
}

/**
 * Checks a chaos history against the providers' effect logs.
 *
 * @example
 * ```ts
 * const { violations, duplicates } = check({ history, effects: provider.orders, requests: provider.requests })
 * ```
 */
export function check(input: CheckInput): CheckResult {
  const violations: Violation[] = [];
  const refs = byRef(input);
  const result: CheckResult = { violations, refs: 0, effects: 0, duplicates: 0, ok: 0, fail: 0, indeterminate: 0, reconciled: { toOne: 0, toZero: 0 }, resendWithEffect: 0 };
  for (const [ref, v] of refs) {
    if (v.invokes.length > 0) result.refs++;
    result.effects += v.effects.length;
    if (v.effects.length > 1) {
      result.duplicates += v.effects.length - 1;
      violations.push({ kind: 'duplicate_effect', ref, detail: `${v.effects.length} effects for ${ref}: ${v.effects.map((e) => e.id).join(', ')}` });
    }
    checkPairs(ref, v, violations);
    checkOutcomes(ref, v, violations);
    checkReconciled(ref, v, violations);
    const indeterminate = v.outcomes.filter((o) => o.type === 'indeterminate').length;
    result.ok += v.outcomes.filter((o) => o.type === 'ok').length;
    result.fail += v.outcomes.filter((o) => o.type === 'fail').length;
    result.indeterminate += indeterminate;
    // The truth of the indeterminate calls: the first reading that settles the ref.
    const truth = v.reconciled.find((t) => t.claim === 'one' || t.claim === 'none');
    if (indeterminate > 0 && truth !== undefined) {
      if (truth.claim === 'one') result.reconciled.toOne += indeterminate;
      else if (truth.claim === 'none') result.reconciled.toZero += indeterminate;
    }
    if (v.reconciled.some((t) => t.claim === 'resend' && v.effects.some((e) => e.createdAt < t.at))) result.resendWithEffect++;
  }
  checkKeys(input, violations);
  return result;
}

/** The entries of a history file's text (JSON lines); a torn last line is skipped. */
export function parseHistory(text: string): HistoryEntry[] {
  const out: HistoryEntry[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(JSON.parse(line) as HistoryEntry);
    } catch {
      // a line cut by SIGKILL mid-write: its call has no complete entry and is reported by its invoke
    }
  }
  return out;
}
