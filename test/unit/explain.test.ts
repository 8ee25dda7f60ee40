/**
 * `explain(record, policy)`: table-driven over records built with the real
 * state machine (`newRecord` + `applyEvent`), one row per diagnosis, plus the
 * confidence levels, escalation, redaction and the client wiring.
 */
import { describe, expect, it } from 'vitest';
import { explain } from '../../src/explain/explain.js';
import { redactKey } from '../../src/explain/plan.js';
import { factsOf } from '../../src/explain/facts.js';
import type { DiagnosisCode, ExplainPolicy, Explanation } from '../../src/explain/types.js';
import { applyEvent, isTerminal, lateDeliveryUnsettled, newRecord, recordId, resendNeedsDedupe } from '../../src/operation/record.js';
import type { OperationRecord, OperationState, RecordEvent, RecordedClass, ResultSnapshot } from '../../src/operation/record.js';
import * as browserEntry from '../../src/browser.js';
import { createClient, memoryStore } from '../../src/index.js';
import { explainPolicy } from '../helpers/explain-policy.js';

const T0 = 1_700_000_000_000;
const DAY = 24 * 3600 * 1000;
const LEASE_MS = 30_000;
const A = 'owner-a';
const B = 'owner-b';
const KEY = '123e4567-e89b-12d3-a456-426614174abc';

function snapshot(status: number, source: 'attempt' | 'lookup' = 'attempt', headers: [string, string][] = []): ResultSnapshot {
  return { kind: 'response', source, status, statusText: '', headers: [['content-type', 'application/json'], ...headers], body: '', bodyTruncated: false };
}

/** A record driven through real transitions, 10 ms apart. */
class Rec {
  rec: OperationRecord;
  t = T0;
  constructor() {
    this.rec = newRecord({
      scope: { tenant: 't1', action: 'create-order', ref: 'A-17' },
      key: KEY,
      keySource: 'minted',
      fingerprint: 'f'.repeat(64),
      request: { method: 'POST', url: 'https://api.example.com/orders' },
      owner: A,
      now: T0,
      leaseMs: LEASE_MS,
      retentionMs: DAY,
    });
  }
  on(event: RecordEvent, owner = A): this {
    this.t += 10;
    this.rec = applyEvent(this.rec, event, this.t, owner);
    return this;
  }
  start(owner = A): this {
    return this.on({ type: 'attempt_started', attemptId: `att-${this.rec.attempts.length + 1}` }, owner);
  }
  /** one attempt with its outcome; `result` for success and terminal */
  attempt(cls: RecordedClass, status: number | null, reason: string, result: ResultSnapshot | null = null): this {
    return this.start().on({ type: 'attempt_finished', class: cls, status, reason, result });
  }
  stop(code: string, message: string): this {
    return this.on({ type: 'stopped', code, message });
  }
}

const policy = (over: Partial<ExplainPolicy> = {}): ExplainPolicy => explainPolicy(T0 + 1_000, over);

interface Row {
  name: string;
  record: () => OperationRecord;
  policy?: Partial<ExplainPolicy>;
  code: DiagnosisCode;
  confidence: Explanation['confidence'];
  escalate: boolean;
  effects: 'unknown' | number;
  plan?: RegExp;
}

const rows: Row[] = [
  { name: 'nothing sent yet', record: () => new Rec().rec, code: 'never_sent', confidence: 'high', escalate: false, effects: 0, plan: /call again with the same ref/i },
  {
    name: 'only connection refusals, then retries exhausted',
    record: () => new Rec().attempt('not_sent', null, 'ECONNREFUSED').attempt('not_sent', null, 'ECONNREFUSED').stop('RETRIES_EXHAUSTED', '2 attempts').rec,
    code: 'never_sent',
    confidence: 'high',
    escalate: false,
    effects: 0,
  },
  {
    name: 'one 201',
    record: () => new Rec().attempt('success', 201, 'status 201', snapshot(201)).rec,
    code: 'succeeded',
    confidence: 'medium',
    escalate: false,
    effects: 1,
    plan: /nothing to do/i,
  },
  {
    name: '500 after commit, then a lookup found it',
    record: () =>
      new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }).rec,
    policy: { lookupRegistered: true },
    code: 'succeeded',
    confidence: 'high',
    escalate: false,
    effects: 1,
  },
  {
    name: 'a timeout, then a 201 replayed by the provider',
    record: () =>
      new Rec()
        .attempt('ambiguous', null, 'headers timeout')
        .on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' })
        .attempt('success', 201, 'status 201', snapshot(201, 'attempt', [['idempotent-replayed', 'true']])).rec,
    policy: { providerDedupes: true },
    code: 'succeeded',
    confidence: 'high',
    escalate: false,
    effects: 1,
  },
  {
    name: 'terminal 400',
    record: () => new Rec().attempt('terminal', 400, 'status 400', snapshot(400)).rec,
    code: 'terminal_client_error',
    confidence: 'medium',
    escalate: false,
    effects: 0,
    plan: /do not retry unchanged input/i,
  },
  {
    name: 'provider reports the key reused with other content',
    record: () => new Rec().attempt('conflict', 422, 'idempotency key mismatch').rec,
    code: 'payload_changed',
    confidence: 'medium',
    escalate: false,
    effects: 0,
    plan: /new ref/i,
  },
  {
    name: '503 twice, then retries exhausted',
    record: () => new Rec().attempt('retryable', 503, 'status 503').attempt('retryable', 503, 'status 503').stop('RETRIES_EXHAUSTED', '2 attempts').rec,
    code: 'retryable_backoff',
    confidence: 'high',
    escalate: false,
    effects: 0,
    plan: /same key/i,
  },
  {
    name: 'in flight under a live lease of another owner',
    record: () => new Rec().start().rec,
    code: 'concurrent_duplicates',
    confidence: 'low',
    escalate: false,
    effects: 'unknown',
    plan: /let the one owner finish/i,
  },
  {
    name: '409 in progress after a timeout',
    record: () =>
      new Rec().attempt('ambiguous', null, 'headers timeout').on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' }).attempt('retryable', 409, 'request in progress').rec,
    policy: { providerDedupes: true },
    code: 'concurrent_duplicates',
    confidence: 'medium',
    escalate: false,
    effects: 'unknown',
    plan: /never mint a new key/i,
  },
  {
    name: 'timeout before response, no lookup, provider does not dedupe',
    record: () => new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec,
    code: 'timeout_before_response',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /^do not resend/i,
  },
  {
    name: 'timeout before response, a lookup is registered',
    record: () => new Rec().attempt('ambiguous', 502, 'status 502').stop('AMBIGUOUS_OUTCOME', 'unknown').rec,
    policy: { lookupRegistered: true },
    code: 'timeout_before_response',
    confidence: 'medium',
    escalate: false,
    effects: 'unknown',
    plan: /look up first/i,
  },
  {
    name: 'timeout before response, the provider dedupes',
    record: () => new Rec().attempt('ambiguous', null, 'socket reset after send').stop('RETRIES_EXHAUSTED', 'attempts').rec,
    policy: { providerDedupes: true },
    code: 'timeout_before_response',
    confidence: 'low',
    escalate: false,
    effects: 'unknown',
    plan: /same key …4abc/,
  },
  {
    name: 'timeout before response, the provider dedupes but the key is stale',
    record: () => new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec,
    policy: { providerDedupes: true, providerRetentionMs: 60_000, now: T0 + 120_000 },
    code: 'timeout_before_response',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /^do not resend/i,
  },
  {
    name: 'a lookup said absent: resend with the same key',
    record: () => new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }).rec,
    policy: { lookupRegistered: true },
    code: 'timeout_before_response',
    confidence: 'high',
    escalate: false,
    effects: 0,
    plan: /call again with the same ref/i,
  },
  {
    name: 'in flight, the owner stopped renewing (crash)',
    record: () => new Rec().start().rec,
    policy: { now: T0 + LEASE_MS + 5_000, lookupRegistered: true },
    code: 'stale_lease',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /take it over/i,
  },
  {
    name: 'taken over after a crash, no lookup: the attempt never recorded an outcome',
    record: () => {
      const r = new Rec().start();
      r.t += LEASE_MS;
      return r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'release' }, B).rec;
    },
    policy: { now: T0 + 2 * LEASE_MS + 5_000 },
    code: 'stale_lease',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /^do not resend/i,
  },
  {
    name: 'cancelled before any send',
    record: () => new Rec().on({ type: 'cancel' }).rec,
    code: 'cancelled',
    confidence: 'high',
    escalate: false,
    effects: 0,
  },
  {
    name: 'contradiction: a lookup said absent, then 409 in progress with nothing sent in between',
    record: () =>
      new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }).attempt('retryable', 409, 'request in progress').rec,
    policy: { lookupRegistered: true },
    code: 'concurrent_duplicates',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /^do not resend while the evidence contradicts itself/i,
  },
  {
    // (a 422 "request ... in progress", PayPal's or Adyen's, says what a 409 does: facts.ts counted only the 409)
    name: 'contradiction: a lookup said absent, then 422 "request in progress" with nothing sent in between',
    record: () =>
      new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }).attempt('retryable', 422, 'status 422 in progress').rec,
    policy: { lookupRegistered: true },
    code: 'concurrent_duplicates',
    confidence: 'low',
    escalate: true,
    effects: 'unknown',
    plan: /^do not resend while the evidence contradicts itself/i,
  },
  {
    name: 'a foreign row no rule fits (failed without attempts)',
    record: () => ({ ...new Rec().rec, state: 'failed' as const }),
    code: 'unknown',
    confidence: 'high',
    escalate: true,
    effects: 0,
    plan: /^do not resend/i,
  },
];

