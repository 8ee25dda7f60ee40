/**
 * A ref oncefetch minted (no `once.ref`, no key header; key === ref, keySource 'minted', see record.ts
 * `refMinted`) is one no registered lookup can find, and recover() asks none about it (3e659bd). explain
 * planned "Look up first: run client.recover() …; the lookup registered for … asks the provider", no
 * escalation, for such an ambiguous record: recover() leaves it stillAmbiguous and nothing settles it.
 */
import { describe, expect, it } from 'vitest';
import { explain } from '../../src/explain/explain.js';
import { applyEvent } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';
import { explainPolicy, startedRecord } from '../helpers/explain-policy.js';

const T0 = 1_700_000_000_000;
const UUID = '123e4567-e89b-12d3-a456-426614174abc';

function ambiguous(ref: string, key: string): OperationRecord {
  let r = startedRecord(ref, key, T0);
  r = applyEvent(r, { type: 'attempt_finished', class: 'ambiguous', status: 500, reason: 'status 500', result: null }, T0 + 20, 'a');
  return applyEvent(r, { type: 'stopped', code: 'AMBIGUOUS_OUTCOME', message: 'unknown' }, T0 + 30, 'a');
}

describe('explain on a minted ref with a lookup registered for its action', () => {
  it('counts no registered lookup: escalated, no "look up first", and says why', () => {
    const x = explain(ambiguous(UUID, UUID), explainPolicy(T0 + 1_000, { lookupRegistered: true }));
    expect(x.handoff.retryPolicy.lookupRegistered).toBe(false);
    expect(x.escalate).toBe(true);
    const plan = x.plan.join('\n');
    expect(plan).not.toMatch(/Look up first|the lookup registered|run client\.recover\(\)|no lookup is registered/);
    expect(plan).toMatch(/oncefetch minted/);
    expect(x.plan.at(-1)).toMatch(/^Then call again with the same payload and once: \{ ref: '123e4567-[^']*', lookup \} \(its own lookup\) that reports what you found: found settles it as succeeded/);
  });

  it('asks the provider about the key it was sent with, not about a ref it never saw', () => {
    const plan = explain(ambiguous(UUID, UUID), explainPolicy(T0 + 1_000, { lookupRegistered: true })).plan.join('\n');
    expect(plan).toMatch(new RegExp(`^Check at the provider whether an effect exists for the request sent with key '${UUID}' \\(oncefetch minted it, and the ref as the same UUID: the provider knows no ref for it\\): its API, dashboard or support\\.$`, 'm'));
    expect(plan).not.toMatch(/exists for ref/);
  });

  it('a record only a dedupe cleared, the key stale: no advice to register a lookup, which is never asked about it', () => {
    let r = startedRecord(UUID, UUID, T0);
    r = applyEvent(r, { type: 'attempt_finished', class: 'ambiguous', status: null, reason: 'headers timeout', result: null }, T0 + 20, 'a');
    r = applyEvent(r, { type: 'resend_after_ambiguous', detail: 'the provider dedupes' }, T0 + 30, 'a');
    r = applyEvent(r, { type: 'stopped', code: 'ABORTED', message: 'aborted' }, T0 + 40, 'a');
    const x = explain(r, explainPolicy(T0 + 120_000, { lookupRegistered: true, providerDedupes: true, providerRetentionMs: 60_000 }));
    expect(x.escalate).toBe(true);
    const plan = x.plan.join('\n');
    expect(plan).not.toMatch(/register a lookup/);
    expect(plan).toMatch(new RegExp(`^Check at the provider whether an effect exists for the request sent with key '${UUID}' \\(.*\\); call again with the same payload and once: \\{ ref: '${UUID}', lookup \\} \\(its own lookup\\)\\.$`, 'm'));
  });

  it('a ref the caller gave (a key minted apart from it): the registered lookup settles it, as before', () => {
    const x = explain(ambiguous('A-17', UUID), explainPolicy(T0 + 1_000, { lookupRegistered: true }));
    expect(x.escalate).toBe(false);
    expect(x.plan.join('\n')).toMatch(/Look up first: run client\.recover\(\)/);
  });
});
