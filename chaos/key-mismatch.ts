/**
 * A provider misbehaviour of the chaos run: the provider that dedupes by key answers a request whose
 * key it already holds with a key-mismatch error instead of what it holds for the key (its stored
 * replay, or its 409 "in progress"), as a provider that fingerprints something that varies between
 * attempts does. Seeded per ref: a share `rate` of the refs of the provider that dedupes get the
 * mismatch at every such answer, in one of three bodies real providers send.
 *
 * The request still reaches the provider, whose state is unchanged by it (a replay or a 409 makes
 * no effect); only the answer the client reads is replaced, in the client's transport, as
 * `test/e2e/conflict-on-resend.test.ts` does. Typical path: an attempt commits and its response is
 * dropped or delayed past the attempt timeout (`drop_after_commit`, `delay_after_commit`), the
 * same-key resend finds the key completed, and the conflict answers it after the effect; or the
 * first request is held before its commit (`delay_before_commit`) and the conflict answers the
 * resend before the effect lands.
 *
 * With `--crash-after-key` the provider can also hold a key without its effect: for a seeded share of
 * the refs that get the mismatch, the ref's first request records its key and never commits (see
 * {@link heldKeyFaults}), so every later request with the key is answered "in progress", which the
 * mismatch replaces; the resend's conflict then meets a lookup that says absent, once settled.
 *
 * @module
 */
import type { Fault } from '../src/testing/provider.js';
import type { RunPlan } from './plan.js';
import { isStrict, mulberry32, refName, subSeed } from './plan.js';

/** What the injected mismatch replaced: the provider's replay of the key's stored response, or its 409 "in progress". */
export type MismatchInstead = 'replay' | 'in_progress';

/** The answers a key mismatch is sent as (see `src/classify/status.ts`, KEY_MISMATCH_SIGNAL; bodies as in test/unit/classify.test.ts). */
const MISMATCH_ANSWERS = [
  // the IETF httpapi draft's problem document, as the loopback provider sends it
  {
    status: 422,
    contentType: 'application/problem+json',
    body: JSON.stringify({ type: 'https://oncefetch.test/problems/idempotency-key-mismatch', title: 'Idempotency-Key reused with a different payload', status: 422 }),
  },
  // Stripe
  {
    status: 400,
    contentType: 'application/json',
    body: JSON.stringify({ error: { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.' } }),
  },
  {
    status: 417,
    contentType: 'application/json',
    body: JSON.stringify({ message: 'Idempotency key already used with different request parameters' }),
  },
] as const;

/** Whether the provider answers the held key of `ref` with a mismatch (a seeded share `rate` of the refs of the provider that dedupes). */
export function mismatchesKey(plan: RunPlan, ref: string, rate: number): boolean {
  return rate > 0 && !isStrict(ref) && mulberry32(subSeed(plan.seed, 3_000_000 + Number(ref.slice(2))))() < rate;
}

/**
 * Whether the provider records the key of `ref`'s first request and never commits it (a seeded share
 * `rate` of the refs that {@link mismatchesKey}): as a provider that stores the key at the start of a
 * request and crashes before the effect, leaving the key held with no effect behind it.
 */
export function holdsKeyWithoutEffect(plan: RunPlan, ref: string, mismatchRate: number, rate: number): boolean {
  return rate > 0 && mismatchesKey(plan, ref, mismatchRate) && mulberry32(subSeed(plan.seed, 5_000_000 + Number(ref.slice(2))))() < rate;
}

/**
 * Longer than any run (~23 days): a request held this long never commits while the run's effect log
 * is read; the provider abandons it when it closes. Below a timer's limit (2^31 − 1 ms) with room for
 * the provider's processing time, which it adds: a longer timer fires at once, and the order is made.
 */
export const NEVER_MS = 2_000_000_000;

/**
 * The scripted faults that make the provider that dedupes hold keys without an effect: one per ref of
 * the pool that {@link holdsKeyWithoutEffect}, matching that ref, consumed by its first request, which
 * is held before its commit for {@link NEVER_MS}: its key is recorded "in progress" (the provider
 * marks a key in the tick that sees it) and no order is ever created for it. The attempt times out
 * (ambiguous); every later request with the key is answered 409 "in progress", which the mismatch
 * replaces (the ref is one that {@link mismatchesKey}, or the 409 would never end). A scripted fault
 * is taken before the seeded random one, whose draws are made all the same: the random faults of the
 * other requests are those of a run without it.
 */
export function heldKeyFaults(plan: RunPlan, mismatchRate: number, rate: number): Fault[] {
  const faults: Fault[] = [];
  for (let i = 0; i < plan.refs; i++) {
    const ref = refName(plan, i);
    if (holdsKeyWithoutEffect(plan, ref, mismatchRate, rate)) faults.push({ kind: 'delay_before_commit', delayMs: NEVER_MS, match: { ref } });
  }
  return faults;
}

function answerFor(plan: RunPlan, ref: string): (typeof MISMATCH_ANSWERS)[number] {
  const i = Math.floor(mulberry32(subSeed(plan.seed, 4_000_000 + Number(ref.slice(2))))() * MISMATCH_ANSWERS.length);
  return MISMATCH_ANSWERS[i] ?? MISMATCH_ANSWERS[0];
}

function urlOf(input: Parameters<typeof fetch>[0]): string {
  return typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
}

/** The `ref` of an order body (see `orderBody`), whatever form the engine passes it in. */
function refOf(body: RequestInit['body']): string | undefined {
  let text: string | undefined;
  if (typeof body === 'string') text = body;
  else if (body instanceof ArrayBuffer) text = new TextDecoder().decode(body);
  else if (ArrayBuffer.isView(body)) text = new TextDecoder().decode(body);
  if (text === undefined) return undefined;
  try {
    const ref = (JSON.parse(text) as { ref?: unknown }).ref;
    return typeof ref === 'string' ? ref : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `base`, but a `POST <dedupeUrl>/orders` of a ref that {@link mismatchesKey} whose answer shows the
 * provider held its key (a replay, `idempotent-replayed: true`; or a 409 "in progress") gets a key
 * mismatch instead; `onInjected` is told each time, before the answer is returned.
 */
export function mismatchingTransport(base: typeof fetch, dedupeUrl: string, plan: RunPlan, rate: number, onInjected: (instead: MismatchInstead, ref: string) => void): typeof fetch {
  if (rate <= 0) return base;
  return async (input, init) => {
    const res = await base(input, init);
    if ((init?.method ?? 'GET').toUpperCase() !== 'POST' || !urlOf(input).startsWith(`${dedupeUrl}/orders`)) return res;
    const ref = refOf(init?.body);
    if (ref === undefined || !mismatchesKey(plan, ref, rate)) return res;
    const instead: MismatchInstead | undefined = res.headers.get('idempotent-replayed') === 'true' ? 'replay' : res.status === 409 ? 'in_progress' : undefined;
    if (instead === undefined) return res;
    await res.body?.cancel();
    onInjected(instead, ref);
    const answer = answerFor(plan, ref);
    return new Response(answer.body, { status: answer.status, headers: { 'content-type': answer.contentType } });
  };
}