describe('explain', () => {
  it.each(rows)('$name → $code, $confidence confidence, escalate $escalate', (row) => {
    const x = explain(row.record(), policy(row.policy));
    expect(x.diagnosis.code).toBe(row.code);
    expect(x.confidence).toBe(row.confidence);
    expect(x.escalate).toBe(row.escalate);
    expect(x.escalation !== undefined).toBe(row.escalate);
    expect(x.handoff.effects).toBe(row.effects);
    if (row.plan !== undefined) expect(x.plan.some((s) => row.plan?.test(s))).toBe(true);
    expect(x.plan.length).toBeGreaterThan(0);
    expect(x.verification.length).toBeGreaterThan(0);
    expect(x.diagnosis.summary).not.toBe('');
  });

  it.each(rows)('never proposes a blind resend: $name', (row) => {
    const p = policy({ providerDedupes: false, lookupRegistered: false, ...row.policy });
    const x = explain(row.record(), p);
    // Without a lookup and without a deduping provider, an unknown effect count allows no resend at all.
    if (!p.lookupRegistered && !p.providerDedupes && x.handoff.effects === 'unknown' && x.state !== 'in_flight') {
      expect(x.plan.filter((s) => /^(call again|resend)/i.test(s))).toEqual([]);
      expect(x.escalate).toBe(true);
    }
  });

  // User trial: "At the provider: exactly one effect for ref 'o7' (key …6c3e). once the resend succeeds."
  it.each(rows)('plan and verification lines are sentences (no sentence starts in lower case): $name', (row) => {
    const x = explain(row.record(), policy(row.policy));
    for (const line of [...x.plan, ...x.verification]) expect(line).not.toMatch(/\. [a-z]+ /);
  });

  it.each<OperationState>(['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled'])(
    'Facts.terminal (kept apart from record.ts for the lazy chunk) agrees with isTerminal: %s',
    (state) => {
      expect(factsOf({ ...new Rec().rec, state }, T0, DAY).terminal).toBe(isTerminal(state));
    },
  );

  it('counts independent observations: statuses, lookup answers and provider replays, not timeouts', () => {
    const r = new Rec()
      .attempt('ambiguous', null, 'headers timeout')
      .on({ type: 'lookup_unknown', detail: 'lookup failed: 503' })
      .on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' })
      .attempt('ambiguous', 500, 'status 500')
      .on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }).rec;
    const x = explain(r, policy({ lookupRegistered: true, providerDedupes: true }));
    expect(x.observations).toBe(2);
    expect(x.handoff.lookups.map((l) => l.outcome)).toEqual(['unknown', 'resend', 'found']);
    expect(x.diagnosis.evidence.some((e) => e.includes('headers timeout'))).toBe(true);
  });

  // First-hour trial: a provider that committed 6 s after a 2 s timeout, the lookup's settled "absent", a
  // same-key resend the provider does not dedupe: 2 orders, and explain verified "exactly one effect" alone.
  it('succeeded after a resend that a settled "absent" cleared: verification names the settleMs assumption, unless the provider dedupes', () => {
    const r = new Rec()
      .attempt('ambiguous', null, 'TimeoutError')
      .on({ type: 'lookup_absent', detail: 'lookup reported no such operation' })
      .attempt('success', 201, 'status 201', snapshot(201)).rec;
    const assumption = /Attempt 1's outcome was unknown and a lookup's "absent", trusted settleMs after it ended, cleared it for a resend .* there are two effects\. If so, undo one and raise settleMs/;
    const x = explain(r, policy({ lookupRegistered: true }));
    expect(x.diagnosis.code).toBe('succeeded');
    expect(x.verification[0]).toMatch(/exactly one effect/);
    expect(x.verification.some((v) => assumption.test(v))).toBe(true);
    expect(explain(r, policy({ lookupRegistered: true, providerDedupes: true })).verification.some((v) => assumption.test(v))).toBe(false);
    const unsent = new Rec().attempt('retryable', 503, 'status 503').attempt('success', 201, 'status 201', snapshot(201)).rec;
    expect(explain(unsent, policy()).verification.some((v) => assumption.test(v))).toBe(false);
  });

  it('the settleMs assumption: named for an attempt left open (its process gone) that a settled "absent" cleared; not where no "absent" cleared a resend, nor for the attempt that got the answer', () => {
    const assumption = /outcome was unknown and a lookup's "absent", trusted settleMs after it ended, cleared it for a resend/;
    const named = (r: OperationRecord, p = policy({ lookupRegistered: true })): string[] => explain(r, p).verification.filter((v) => assumption.test(v));
    // attempt 1 left open (its process crashed), taken over, a settled "absent", attempt 2 resent with the same key: succeeded
    const resumed = new Rec()
      .start()
      .on({ type: 'acquire', owner: B, leaseExpiresAt: T0 + LEASE_MS * 3 }, B)
      .on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }, B)
      .start(B)
      .on({ type: 'attempt_finished', class: 'success', status: 201, reason: 'status 201', result: snapshot(201) }, B).rec;
    expect(resumed.attempts.map((a) => a.class)).toEqual([null, 'success']);
    expect(named(resumed)).toEqual([expect.stringMatching(/^Attempt 1's outcome was unknown/)]);
    // resent because the provider dedupes (the writer's policy), explained by a client that does not say so (the CLI's
    // defaults): no lookup's "absent" cleared anything, and none is claimed
    const deduped = new Rec()
      .attempt('ambiguous', 500, 'status 500')
      .on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' })
      .attempt('success', 201, 'status 201', snapshot(201)).rec;
    expect(deduped.state).toBe('succeeded');
    expect(named(deduped)).toEqual([]);
    // the attempt that got the answer (a lookup found it) is not one a resend was cleared after: attempt 1 a 503, a
    // superseded owner's late response reopened the record, a settled "absent", attempt 2 unknown (a 500), found
    const found = new Rec()
      .attempt('retryable', 503, 'status 503')
      .on({ type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (status 500)', status: 500, reopen: true }, B)
      .on({ type: 'lookup_absent', detail: 'lookup reported no such operation' })
      .attempt('ambiguous', 500, 'status 500')
      .on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }).rec;
    expect({ state: found.state, attempts: found.attempts.map((a) => a.class) }).toEqual({ state: 'succeeded', attempts: ['retryable', 'ambiguous'] });
    expect(named(found)).toEqual([]);
  });

  it('lowers confidence for a stale lease even with observations', () => {
    const r = new Rec().attempt('retryable', 503, 'status 503').attempt('retryable', 503, 'status 503').start().rec;
    expect(explain(r, policy({ now: T0 + 1_000 })).confidence).toBe('high');
    const stale = explain(r, policy({ now: T0 + LEASE_MS + 1_000 }));
    expect(stale.diagnosis.code).toBe('stale_lease');
    expect(stale.confidence).toBe('medium');
    expect(stale.escalation).toMatch(/stale/);
  });

  it('hands off scope, redacted key, canonical payload, policy and retention; the key never appears whole', () => {
    const r = new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec;
    const x = explain(r, policy());
    expect(x.handoff.keyScope).toMatchObject({ tenant: 't1', action: 'create-order', ref: 'A-17' });
    expect(x.handoff.key).toBe('…4abc');
    expect(JSON.stringify(x)).not.toContain(KEY);
    expect(x.handoff.canonicalPayload).toBe('SHA-256 over method, normalised URL and RFC 8785 canonical JSON body (exact bytes otherwise)');
    expect(x.handoff.fingerprint).toBe('f'.repeat(64));
    expect(x.handoff.attempts).toEqual([expect.objectContaining({ number: 1, class: 'ambiguous', status: null, owner: A })]);
    expect(x.handoff.retryPolicy).toMatchObject({ maxAttempts: 5, providerDedupes: false, lookupRegistered: false });
    expect(x.handoff.retention).toMatchObject({ createdAt: T0, retentionMs: DAY, resendCutoffAt: T0 + 0.9 * DAY, keyStale: false, keyAgeMs: 1_000 });
    expect(x.handoff.error?.code).toBe('AMBIGUOUS_OUTCOME');
    expect(x.handoff.lease).toBeNull();
  });

  it('redacts a short caller key to its length: its last 4 characters would give it away', () => {
    for (const key of ['Zq', 'Zq-9x17', 'Zq-00009x17']) {
      const r = new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec;
      const x = explain({ ...r, key }, policy());
      expect(x.handoff.key).toBe(`… (${key.length} characters)`);
      expect(JSON.stringify(x)).not.toContain(key.slice(-4));
    }
    expect(redactKey('Zq-000009x17')).toBe('…9x17');
  });

  it('is pure: same input, same output, record untouched', () => {
    const r = new Rec().attempt('ambiguous', 500, 'status 500').rec;
    const before = structuredClone(r);
    expect(explain(r, policy())).toEqual(explain(r, policy()));
    expect(r).toEqual(before);
  });
});

describe('client.explain', () => {
  it('explains a stored operation under the client policy, and undefined for an unknown scope', async () => {
    const fetch = (async () => new Response('{"id":"ord_1"}', { status: 201, headers: { 'content-type': 'application/json' } })) as typeof globalThis.fetch;
    const lookup = async () => null;
    const client = createClient({ store: memoryStore(), fetch, tenant: 't1', providerDedupes: true, lookups: { 'create-order': lookup } });
    await client.fetch('https://api.example.com/orders', { method: 'POST', body: '{"sku":"A"}', headers: { 'content-type': 'application/json' }, once: { action: 'create-order', ref: 'A-1' } });
    const x = await client.explain({ action: 'create-order', ref: 'A-1' });
    expect(x?.diagnosis.code).toBe('succeeded');
    expect(x?.handoff.retryPolicy).toMatchObject({ providerDedupes: true, lookupRegistered: true });
    expect(x?.handoff.effects).toBe(1);
    expect(await client.explain({ action: 'create-order', ref: 'nope' })).toBeUndefined();
    await client.close();
  });
});

// Regression (adversarial run): for a ref with a space the suggested command was
// `oncefetch show with space --action …`, which looks up 'with'.
describe('suggested commands', () => {
  it('quote a ref, action or tenant that is not one plain shell word', () => {
    const r = new Rec().attempt('ambiguous', null, 'ECONNRESET').rec;
    const odd = { ...r, ref: "with space's", action: 'create order', tenant: 'default', id: '' };
    const x = explain({ ...odd, id: recordId(odd) }, policy());
    const text = [...x.plan, ...x.verification].join('\n');
    expect(text).toContain(`oncefetch show 'with space'\\''s' --action 'create order'\``);
    expect(text).not.toMatch(/show with space/);
  });
});

