/**
 * A once-only call answered with a redirect other than 303 (`redirect: 'manual'`: 301, 302, 307, 308)
 * is `terminal`: returned, stored, replayed. explain called it "refused … a caller defect", planned
 * "fix the input, and send the fixed request with a new ref" and verified "no effect": after a POST a
 * 302 may follow the effect (Post/Redirect/Get), so an operator following that plan could place the
 * order twice. (A 303 is a success: test/e2e/redirect-303-manual.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { explain } from '../../src/explain/explain.js';
import { applyEvent } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';
import { explainPolicy, startedRecord } from '../helpers/explain-policy.js';

const T0 = 1_700_000_000_000;

function answered(status: number): OperationRecord {
  const r = startedRecord('A-17', '123e4567-e89b-12d3-a456-426614174abc', T0);
  const result = { source: 'attempt', kind: 'response', status, statusText: '', headers: [['location', '/orders/o-1']], body: '', bodyEncoding: 'utf8', bodyTruncated: false };
  return applyEvent(r, { type: 'attempt_finished', class: 'terminal', status, reason: `status ${status}`, result: result as never }, T0 + 20, 'a');
}

describe('explain on a POST answered with a redirect (redirect: manual)', () => {
  it.each([301, 302, 307, 308])('%i: not a refusal with no effect; check at the provider before any new ref', (status) => {
    const r = answered(status);
    expect(r.state).toBe('failed');
    const x = explain(r, explainPolicy(T0 + 1_000));
    expect(x.diagnosis.summary).toBe(`The provider answered ${status} (status ${status}), a redirect, returned and stored as the final answer; after a POST it may follow the effect (Post/Redirect/Get).`);
    const text = [...x.plan, ...x.verification].join('\n');
    expect(text).not.toMatch(/refused|caller defect|fix the input|no effect/);
    expect(x.plan[0]).toBe(`Do not send it again under a new ref before checking: a ${status} after a POST may follow the effect or mean "not here".`);
    expect(x.plan[1]).toMatch(/^Read the stored response \(.*\) and its Location, and check at the provider whether an effect exists for ref 'A-17' \(key …4abc\)\.$/);
    expect(x.verification[0]).toBe("At the provider: 0 or 1 effect for ref 'A-17' (key …4abc).");
  });

  it('a 4xx is still a refusal with no effect', () => {
    const x = explain(answered(422), explainPolicy(T0 + 1_000));
    expect(x.diagnosis.summary).toMatch(/^The provider refused the request with 422/);
    expect(x.verification[0]).toMatch(/^At the provider: no effect/);
  });
});

// A record a lookup's 3xx settled `succeeded` while 200–399 counted as found (a lookup with redirect:
// 'manual' handed a 302 to a login page over; measured: succeeded with 0 orders at the provider). Such
// records stay in stores written before a 3xx became "the lookup failed": explain said "A lookup found
// the effect (status 302)", "Nothing to do", confidence medium, effects 1.
function foundByLookup(status: number): OperationRecord {
  const r = startedRecord('A-17', '123e4567-e89b-12d3-a456-426614174abc', T0);
  const lost = applyEvent(r, { type: 'attempt_finished', class: 'ambiguous', status: null, reason: 'socket reset after send', result: null }, T0 + 20, 'a');
  const result = { source: 'lookup', kind: 'response', status, statusText: '', headers: [['location', '/login']], body: '', bodyTruncated: false };
  return applyEvent(lost, { type: 'lookup_found', result: result as never, detail: `lookup found it (status ${status})` }, T0 + 40, 'a');
}

describe("explain on a record a lookup's 3xx settled succeeded (stored before a 3xx stopped counting as found)", () => {
  it.each([301, 302, 303, 307, 308])('%i: not "nothing to do": escalated, low confidence, effects unknown, check at the provider', (status) => {
    const r = foundByLookup(status);
    expect(r.state).toBe('succeeded');
    const x = explain(r, explainPolicy(T0 + 1_000));
    expect(x.escalate).toBe(true);
    expect(x.confidence).toBe('low');
    expect(x.handoff.effects).toBe('unknown');
    expect(x.escalation).toContain(`a lookup's ${status} answer settled the record succeeded`);
    expect(x.diagnosis.evidence.join('\n')).toContain('not a found effect');
    expect(x.diagnosis.summary).toBe(`A lookup's redirect, not followed, was taken for the effect (status ${status}) after attempt 1 ended without an answer.`);
    expect(x.plan.join('\n')).not.toMatch(/Nothing to do:/);
    expect(x.plan[0]).toMatch(new RegExp(`^Check at the provider whether an effect exists for ref 'A-17' \\(key …4abc\\): the stored ${status} proves nothing`));
    expect(x.verification[0]).toBe("At the provider: 0 or 1 effect for ref 'A-17' (key …4abc).");
  });

  it('a 2xx lookup answer (204 too) is still found: nothing to do, one effect', () => {
    for (const status of [200, 204]) {
      const x = explain(foundByLookup(status), explainPolicy(T0 + 1_000));
      expect([x.escalate, x.handoff.effects]).toEqual([false, 1]);
    }
  });
});
