/**
 * How a call that met a provider's key conflict on a resend ended it, read from its client's events.
 * The engine keeps such a record ambiguous (an earlier attempt may have reached the provider) and
 * reconciles it at once, never resending (see `reconcileOwned` in `src/engine/execute.ts`):
 *
 * - `found`: the lookup found the effect: `succeeded`;
 * - `absent`: the lookup said absent, settled (asked after `settleMs`): `failed`, `IDEMPOTENCY_CONFLICT`;
 * - `no_lookup`: no lookup for the action: `AmbiguousOutcomeError`, the record left ambiguous;
 * - `unknown`: the lookup failed: `AmbiguousOutcomeError`, the record left ambiguous;
 * - `at_once`: the record ended `failed` without a lookup (no earlier attempt can have reached the provider);
 * - `other`: the call got no answer from its reconciliation (a deadline in the settle wait, a lost
 *   lease, an "absent" the record refused), or a conflict met the next one before it did.
 *
 * Counted per conflict answer, by the process whose call got it; a SIGKILL loses the one under way.
 * A record left ambiguous (`no_lookup`, `unknown`, `other`) is settled later by another call or
 * `recover()`: how the records ended is counted apart (the final recovery's `conflicted`).
 *
 * @module
 */
import type { OnceEvent } from '../src/index.js';

/** How a key conflict on a resend ended in the call that got it (see the module doc). */
export type ConflictBranch = 'found' | 'absent' | 'no_lookup' | 'unknown' | 'at_once' | 'other';

/** Every branch, in the order the totals print them. */
export const CONFLICT_BRANCHES: readonly ConflictBranch[] = ['found', 'absent', 'no_lookup', 'unknown', 'at_once', 'other'];

/**
 * An `onEvent` listener that tells `onBranch` how each key conflict answer ended. Per operation
 * (action and ref): the engine runs one attempt loop per operation in a process at a time.
 *
 * @example
 * ```ts
 * const counts: Record<string, number> = {}
 * const client = createClient({ onEvent: conflictBranches((b) => (counts[b] = (counts[b] ?? 0) + 1)) })
 * ```
 */
export function conflictBranches(onBranch: (branch: ConflictBranch, ref: string) => void): (e: OnceEvent) => void {
  /** operations whose conflict is not settled yet: `conflict` (no lookup answered), or `absent` (its "absent" written, the conflict to stand) */
  const open = new Map<string, 'conflict' | 'absent'>();
  return (e) => {
    const id = `${e.scope.action}\n${e.scope.ref}`;
    const end = (branch: ConflictBranch): void => {
      open.delete(id);
      onBranch(branch, e.scope.ref);
    };
    const at = open.get(id);
    if (e.type === 'attempt_finished' && e.class === 'conflict') {
      if (at !== undefined) end('other');
      open.set(id, 'conflict');
      return;
    }
    if (at === undefined) return;
    switch (e.type) {
      case 'lookup':
        if (at === 'absent') return end('other');
        if (e.outcome === 'absent') return void open.set(id, 'absent');
        return end(e.outcome === 'found' ? 'found' : e.outcome === 'none' ? 'no_lookup' : 'unknown');
      case 'conflict':
        // the conflict stands: after a settled "absent", or at once
        return end(at === 'absent' ? 'absent' : 'at_once');
      case 'attempt_started':
      case 'stopped':
      case 'replay':
      case 'takeover':
      case 'operation_resumed':
        return end('other');
      default:
        return;
    }
  };
}