// Regression (browser trial): client.explain() in a page suggested `oncefetch show …`, a command a
// browser cannot run. The browser entry's client names the call that reads the record instead.
describe('suggested commands in a browser', () => {
  async function refusedPlan(create: typeof createClient, tenant?: string): Promise<string> {
    const fetch = (async () => new Response('{"error":"bad sku"}', { status: 422, headers: { 'content-type': 'application/json' } })) as typeof globalThis.fetch;
    const client = create({ store: memoryStore(), fetch, ...(tenant === undefined ? {} : { tenant }) });
    const scope = { action: 'create order', ref: "A-'17" };
    expect((await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: scope })).status).toBe(422);
    const x = await client.explain(scope);
    await client.close();
    return [...(x?.plan ?? []), ...(x?.verification ?? [])].join('\n');
  }

  it('the browser entry names client.get(), with the scope as JS strings, not the CLI', async () => {
    const text = await refusedPlan(browserEntry.createClient);
    expect(text).toContain(`Read the stored response (\`client.get({ action: "create order", ref: "A-'17", tenant: "default" })\`)`);
    expect(text).not.toMatch(/oncefetch show/);
    expect(await refusedPlan(browserEntry.createClient, 't1')).toContain(`client.get({ action: "create order", ref: "A-'17", tenant: "t1" })`);
  });

  it('the Node entry keeps the command', async () => {
    expect(await refusedPlan(createClient)).toContain(`Read the stored response (\`oncefetch show 'A-'\\''17' --action 'create order'\`)`);
  });
});

// Regression: a superseded owner's late delivery after another owner's lookup said "absent" (the
// engine's own sequence: test/e2e/explain-truth.test.ts). explain took the "absent" as settling the
// attempt: `effects: 0`, and, after a late success, a plan saying "absent → the next call resends",
// where the state machine refuses any "absent" and the engine sends nothing. The plan is held here
// to what applyEvent does with the next lookup's answer.
describe("a superseded owner's late delivery after an \"absent\"", () => {
  const late = (what: 'success' | 'ambiguous'): RecordEvent =>
    what === 'success'
      ? { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }
      : { type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (attempt timeout) from a superseded owner', status: null, reopen: true };
  /** A sends; B takes over (A's lease expired) and its lookup says absent: pending, released; then A's late outcome. */
  function lateAfterAbsent(what: 'success' | 'ambiguous', cancel = false): Rec {
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B);
    if (cancel) r.on({ type: 'cancel' }, B);
    r.on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }, B).on({ type: 'release' }, B);
    expect(r.rec.state).toBe(cancel ? 'cancelled' : 'pending');
    return r.on(late(what), A);
  }
  const resends = /the next call resends|lets the next call resend|a lookup found no effect/i;

  it.each<[string, Partial<ExplainPolicy>]>([
    ['a lookup registered', { lookupRegistered: true }],
    ['no lookup, no dedupe', {}],
    ['a lookup and a deduping provider', { lookupRegistered: true, providerDedupes: true }],
  ])('late success, %s: one effect, stale_lease, low confidence, escalated; no resend on "absent"', (_, over) => {
    const r = lateAfterAbsent('success');
    expect(r.rec.state).toBe('ambiguous');
    const x = explain(r.rec, policy(over));
    expect(x.handoff.effects).toBe(1);
    expect(x.diagnosis.code).toBe('stale_lease');
    expect(x.diagnosis.summary).toMatch(/^Owner owner-a got 201 late.*took effect/);
    expect(x.confidence).toBe('low');
    expect(x.observations).toBe(2); // the "absent" and the late 201
    expect(x.escalate).toBe(true);
    expect(x.escalation).toMatch(/Contradictory evidence: a lookup said absent at .*, but a superseded owner got 201 late: the request took effect/);
    expect(x.plan.join('\n')).not.toMatch(resends);
    expect(x.verification[0]).toMatch(/^At the provider: 1 effect/);
    // what the plan says an answer does is what the state machine does with it
    expect(applyEvent(r.rec, { type: 'lookup_absent', detail: 'still nothing' }, r.t + 10, B).state).toBe('ambiguous');
    expect(applyEvent(r.rec, { type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }, r.t + 10, B).state).toBe('succeeded');
    if (over.lookupRegistered === true) expect(x.plan.join('\n')).toMatch(/absent → nothing is sent, it stays ambiguous/);
    else expect(x.plan.join('\n')).toMatch(/absent leaves it ambiguous/);
  });

  it('late success, then a lookup found it: succeeded, one effect, the earlier "absent" no contradiction', () => {
    const r = lateAfterAbsent('success').on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }, B);
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x).toMatchObject({ state: 'succeeded', escalate: false, confidence: 'high', observations: 3, diagnosis: { code: 'succeeded' }, handoff: { effects: 1 } });
    expect(x.diagnosis.evidence.filter((e) => e.startsWith('contradiction:'))).toEqual([]);
  });

  it('late ambiguous end: effects unknown, not 0; an "absent" asked after it does settle it, and the plan says so', () => {
    const r = lateAfterAbsent('ambiguous');
    expect(r.rec.state).toBe('ambiguous');
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x.handoff.effects).toBe('unknown');
    expect(x.diagnosis.code).toBe('stale_lease');
    expect(x.diagnosis.summary).toMatch(/^Owner owner-a ended ambiguous late/);
    expect(x.confidence).toBe('medium');
    expect(x.escalate).toBe(false);
    expect(x.plan.join('\n')).toMatch(/absent → the next call resends with the same key/);
    expect(applyEvent(r.rec, { type: 'lookup_absent', detail: 'nothing', askedGeneration: r.rec.generation }, r.t + 10, B).state).toBe('pending');
    // with no lookup and no dedupe: escalated, as any unsettled attempt
    expect(explain(r.rec, policy()).escalate).toBe(true);
  });

  it('cancelled on the "absent", then a late success: not "cancelled, nothing delivered" but unknown, one effect, escalated', () => {
    const r = lateAfterAbsent('success', true);
    expect(r.rec.state).toBe('cancelled');
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x.diagnosis.code).toBe('unknown');
    expect(x.handoff.effects).toBe(1);
    expect(x.escalate).toBe(true);
    expect(x.plan[0]).toBe('Do not resend.');
    expect(x.plan.join('\n')).not.toMatch(/nothing was delivered/);
    // a rule does fit: the contradiction, which the escalation names (it began "No rule of the evidence-to-decision map fits")
    expect(x.escalation).toMatch(
      /^The evidence contradicts the record's end state \(cancelled\): the request took effect; check it\. At the provider: 1 effect for ref 'A-17' \(key …4abc\)\. Set right by hand what was done because the record said cancelled \(a new ref for the same intent, say\)\. Contradictory evidence: .*; the record ended cancelled, but a superseded owner got 201 late: the request took effect/,
    );
    expect(x.escalation).not.toMatch(/No rule/);
  });

  it('a record no rule fits keeps its escalation', () => {
    const x = explain({ ...new Rec().rec, state: 'failed' }, policy());
    expect(x.escalation).toBe('No rule of the evidence-to-decision map fits a failed record with this evidence.');
  });

  // Was: the note a call writes when it records its own attempt's success (lookup_found, source 'attempt': evidence kind
  // 'attempt', "found: …") was left out of the timeline, which went from the late 201 straight to nothing.
  it("the owner's call recording its own late 201 is in the timeline, as its own success, not a lookup's finding", () => {
    const r = lateAfterAbsent('success');
    r.on({ type: 'acquire', owner: A, leaseExpiresAt: r.t + LEASE_MS }, A);
    r.on({ type: 'lookup_found', result: snapshot(201), detail: "this call's own attempt got it; its write had lost the lease to another owner" }, A);
    expect(r.rec).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(r.rec.evidence.at(-1)).toMatchObject({ kind: 'attempt', status: 201 });
    const evidence = explain(r.rec, policy()).diagnosis.evidence;
    expect(evidence.map((e) => e.split(' ')[0])).toEqual(['attempt', 'takeover', 'lookup', 'late_response', 'own']);
    expect(evidence.at(-1)).toMatch(
      /^own success at \S+: owner-a's call recorded its own attempt's 201 \(no lookup found it\): this call's own attempt got it; its write had lost the lease to another owner$/,
    );
    expect(evidence.filter((e) => e.startsWith('lookup'))).toHaveLength(1);
  });

  it('lists the evidence in the order it was written, not by the owners\' clocks (B\'s a minute ahead)', () => {
    const r = new Rec().start();
    r.t += 60_000; // B's clock
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }, B).on({ type: 'release' }, B);
    r.t -= 59_000; // A's clock, behind
    r.on(late('success'), A);
    const evidence = explain(r.rec, policy()).diagnosis.evidence;
    expect(evidence.map((e) => e.split(' ')[0])).toEqual(['attempt', 'takeover', 'lookup', 'late_response', 'contradiction:']);
  });
});

