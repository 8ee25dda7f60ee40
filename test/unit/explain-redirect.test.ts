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