// Regression: a pending record whose last attempt was cleared by a same-key resend (a failed lookup,
// providerDedupes) after an earlier attempt a lookup had found absent: explain credited the earlier
// lookup ("a lookup then found no effect") and, under a policy without providerDedupes, planned
// "A lookup found no effect: call again", a resend of an attempt that may have acted.
describe('a pending record cleared for a same-key resend after an earlier "absent"', () => {
  const rec = (): OperationRecord =>
    new Rec()
      .attempt('ambiguous', 500, 'status 500')
      .on({ type: 'lookup_absent', detail: 'lookup reported no such operation' })
      .attempt('ambiguous', null, 'headers timeout')
      .on({ type: 'resend_after_ambiguous', detail: 'lookup failed: 503; the provider dedupes by key' })
      .stop('RETRIES_EXHAUSTED', 'attempts').rec;

  it('names the same-key resend, not the lookup', () => {
    const r = rec();
    expect(r.state).toBe('pending');
    const x = explain(r, policy({ providerDedupes: true, lookupRegistered: true }));
    expect(x.diagnosis.code).toBe('timeout_before_response');
    expect(x.diagnosis.summary).toBe(
      'Attempt 2 ended without an answer (headers timeout); it was cleared for a same-key resend (the provider dedupes by key), so it may be resent with the same key.',
    );
    expect(x.plan).toEqual([expect.stringMatching(/^Call again with the same ref and payload: the provider dedupes by key/)]);
    expect(x.handoff.effects).toBe('unknown');
  });

  it('escalates under a policy without providerDedupes and without a lookup instead of "a lookup found no effect: call again"', () => {
    const x = explain(rec(), policy({}));
    expect(x.escalate).toBe(true);
    expect(x.plan[0]).toMatch(/^Do not call again from a client without providerDedupes/);
    // what such a call does (execute.ts, step: reconcile_first): nothing sent
    expect(x.plan[0]).toMatch(/Such a call sends nothing: it turns the record ambiguous and ends with AmbiguousOutcomeError\.$/);
    expect(x.plan.join('\n')).not.toMatch(/a lookup found no effect/i);
  });

  // Was: escalated, "Do not call again from a client without providerDedupes", when such a call sent
  // at once; it now looks the record up before any send (reconcile_first), which the plan says.
  it('under a policy without providerDedupes but with a lookup: the next call sends nothing first and looks it up', () => {
    const x = explain(rec(), policy({ lookupRegistered: true }));
    expect(x.escalate).toBe(false);
    expect(x.plan[0]).toMatch(/^Nothing is resent blind: the record was cleared only for a same-key resend .* the next call from a client without providerDedupes sends nothing first, turns the record ambiguous and looks it up\.$/);
    // client.recover() takes such a record too (recover.ts: reconcile_first, then the lookup); it skips other pending ones
    expect(x.plan[1]).toMatch(/^Look up first: run client\.recover\(\) \(or call again with the same ref and payload\)/);
    expect(x.plan[2]).toMatch(/; unknown → it stays ambiguous: escalate then\.$/);
    expect(x.plan.join('\n')).not.toMatch(/a lookup found no effect/i);
  });

  it('still credits a lookup that said absent after the last attempt', () => {
    const r = new Rec().attempt('ambiguous', null, 'headers timeout').on({ type: 'resend_after_ambiguous', detail: 'dedupes' }).attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_absent', detail: 'none' }).rec;
    const x = explain(r, policy({ lookupRegistered: true }));
    expect(x.diagnosis.summary).toMatch(/; a lookup then found no effect, so/);
    expect(x.plan[0]).toMatch(/^A lookup found no effect: call again/);
  });
});

// Regression: after a late 201 that a lookup then found, the summary said attempt 1 "ended without an
// answer": its owner did get the 201, late.
describe('succeeded through a lookup after a late success', () => {
  it("says the superseded owner's attempt got its answer late", () => {
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }, B).on({ type: 'release' }, B);
    r.on({ type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }, A);
    r.on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }, B);
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x.diagnosis.summary).toBe('A lookup found the effect (status 200); attempt 1 got its answer late (201, superseded owner owner-a).');
    // without a late answer: what attempt 1 got (a 500 is an answer, one that does not say whether the request took effect)
    const plain = new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }).rec;
    expect(explain(plain, policy()).diagnosis.summary).toBe(
      'A lookup found the effect (status 200) after attempt 1 got 500: the provider answered, but its answer does not say whether the request took effect.',
    );
  });
});

/**
 * The race the README leaves open: A sends; B takes over, its lookup says absent, B sends again;
 * A's `late` outcome (a success or an ambiguous end) lands before or after B's own outcome `b`.
 */
function race(late: RecordEvent, b: 'success' | 'ambiguous', lateFirst: boolean): Rec {
  const r = new Rec().start();
  r.t += LEASE_MS;
  r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'lookup reported no such operation', askedGeneration: r.rec.generation }, B);
  r.start(B);
  if (lateFirst) r.on(late, A);
  r.on({ type: 'attempt_finished', class: b, status: b === 'success' ? 201 : null, reason: b === 'success' ? 'status 201' : 'headers timeout', result: b === 'success' ? snapshot(201) : null }, B);
  if (!lateFirst) r.on(late, A);
  return r;
}

// Regression: a superseded owner's late success beside another attempt that acted too (the race the
// README leaves open: a new owner's resend already on the wire when the stalled send lands; the
// engine's own sequence in test/e2e/explain-truth.test.ts). explain said effects 'unknown' but
// "Nothing to do", with no escalation: at a provider that ignores keys that is two effects.
describe("a superseded owner's late success beside another attempt that acted (possible duplicate)", () => {
  const late201: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
  const raced = (b: 'success' | 'ambiguous', lateFirst: boolean): Rec => race(late201, b, lateFirst);

  it.each([true, false])('its own 201 (late 201 first: %s): escalated, low confidence, effects unknown, no "nothing to do"', (lateFirst) => {
    const r = raced('success', lateFirst);
    expect(r.rec).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    for (const over of [{}, { lookupRegistered: true }]) {
      const x = explain(r.rec, policy({ ...over, now: r.t }));
      expect(x.diagnosis.code).toBe('succeeded');
      expect(x.diagnosis.summary).toBe(
        'Attempt 2 got 201; attempt 1 got its answer late (201, superseded owner owner-a): possible duplicate with attempt 2, unless the provider deduped them by key; later calls replay it.',
      );
      expect(x.handoff.effects).toBe('unknown');
      expect(x.confidence).toBe('low');
      expect(x.escalate).toBe(true);
      expect(x.escalation).toMatch(/^Possible duplicate: check at the provider\. Attempt 1 got 201 late and attempt 2 got 201 too; nothing proves the provider deduped them by key\.$/);
      expect(x.plan[0]).toMatch(/^Possible duplicate: check at the provider for two effects for ref 'A-17' \(key …4abc\), from attempts 1 and 2/);
      expect(x.plan.join('\n')).not.toMatch(/nothing to do/i);
      expect(x.verification[0]).toMatch(/^At the provider: 1 or 2 effect .* Two would be a duplicate\./);
    }
  });

  it('a provider that dedupes by key, with both sends while it remembers the key: one effect, nothing to do', () => {
    const r = raced('success', false);
    const x = explain(r.rec, policy({ providerDedupes: true, now: r.t }));
    expect(x).toMatchObject({ escalate: false, confidence: 'high', diagnosis: { code: 'succeeded' }, handoff: { effects: 1 } });
    expect(x.plan[0]).toMatch(/^Nothing to do/);
    expect(x.verification[0]).toMatch(/^At the provider: exactly one effect/);
  });

  it('a provider that dedupes, but a send landed after 90 % of its retention: no proof, escalated', () => {
    const r = raced('success', false);
    // key created at T0; the sends landed after T0 + 30 s, past T0 + 0.9 · 20 s
    const x = explain(r.rec, policy({ providerDedupes: true, providerRetentionMs: 20_000, now: r.t }));
    expect(x.handoff.effects).toBe('unknown');
    expect(x.escalate).toBe(true);
    expect(x.escalation).toMatch(/^Possible duplicate/);
  });

  it('found by a lookup after its own attempt ended ambiguous: the same escalation, naming the attempt that may have acted', () => {
    const r = raced('ambiguous', false).on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'lookup found it (status 200)' }, B);
    expect(r.rec).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    const x = explain(r.rec, policy({ lookupRegistered: true, now: r.t }));
    expect(x.diagnosis.summary).toBe(
      'A lookup found the effect (status 200); attempt 1 got its answer late (201, superseded owner owner-a): possible duplicate with attempt 2, unless the provider deduped them by key.',
    );
    expect(x).toMatchObject({ escalate: true, confidence: 'low', handoff: { effects: 'unknown' } });
    expect(x.escalation).toMatch(/^Possible duplicate: check at the provider\. .* attempt 2 may have acted too/);
    expect(explain(r.rec, policy({ lookupRegistered: true, providerDedupes: true, now: r.t }))).toMatchObject({ escalate: false, handoff: { effects: 1 } });
  });
});

// Regression: with a lookup registered and providerDedupes, the plan said "unknown → it stays
// ambiguous", where the engine's call resends with the same key (src/engine/execute.ts,
// reconcileOwned); only client.recover() leaves it ambiguous. (The engine: test/e2e/explain-truth.test.ts.)
describe('the "unknown" answer of a lookup, where the provider dedupes', () => {
  const ambiguous = () => new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown');

  it('says a call resends with the same key; the state machine takes that write', () => {
    const r = ambiguous();
    const plan = explain(r.rec, policy({ lookupRegistered: true, providerDedupes: true })).plan.join('\n');
    expect(plan).toMatch(/unknown → a call resends with the same key …4abc, which the provider dedupes \(client\.recover\(\) leaves it ambiguous\)/);
    expect(plan).not.toMatch(/unknown → it stays ambiguous/);
    expect(applyEvent(r.rec, { type: 'resend_after_ambiguous', detail: 'lookup failed; the provider dedupes by key' }, r.t + 10, B).state).toBe('pending');
  });

  it.each<[string, Partial<ExplainPolicy>, (r: Rec) => Rec]>([
    ['without providerDedupes', {}, (r) => r],
    ['with the key past 90 % of the provider retention', { providerDedupes: true, providerRetentionMs: 60_000, now: T0 + 120_000 }, (r) => r],
    ['with a cancel requested', { providerDedupes: true }, (r) => r.on({ type: 'cancel' })],
  ])('stays ambiguous %s (the engine does not resend)', (_, over, then) => {
    const x = explain(then(ambiguous()).rec, policy({ lookupRegistered: true, ...over }));
    expect(x.plan.join('\n')).toMatch(/unknown → it stays ambiguous: escalate then/);
  });

  it('after a late success too', () => {
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'none' }, B).on({ type: 'release' }, B);
    r.on({ type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }, A);
    const plan = explain(r.rec, policy({ lookupRegistered: true, providerDedupes: true })).plan.join('\n');
    expect(plan).toMatch(/absent → nothing is sent, it stays ambiguous: check at the provider by hand; unknown → a call resends with the same key …4abc/);
    expect(applyEvent(r.rec, { type: 'resend_after_ambiguous', detail: 'dedupes' }, r.t + 10, B).state).toBe('pending');
  });
});

// Regression: the plan for contradictory evidence said "then run client.recover()" whatever the
// state, but recover() takes only in_flight and ambiguous records whose lease expired: on a pending
// record it does nothing, and the next call sends at once. (The engine: test/e2e/explain-truth.test.ts.)
describe('contradictory evidence: advice that acts', () => {
  const absentThen409 = () =>
    new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }).attempt('retryable', 409, 'status 409 in progress');

  it('pending: no client.recover(); the next call sends again with the same key, no lookup first', () => {
    const r = absentThen409().stop('RETRIES_EXHAUSTED', 'attempts');
    expect(r.rec.state).toBe('pending');
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x.escalate).toBe(true);
    expect(x.plan[2]).toBe(
      "Fix or verify the lookup for 'create-order'. client.recover() skips a pending record; the next call sends again with key …4abc, no lookup first: call again only if the check finds no effect, or the provider dedupes by key.",
    );
    expect(x.plan.join('\n')).not.toMatch(/then run client\.recover\(\)/);
    // a send is what the state machine takes next from pending, no lookup
    expect(applyEvent(r.rec, { type: 'attempt_started', attemptId: 'att-3' }, r.t + 10, A).state).toBe('in_flight');
    expect(() => applyEvent(r.rec, { type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }, r.t + 10, A)).toThrow();
  });

  it('pending with a cancel requested: the next call sends nothing', () => {
    const r = absentThen409().on({ type: 'cancel' });
    expect(r.rec.state).toBe('ambiguous');
    r.on({ type: 'lookup_absent', detail: 'early', settled: false });
    expect(r.rec).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    const x = explain(r.rec, policy({ lookupRegistered: true, providerDedupes: true }));
    expect(x.plan.at(-1)).toBe("Fix or verify the lookup for 'create-order'. client.recover() skips a pending record; the next call re-applies the cancel requested and sends nothing.");
    // the call re-applies the cancel: back to reconciliation, never a send
    expect(applyEvent(r.rec, { type: 'cancel' }, r.t + 10, A).state).toBe('ambiguous');
  });

  it('ambiguous: client.recover() or a call, both of which look it up first', () => {
    const r = absentThen409().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown');
    expect(r.rec.state).toBe('ambiguous');
    const x = explain(r.rec, policy({ lookupRegistered: true }));
    expect(x.plan.at(-1)).toBe(
      "Fix or verify the lookup for 'create-order', then run client.recover() (once the lease has expired) or call again: either looks it up before any send.",
    );
  });
});

// Regression: the possible duplicate looked only at a superseded owner's late success. Its attempt
// ending ambiguous late (its own timeout fired, the provider committed all the same) beside the new
// owner's 201 was "exactly one effect", effects 1, high confidence, no escalation, although
// record.ts's lateDeliveryUnsettled holds (the "absent" came before the late end): at a provider that
// ignores keys, two effects. (The engine's sequence: test/e2e/explain-truth.test.ts.)
describe("a superseded owner's late ambiguous end beside another attempt that may have acted (possible duplicate)", () => {
  const lateAmbiguous: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (TimeoutError) from a superseded owner', status: null, reopen: true };
  const raced = (b: 'success' | 'ambiguous', lateFirst: boolean): Rec => race(lateAmbiguous, b, lateFirst);

  it.each([true, false])('its own 201 (late end first: %s): escalated, low confidence, effects unknown, "1 or 2"', (lateFirst) => {
    const r = raced('success', lateFirst);
    expect(r.rec).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(lateDeliveryUnsettled(r.rec)).toBe(true);
    const x = explain(r.rec, policy({ now: r.t }));
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    expect(x.diagnosis.summary).toBe(
      'Attempt 2 got 201; attempt 1 ended ambiguous late (superseded owner owner-a): possible duplicate with attempt 2, unless the provider deduped them by key; later calls replay it.',
    );
    expect(x.escalation).toBe('Possible duplicate: check at the provider. Attempt 1 ended ambiguous late and attempt 2 got 201 too; nothing proves the provider deduped them by key.');
    expect(x.plan[0]).toMatch(/^Possible duplicate: check at the provider for two effects for ref 'A-17' \(key …4abc\), from attempts 1 and 2/);
    expect(x.verification[0]).toMatch(/^At the provider: 1 or 2 effect .* Two would be a duplicate\./);
    expect(x.verification.join('\n')).not.toMatch(/exactly one/);
  });

  it('a provider that dedupes by key, both sends before the cutoff: one effect, nothing to do', () => {
    const x = explain(raced('success', false).rec, policy({ providerDedupes: true }));
    expect(x).toMatchObject({ escalate: false, handoff: { effects: 1 } });
    expect(x.verification[0]).toMatch(/^At the provider: exactly one effect/);
  });

  it('both ended ambiguous: "0, 1 or 2", escalated even with a lookup registered (a found cannot count them)', () => {
    const r = raced('ambiguous', false);
    expect(r.rec.state).toBe('ambiguous');
    const x = explain(r.rec, policy({ lookupRegistered: true, now: r.t }));
    expect(x.handoff.effects).toBe('unknown');
    expect(x.escalate).toBe(true);
    expect(x.escalation).toMatch(/^Possible duplicate: check at the provider\. Attempt 1 ended ambiguous late and attempt 2 may have acted too/);
    expect(x.verification[0]).toMatch(/^At the provider: 0, 1 or 2 effect/);
  });

  it('not beside an attempt a settled "absent" cleared, nor once a settled "absent" came after the late end', () => {
    // B's attempt 2 ended ambiguous and a settled "absent" cleared it; then A's late end: only A's send may have acted
    const cleared = raced('ambiguous', false);
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'none' }, B);
    r.start(B).on({ type: 'attempt_finished', class: 'ambiguous', status: null, reason: 'headers timeout', result: null }, B);
    r.on({ type: 'lookup_absent', detail: 'none' }, B).on(lateAmbiguous, A);
    expect(r.rec.state).toBe('ambiguous');
    expect(explain(r.rec, policy()).escalation ?? '').not.toMatch(/Possible duplicate/);
    // a settled "absent" after the late end settles it (lateDeliveryUnsettled false): B's 201 is the one effect
    const settled = new Rec().start();
    settled.t += LEASE_MS;
    settled.on({ type: 'acquire', owner: B, leaseExpiresAt: settled.t + LEASE_MS }, B).on(lateAmbiguous, A).on({ type: 'lookup_absent', detail: 'none' }, B);
    settled.start(B).on({ type: 'attempt_finished', class: 'success', status: 201, reason: 'status 201', result: snapshot(201) }, B);
    expect(lateDeliveryUnsettled(settled.rec)).toBe(false);
    expect(explain(settled.rec, policy())).toMatchObject({ escalate: false, handoff: { effects: 1 } });
    expect(cleared.rec.attempts).toHaveLength(2);
  });
});

// Regression: a pending record with a cancel requested (the cancel landed while an attempt was out,
// which then got a 503 or never left, and the call stopped). The plans said "call again with the same
// ref and payload to send it" (never_sent) or "Call again …: the same key is reused"
// (retryable_backoff); the engine's next call re-applies the cancel before any send (execute.ts, step)
// and sends nothing. (The engine's sequence: test/e2e/explain-truth.test.ts.)
describe('a pending record with a cancel requested', () => {
  /** an attempt out, a cancel requested meanwhile (it stays in flight), then `cls`; the call stops */
  const cancelledWhileOut = (r: Rec, cls: 'retryable' | 'not_sent'): Rec =>
    r
      .start()
      .on({ type: 'cancel' }, B)
      .on({ type: 'attempt_finished', class: cls, status: cls === 'retryable' ? 503 : null, reason: cls === 'retryable' ? 'status 503' : 'aborted before it was sent', result: null })
      .stop('RETRIES_EXHAUSTED', 'attempts');
  const sends = /to send it|^Call again|key \S+ is resent|the next call (sends|resends)|a call resends/m;

  it.each<['retryable' | 'not_sent', DiagnosisCode]>([
    ['retryable', 'retryable_backoff'],
    ['not_sent', 'never_sent'],
  ])('%s: the next call cancels it and sends nothing, as the state machine does', (cls, code) => {
    const r = cancelledWhileOut(new Rec(), cls);
    expect(r.rec).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    for (const over of [{}, { lookupRegistered: true }, { providerDedupes: true }]) {
      const x = explain(r.rec, policy(over));
      expect(x.diagnosis.code).toBe(code);
      expect(x.diagnosis.summary).toMatch(/ A cancel was requested at \S+: the next call cancels it and sends nothing\.$/);
      expect(x.plan[0]).toMatch(/^Nothing is sent: a cancel was requested at \S+; the next call with this ref \(or client\.cancel\(scope\)\) applies it and the operation ends cancelled\.$/);
      expect(x.plan.join('\n')).not.toMatch(sends);
      expect(x).toMatchObject({ escalate: false, handoff: { effects: 0 } });
      expect(x.verification[0]).toMatch(/^At the provider: no effect/);
    }
    // the call re-applies the cancel: cancelled, no attempt
    expect(applyEvent(r.rec, { type: 'cancel' }, r.t + 10, A)).toMatchObject({ state: 'cancelled', attempts: r.rec.attempts });
  });

  it('an earlier attempt only cleared for a same-key resend: the next call reconciles it, nothing is resent', () => {
    const r = cancelledWhileOut(new Rec().attempt('ambiguous', null, 'headers timeout').on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' }), 'retryable');
    expect(r.rec).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    const withLookup = explain(r.rec, policy({ lookupRegistered: true, providerDedupes: true }));
    expect(withLookup.diagnosis.summary).toMatch(/A cancel was requested at \S+: the next call sends nothing and reconciles it, as an attempt may have reached the provider\.$/);
    expect(withLookup.plan).toEqual([
      expect.stringMatching(/^Nothing is resent: a cancel was requested at \S+, but an attempt may have reached the provider; the next call with this ref re-applies the cancel, sends nothing and reconciles it/),
      "Look up first: call again with the same ref and payload (client.recover() skips a pending record); the lookup registered for 'create-order' asks the provider whether it took effect.",
      'found → succeeded (delivery won over the cancel requested); absent → cancelled, nothing is sent; unknown → it stays ambiguous: escalate then.',
    ]);
    expect(withLookup.verification[1]).toMatch(/shows succeeded \(found\) or cancelled \(absent\)/);
    const noLookup = explain(r.rec, policy({ providerDedupes: true }));
    expect(noLookup.plan.join('\n')).not.toMatch(sends);
    expect(noLookup.plan.at(-1)).toMatch(/and call again: found settles it as succeeded; absent cancels it\.$/);
    expect(noLookup.escalation).toMatch(/a cancel was requested/);
    // the call re-applies the cancel: back to reconciliation; a settled "absent" then cancels, a same-key resend is never written
    const reopened = applyEvent(r.rec, { type: 'cancel' }, r.t + 10, A);
    expect(reopened.state).toBe('ambiguous');
    expect(applyEvent(reopened, { type: 'lookup_absent', detail: 'none' }, r.t + 20, A).state).toBe('cancelled');
  });
});

// Regression: the possible duplicate counted at most two sends. Two superseded owners (A, then B)
// each got a late 201 (or ended ambiguous late) after the next owner's lookup said absent, beside C's
// own 201: at a provider that ignores keys, three effects; explain said "1 or 2". And with C's own
// attempt refused (503), B's late 201 was not counted at all (its attempt had been cleared by C's
// "absent" before the late answer came): "At the provider: 1 effect", effects 1, where two happened.
// (The engine's sequence: test/e2e/explain-truth.test.ts.)
describe('late deliveries of two superseded owners (three sends may have acted)', () => {
  const lateOf = (what: 'success' | 'ambiguous'): RecordEvent =>
    what === 'success'
      ? { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }
      : { type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (TimeoutError) from a superseded owner', status: null, reopen: true };
  /** A sends; B takes over (absent) and sends; C takes over (absent) and gets `c`; then A's and B's late outcomes. */
  function threeOwners(a: 'success' | 'ambiguous', b: 'success' | 'ambiguous', c: 'success' | 'retryable'): Rec {
    const C = 'owner-c';
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'none', askedGeneration: r.rec.generation }, B).start(B);
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: C, leaseExpiresAt: r.t + LEASE_MS }, C).on({ type: 'lookup_absent', detail: 'none', askedGeneration: r.rec.generation }, C).start(C);
    r.on(
      c === 'success'
        ? { type: 'attempt_finished', class: 'success', status: 201, reason: 'status 201', result: snapshot(201) }
        : { type: 'attempt_finished', class: 'retryable', status: 503, reason: 'status 503', result: null },
      C,
    );
    if (c === 'retryable') r.stop('RETRIES_EXHAUSTED', 'attempts');
    return r.on(lateOf(a), A).on(lateOf(b), B);
  }

  it.each<['success' | 'ambiguous', 'success' | 'ambiguous']>([
    ['success', 'success'],
    ['ambiguous', 'ambiguous'],
    ['success', 'ambiguous'],
  ])("late %s and late %s beside C's 201: up to three effects, all three attempts named", (a, b) => {
    const r = threeOwners(a, b, 'success');
    expect(r.rec.state).toBe('succeeded');
    const x = explain(r.rec, policy({ now: r.t }));
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    expect(x.verification[0]).toMatch(/^At the provider: 1, 2 or 3 effect for ref 'A-17' \(key …4abc\)\. Two would be a duplicate\./);
    expect(x.plan[0]).toMatch(/^Possible duplicate: check at the provider for up to 3 effects for ref 'A-17' \(key …4abc\), from attempts 1, 2 and 3; undo any extra one by hand\./);
    expect(x.escalation).toMatch(/3 sends may have acted \(attempts 1, 2 and 3\)/);
    // beside the late one explain names (the first late success, else the last late ambiguous end), the other two
    expect(x.diagnosis.summary).toContain(`possible duplicate with attempts ${a === 'success' ? '2 and 3' : '1 and 3'}, unless`);
    // a provider that dedupes, every send landed while it remembered the key: one
    expect(explain(r.rec, policy({ providerDedupes: true, now: r.t }))).toMatchObject({ escalate: false, handoff: { effects: 1 } });
  });

  it("two late 201s beside C's 503: not one effect but one or two, escalated as a possible duplicate", () => {
    const r = threeOwners('success', 'success', 'retryable');
    expect(r.rec.state).toBe('ambiguous');
    for (const over of [{}, { lookupRegistered: true }]) {
      const x = explain(r.rec, policy({ ...over, now: r.t + 2 * LEASE_MS }));
      expect(x.handoff.effects).toBe('unknown');
      expect(x.confidence).toBe('low');
      expect(x.escalation).toMatch(/Possible duplicate: check at the provider\. Attempt 1 got 201 late and attempt 2 .* too/);
      expect(x.verification[0]).toMatch(/^At the provider: 1 or 2 effect/);
    }
  });
});

// Regression: a pending record with a cancel requested, an attempt possibly delivered, a lookup
// registered, and the key past 90 % of the provider's retention. explain escalated "The key is stale:
// … a resend might act twice" and put "Do not resend with key …" first, with confidence lowered; but
// after a cancel the engine never resends (execute.ts: the next call re-applies the cancel and
// reconciles; "unknown" leaves it ambiguous, an "absent" cancels it), so the key's age changes nothing
// and the lookup settles it. (The engine: test/e2e/explain-truth.test.ts.)
describe('a stale key on a record with a cancel requested', () => {
  const stale = { providerRetentionMs: 60_000, now: T0 + 120_000 };
  const rec = (): Rec =>
    new Rec()
      .attempt('ambiguous', null, 'headers timeout')
      .on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' })
      .start()
      .on({ type: 'cancel' }, B)
      .on({ type: 'attempt_finished', class: 'retryable', status: 503, reason: 'status 503', result: null })
      .stop('RETRIES_EXHAUSTED', 'attempts');

  it.each<[string, (r: Rec) => Rec]>([['pending', (r) => r]])('%s, a lookup registered: no stale-key escalation, the lookup settles it, nothing is resent', (_, then) => {
    const r = then(rec());
    for (const over of [{ lookupRegistered: true }, { lookupRegistered: true, providerDedupes: true }]) {
      const x = explain(r.rec, policy({ ...stale, ...over }));
      expect(x.handoff.retention.keyStale).toBe(true);
      expect(x.escalate).toBe(false);
      expect(x.escalation).toBeUndefined();
      expect(x.confidence).toBe('medium'); // the 503: one observation, not lowered for a key nothing will resend
      expect(x.plan.join('\n')).not.toMatch(/Do not resend with key/);
      expect(x.plan.join('\n')).toMatch(/absent → cancelled, nothing is sent; unknown → it stays ambiguous: escalate then\./);
    }
    // what the plan says the lookup's answers do
    const reopened = r.rec.state === 'pending' ? applyEvent(r.rec, { type: 'cancel' }, r.t + 10, A) : r.rec;
    expect(reopened.state).toBe('ambiguous');
    expect(applyEvent(reopened, { type: 'lookup_absent', detail: 'none' }, r.t + 20, A).state).toBe('cancelled');
  });

  it('without a cancel the stale key still escalates (a lookup saying absent lets the next call resend)', () => {
    const r = new Rec().attempt('ambiguous', null, 'headers timeout').stop('AMBIGUOUS_OUTCOME', 'unknown');
    const x = explain(r.rec, policy({ ...stale, lookupRegistered: true }));
    expect(x.escalation).toMatch(/^The key is stale/);
    expect(x.plan[0]).toMatch(/^Do not resend with key/);
  });
});

// Regression: every attempt in the record never left, but a superseded owner's late outcome says the
// provider answered (a late 201: the effect happened), and a same-key resend cleared the record
// (pending). explain said never_sent, "Nothing reached the provider … call again … to send it", "no
// effect", high confidence, beside handoff.effects 1; under a policy without providerDedupes that
// call is a second effect. The engine never writes this record with distinct owners (a superseded
// owner's attempt stays open in the record), but applyEvent takes it (test/property/explain-facts.test.ts
// reaches it), so explain must read it right.
describe('attempts all not_sent, with a late delivery', () => {
  const late201: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
  const lateRec = (): Rec => new Rec().attempt('not_sent', null, 'ECONNREFUSED').on(late201, B);

  it('pending after a same-key resend: not never_sent; a call again only where the provider dedupes', () => {
    const r = lateRec().on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' });
    expect(r.rec.state).toBe('pending');
    const x = explain(r.rec, policy());
    expect(x.diagnosis.code).toBe('timeout_before_response');
    expect(x.diagnosis.summary).toMatch(/^A superseded owner got a success late/);
    expect(x.handoff.effects).toBe(1);
    expect(x.confidence).toBe('medium'); // the late 201: one observation
    expect(x.escalate).toBe(true);
    expect(x.plan.join('\n')).not.toMatch(/Nothing reached the provider|to send it/);
    expect(x.verification.join('\n')).not.toMatch(/no effect/);
    expect(explain(r.rec, policy({ providerDedupes: true })).plan[0]).toMatch(/^Call again with the same ref and payload: the provider dedupes by key/);
  });

  it('ambiguous: stale_lease, not high confidence on "nothing was sent"', () => {
    const r = lateRec();
    expect(r.rec.state).toBe('ambiguous');
    const x = explain(r.rec, policy({ lookupRegistered: true, now: T0 + LEASE_MS + 1_000 }));
    expect(x.diagnosis.code).toBe('stale_lease');
    expect(x.confidence).toBe('medium');
    expect(x.handoff.effects).toBe(1);
  });

  it('a late 503 (the provider answered "not processed"): no effect, but not "nothing reached the provider"', () => {
    const r = new Rec()
      .attempt('not_sent', null, 'ECONNREFUSED')
      .on({ type: 'evidence', kind: 'late_response', detail: 'late retryable outcome (status 503) from a superseded owner', status: 503 }, B);
    expect(r.rec.state).toBe('pending');
    const x = explain(r.rec, policy());
    expect(x.diagnosis.code).not.toBe('never_sent');
    expect(x.handoff.effects).toBe(0);
    expect(x.diagnosis.summary).not.toMatch(/Nothing reached the provider/);
  });
});

// Regression: client.cancel() (or the next call) re-applied the cancel on a pending record whose
// earlier attempt was only cleared for a same-key resend: the record turns ambiguous with a 503 as its
// last attempt. explain said unknown, "No rule fits … decide by hand", escalated, where client.recover()
// or the next call looks it up (found → succeeded, absent → cancelled) and sends nothing. (The engine:
// test/e2e/explain-truth.test.ts.)
describe('ambiguous after a cancel re-applied on a record only cleared for a same-key resend', () => {
  const rec = (): Rec =>
    new Rec()
      .attempt('ambiguous', null, 'headers timeout')
      .on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' })
      .start()
      .on({ type: 'cancel' }, B)
      .on({ type: 'attempt_finished', class: 'retryable', status: 503, reason: 'status 503', result: null })
      .stop('RETRIES_EXHAUSTED', 'attempts')
      .on({ type: 'cancel' }, B);

  it('is an unsettled outcome the lookup settles, not "no rule fits"', () => {
    const r = rec();
    expect(r.rec).toMatchObject({ state: 'ambiguous', lease: null });
    for (const over of [{ lookupRegistered: true }, { lookupRegistered: true, providerDedupes: true }]) {
      const x = explain(r.rec, policy(over));
      expect(x.diagnosis.code).toBe('timeout_before_response');
      expect(x.diagnosis.summary).toMatch(/^An earlier attempt may have reached the provider .*; attempt 2 then got status 503\. Not resent/);
      expect(x.escalate).toBe(false);
      expect(x.plan).toEqual([
        "Look up first: run client.recover() (or call again with the same ref and payload); the lookup registered for 'create-order' asks the provider whether it took effect.",
        'found → succeeded (delivery won over the cancel requested); absent → cancelled, nothing is sent; unknown → it stays ambiguous: escalate then.',
      ]);
      // a stale key changes nothing after a cancel
      expect(explain(r.rec, policy({ ...over, providerRetentionMs: 60_000, now: T0 + 120_000 })).escalate).toBe(false);
    }
    // without a lookup: escalated for that reason, not "no rule fits"
    expect(explain(r.rec, policy()).escalation).toMatch(/^The outcome is unknown and nothing can settle it automatically: a cancel was requested/);
    expect(applyEvent(r.rec, { type: 'lookup_absent', detail: 'none' }, r.t + 10, A).state).toBe('cancelled');
    expect(applyEvent(r.rec, { type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }, r.t + 10, A).state).toBe('succeeded');
  });
});

// Regression: a client.run() operation (request null) left ambiguous, explained by a client with a
// lookup registered under its action name. explain planned "Look up first: run client.recover() …;
// the lookup registered for … asks the provider", no escalation; but neither recover() nor a call
// uses registered lookups for a client.run() operation (recover.ts: it leaves it ambiguous; a run()
// reconciles only with its own spec.lookup): nothing settles it, and a person must. (The engine:
// test/e2e/explain-truth.test.ts.)
describe('a client.run() operation and the lookups registered on the client', () => {
  const runRec = (): OperationRecord => {
    const r = new Rec();
    r.rec = { ...r.rec, request: null };
    return r.attempt('ambiguous', null, 'attempt timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec;
  };

  it('counts no registered lookup: escalated, and the plan names client.run()\'s own lookup', () => {
    const x = explain(runRec(), policy({ lookupRegistered: true }));
    expect(x.handoff.retryPolicy.lookupRegistered).toBe(false);
    expect(x.escalate).toBe(true);
    expect(x.plan.join('\n')).not.toMatch(/Look up first|the lookup registered/);
    expect(x.plan.at(-1)).toMatch(/^Then call client\.run\(\) again with a lookup \(spec\.lookup\) that reports what you found: found settles it as succeeded/);
    // a client.fetch() operation: the registered lookup does settle it
    expect(explain(new Rec().attempt('ambiguous', null, 'attempt timeout').stop('AMBIGUOUS_OUTCOME', 'unknown').rec, policy({ lookupRegistered: true })).escalate).toBe(false);
  });
});

// Regression: explain was more cautious than the engine in two cases (src/engine/execute.ts, `step`:
// a pending record is reconciled first, `reconcile_first`, exactly where record.ts's
// `resendNeedsDedupe` holds and the client does not trust the provider's dedupe; else it is sent from).
describe('explain says what the next call does on a pending record', () => {
  // (a) a 409 "in progress" and then a 503: no attempt a dedupe alone cleared; the engine sends (same key)
  const after409 = (): Rec => new Rec().attempt('retryable', 409, '409 in progress').attempt('retryable', 503, 'status 503').stop('RETRIES_EXHAUSTED', 'attempts');

  it('after a 409 "in progress" alone, under a policy without providerDedupes: call again later (the engine sends), no escalation', () => {
    const r = after409();
    expect(r.rec.state).toBe('pending');
    expect(resendNeedsDedupe(r.rec)).toBe(false); // the engine sends from it
    for (const over of [{}, { lookupRegistered: true }]) {
      const x = explain(r.rec, policy(over));
      expect(x.diagnosis.code).toBe('timeout_before_response');
      expect(x.diagnosis.summary).toBe('Attempt 1 got 409 "in progress": a request with this key was being processed at the provider, which tracks the key; attempt 2 then got status 503. It may be resent with the same key.');
      expect(x.escalate).toBe(false);
      expect(x.plan[0]).toMatch(/^Call again later with the same ref and payload: the provider answered 409 because a request with key …4abc was still being processed; it replays that outcome once done\.$/);
      expect(x.plan.join('\n')).not.toMatch(/Do not call again/);
      expect(x.verification[0]).toMatch(/^At the provider: at most one effect/);
    }
    expect(() => applyEvent(r.rec, { type: 'reconcile_first', detail: 'x' }, r.t + 10, B)).toThrow();
  });

  // (b) a record only a dedupe cleared, under a policy with providerDedupes whose key is past 90 % of
  // the provider's retention: the engine does not trust the dedupe, reconciles first and asks the lookup
  const cleared = (): Rec => new Rec().attempt('ambiguous', null, 'headers timeout').on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' }).stop('ABORTED', 'aborted');
  const stale = { providerDedupes: true, providerRetentionMs: 60_000, now: T0 + 120_000 };

  it('a record only a dedupe cleared, the key past the retention, a lookup: the lookup-first plan, not only "Do not resend with key"', () => {
    const r = cleared();
    expect(resendNeedsDedupe(r.rec)).toBe(true);
    const x = explain(r.rec, policy({ ...stale, lookupRegistered: true }));
    expect(x.diagnosis.code).toBe('timeout_before_response');
    const plan = x.plan.join('\n');
    expect(plan).toMatch(/^Nothing is resent blind: the record was cleared only for a same-key resend \(key …4abc\), not by a lookup, and an earlier attempt may have acted, and the key is past \S+ \(90 % of the provider's retention\); the next call sends nothing first, turns the record ambiguous and looks it up\.$/m);
    expect(plan).toMatch(/^Look up first: run client\.recover\(\) \(or call again with the same ref and payload\)/m);
    expect(plan).toMatch(/; unknown → it stays ambiguous: escalate then\.$/m);
    expect(plan).not.toMatch(/^Call again|the resend cannot act twice/m);
    // the stale key's caution stays, as for an ambiguous record with a lookup (an "absent" lets the next call resend)
    expect(x.escalation).toMatch(/^The key is stale/);
    expect(applyEvent(r.rec, { type: 'reconcile_first', detail: 'x' }, r.t + 10, B).state).toBe('ambiguous');
  });

  it('the same without a lookup: such a call sends nothing and ends with AmbiguousOutcomeError; no advice to call from a deduping client', () => {
    const x = explain(cleared().rec, policy(stale));
    expect(x.escalate).toBe(true);
    expect(x.plan[0]).toMatch(/^Do not call again to resend it: .*, and the key is past \S+ \(90 % of the provider's retention\)\. Such a call sends nothing: it turns the record ambiguous and ends with AmbiguousOutcomeError\.$/);
    expect(x.plan[1]).toBe("Check at the provider whether an effect exists for ref 'A-17'; register a lookup for 'create-order' (createClient({ lookups })) and call again.");
    expect(x.escalation).toMatch(/^The record may be resent only with the same key to a provider that dedupes, and the provider may no longer recognise the key\./);
  });
});

describe('the hand-off of a client.run() operation', () => {
  it('defines its fingerprint as the canonical payload, not a request it never had', async () => {
    const client = createClient({ store: memoryStore(), tenant: 't1' });
    await client.run({ action: 'charge', ref: 'C-1', payload: { amount: 5, currency: 'eur' } }, async () => ({ id: 'pi_1' }));
    const x = await client.explain({ action: 'charge', ref: 'C-1' });
    expect(x?.handoff.request).toBeNull();
    expect(x?.handoff.canonicalPayload).not.toMatch(/method|URL/);
    expect(x?.handoff.canonicalPayload).toMatch(/payload/);
    expect(x?.handoff.canonicalPayload).toMatch(/RFC 8785/);
    await client.close();
  });
});

describe('a key conflict that answered a same-key resend', () => {
  /** attempt 1 ended ambiguous (a 500 after commit), the provider dedupes: attempt 2 resent, refused as key reuse */
  const resent = (): Rec =>
    new Rec().attempt('ambiguous', 500, 'status 500').on({ type: 'resend_after_ambiguous', detail: 'the provider dedupes' }).attempt('conflict', 422, 'idempotency key mismatch');

  it('ambiguous (as the engine leaves it): look up first, never a resend nor a new ref, even where the provider dedupes', () => {
    const rec = resent().stop('AMBIGUOUS_OUTCOME', 'unknown').rec;
    expect(rec.state).toBe('ambiguous');
    for (const over of [{}, { providerDedupes: true }, { lookupRegistered: true }, { providerDedupes: true, lookupRegistered: true }]) {
      const x = explain(rec, policy(over));
      expect(x.diagnosis.code).toBe('timeout_before_response');
      expect(x.diagnosis.summary).toMatch(/^Attempt 2, a resend with the same key and the same payload, was refused as key reuse with other content \(idempotency key mismatch\): the provider saw the key before, most likely from attempt 1/);
      const plan = x.plan.join('\n');
      expect(plan).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1 may have taken effect/m);
      expect(plan).not.toMatch(/Call again with the same ref|resends with the same key|send it with a new ref|needs a new ref/);
      expect(x.handoff.effects).toBe('unknown');
      expect(x.escalate).toBe(!over.lookupRegistered);
      if (over.lookupRegistered) expect(plan).toMatch(/absent → the conflict stands: the record ends failed/);
    }
  });

  it('failed, as an earlier version ended it: not payload_changed (whose advice is a new ref) but unknown, escalated, check at the provider', () => {
    const r = resent().rec;
    // what the state machine wrote before: the conflict made the record failed at once
    const legacy: OperationRecord = { ...r, state: 'failed', lease: null, error: { code: 'IDEMPOTENCY_CONFLICT', message: 'provider reported key reuse: idempotency key mismatch' } };
    const x = explain(legacy, policy());
    expect(x.diagnosis.code).toBe('unknown');
    expect(x.diagnosis.summary).toMatch(/most likely from attempt 1 \(status 500\), which may have taken effect/);
    expect(x.plan[0]).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1 reached the provider/);
    expect(x.escalate).toBe(true);
    expect(x.escalation).toMatch(/the request may have taken effect; check it/);
    expect(x.handoff.effects).toBe('unknown');
  });

  it('after a settled "absent": the conflict stands, payload_changed as on attempt 1', () => {
    const rec = resent().on({ type: 'lookup_absent', detail: 'lookup reported no such operation' }).rec;
    expect(rec.state).toBe('failed');
    const x = explain(rec, policy({ lookupRegistered: true }));
    expect(x.diagnosis.code).toBe('payload_changed');
    expect(x.handoff.effects).toBe(0);
  });

  // Review: the conflict stood on a settled "absent" (failed, IDEMPOTENCY_CONFLICT), then the superseded
  // owner whose attempt 1 was still out got its 201 late (kept as evidence on the terminal record). The
  // effect exists: payload_changed's plan ("send it with a new ref"; types.ts's `task.ref = randomUUID()`)
  // would make a second one. Also for the legacy failed record (no "absent" after the conflict).
  it.each([
    ['the conflict stood on a settled "absent"', true],
    ['an earlier version ended it failed at once', false],
  ])('then a superseded owner got its success late (%s): unknown, the contradiction escalated, never a new ref', (_name, absent) => {
    const r = new Rec().start();
    r.t += LEASE_MS;
    r.on({ type: 'acquire', owner: B, leaseExpiresAt: r.t + LEASE_MS }, B).on({ type: 'lookup_absent', detail: 'lookup reported no such operation', askedGeneration: r.rec.generation }, B);
    r.start(B).on({ type: 'attempt_finished', class: 'conflict', status: 422, reason: 'idempotency key mismatch', result: null }, B);
    expect(r.rec.state).toBe('ambiguous');
    if (absent) r.on({ type: 'lookup_absent', detail: 'lookup reported no such operation', askedGeneration: r.rec.generation }, B);
    else r.rec = { ...r.rec, state: 'failed', lease: null, error: { code: 'IDEMPOTENCY_CONFLICT', message: 'provider reported key reuse: idempotency key mismatch' } };
    expect(r.rec).toMatchObject({ state: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    r.on({ type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }, A);
    expect(r.rec.state).toBe('failed');
    for (const over of [{}, { lookupRegistered: true }, { providerDedupes: true }]) {
      const x = explain(r.rec, policy({ ...over, now: r.t }));
      expect(x.diagnosis.code).toBe('unknown');
      expect(x.diagnosis.summary).toMatch(/^The record ended failed, but owner owner-a got 201 late, after a takeover: the request took effect/);
      const plan = x.plan.join('\n');
      expect(plan).not.toMatch(/send it with a new ref|needs a new ref/);
      expect(plan).toMatch(/^Do not resend/m);
      expect(x.escalate).toBe(true);
      expect(x.escalation).toMatch(/^The evidence contradicts the record's end state \(failed\): the request took effect/);
      expect(x.verification.join('\n')).not.toMatch(/at most one|0 or 1/);
      expect(x.handoff.effects).toBe(1);
    }
  });

  it('after attempts that never left: payload_changed as on attempt 1', () => {
    const rec = new Rec().attempt('not_sent', null, 'ECONNREFUSED').attempt('conflict', 422, 'idempotency key mismatch').rec;
    expect(rec.state).toBe('failed');
    expect(explain(rec, policy()).diagnosis.code).toBe('payload_changed');
  });
});

// Regression: an ambiguous attempt that got an HTTP status (a 502, a 500 the provider may have committed,
// a "do not retry" hint, a 409 "in progress" with a false hint, a status whose body did not end) was
// explained as if no answer came ("may have reached the provider but no answer came"): an answer came,
// it just does not say whether the request took effect. Timeouts and resets keep their wording.
describe('an ambiguous attempt that got a status: an answer came', () => {
  const NO_ANSWER = /no answer|without an answer|without a response|no response|never answered/i;
  /** every text explain writes for a person */
  const texts = (x: Explanation): string[] => [x.diagnosis.summary, ...x.diagnosis.evidence, ...x.plan, ...x.verification, x.escalation ?? ''];
  const policies: Partial<ExplainPolicy>[] = [{}, { lookupRegistered: true }, { providerDedupes: true }];
  const answered: [number, string, string][] = [
    [502, 'status 502', 'Attempt 2 got 502: the provider answered, but its answer does not say whether the request took effect; not resent.'],
    [500, 'status 500, stripe-should-retry: false', 'Attempt 2 got 500 (status 500, stripe-should-retry: false): the provider answered, but its answer does not say whether the request took effect; not resent.'],
    [409, 'status 409 in progress, x-should-retry: false', 'Attempt 2 got 409 (status 409 in progress, x-should-retry: false): the provider answered, but its answer does not say whether the request took effect; not resent.'],
    [
      200,
      'reading body: status 200 came, but its body had not ended (12 bytes read) when the attempt was given up: attempt timeout',
      'Attempt 2 got 200 (reading body: status 200 came, but its body had not ended (12 bytes read) when the attempt was given up: attempt timeout): the provider answered, but its answer does not say whether the request took effect; not resent.',
    ],
  ];
  const rec = (status: number | null, reason: string): OperationRecord =>
    new Rec().attempt('retryable', 503, 'status 503').attempt('ambiguous', status, reason).stop('AMBIGUOUS_OUTCOME', 'unknown').rec;

  it.each(answered)('ambiguous after %i: says what came, and nowhere that no answer came', (status, reason, summary) => {
    for (const p of policies) {
      const x = explain(rec(status, reason), policy(p));
      expect(x.diagnosis.code).toBe('timeout_before_response');
      expect(x.diagnosis.summary).toBe(summary);
      for (const t of texts(x)) expect(t).not.toMatch(NO_ANSWER);
    }
  });

  it('pending after a 502 that a lookup then found absent: the answer came, the lookup cleared it', () => {
    const r = new Rec().attempt('ambiguous', 502, 'status 502').on({ type: 'lookup_absent', detail: 'absent: lookup reported no such operation' }).rec;
    expect(r.state).toBe('pending');
    const x = explain(r, policy({ lookupRegistered: true }));
    expect(x.diagnosis.summary).toBe(
      'Attempt 1 got 502: the provider answered, but its answer does not say whether the request took effect; a lookup then found no effect, so it may be resent with the same key.',
    );
    for (const t of texts(x)) expect(t).not.toMatch(NO_ANSWER);
  });

  it('succeeded through a lookup after a 502: not "ended without an answer"', () => {
    const r = new Rec().attempt('ambiguous', 502, 'status 502').on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }).rec;
    const x = explain(r, policy({ lookupRegistered: true }));
    expect(x.diagnosis.summary).toBe(
      'A lookup found the effect (status 200) after attempt 1 got 502: the provider answered, but its answer does not say whether the request took effect.',
    );
    for (const t of texts(x)) expect(t).not.toMatch(NO_ANSWER);
  });

  it.each([
    ['headers timeout', 'Attempt 2 may have reached the provider but no answer came (headers timeout); not resent.'],
    ['socket reset after send', 'Attempt 2 may have reached the provider but no answer came (socket reset after send); not resent.'],
  ])('a real no-answer case (%s) keeps its wording', (reason, summary) => {
    for (const p of policies) expect(explain(rec(null, reason), policy(p)).diagnosis.summary).toBe(summary);
    const pending = new Rec().attempt('ambiguous', null, reason).on({ type: 'lookup_absent', detail: 'absent: none' }).rec;
    expect(explain(pending, policy({ lookupRegistered: true })).diagnosis.summary).toBe(
      `Attempt 1 ended without an answer (${reason}); a lookup then found no effect, so it may be resent with the same key.`,
    );
    const found = new Rec().attempt('ambiguous', null, reason).on({ type: 'lookup_found', result: snapshot(200, 'lookup'), detail: 'found' }).rec;
    expect(explain(found, policy({ lookupRegistered: true })).diagnosis.summary).toBe('A lookup found the effect (status 200) after attempt 1 ended without an answer.');
  });
});

describe('a resume under the same owner id (a restarted process) of an open attempt', () => {
  it('reads as a resume in the evidence, not as another owner taking over; diagnosis and confidence as for any open attempt it left', () => {
    const open = new Rec().start();
    const resumed = new Rec().start().on({ type: 'acquire', owner: A, leaseExpiresAt: T0 + LEASE_MS }, A);
    const x = explain(resumed.rec, policy({ lookupRegistered: true }));
    expect(resumed.rec.evidence.map((e) => e.kind)).toEqual(['takeover']);
    expect(x.diagnosis.evidence).toContainEqual(expect.stringMatching(/^resume at .*: lease resumed by owner-a with attempt 1's end never recorded/));
    expect(x.diagnosis.evidence.filter((l) => /takeover|taken over/.test(l))).toEqual([]);
    // as a restart that took the record and did nothing yet: ambiguous, reconcile first
    const asAmbiguous = explain(open.on({ type: 'acquire', owner: B, leaseExpiresAt: T0 + LEASE_MS }, B).rec, policy({ lookupRegistered: true }));
    expect({ code: x.diagnosis.code, confidence: x.confidence, escalate: x.escalate }).toEqual({
      code: asAmbiguous.diagnosis.code,
      confidence: asAmbiguous.confidence,
      escalate: asAmbiguous.escalate,
    });
    expect(factsOf(resumed.rec, T0 + 1_000, DAY).concurrency).toEqual([]);
  });
});
