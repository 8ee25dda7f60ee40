/**
 * The ways a client with `providerDedupes` leaves a record `pending` after clearing it for a
 * same-key resend (its call stopped before the resend), for test/e2e/dedupe-assumption.test.ts
 * and recover-dedupe-pending.test.ts. Each needs the loopback provider (one effect lands) and a
 * client factory of the test file.
 */
import { expect } from 'vitest';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { OnceStore } from '../../src/stores/contract.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit } from './setup.js';

/** A POST of order `ref` through `c`, once-only as `create-order`. */
export function postOrder(provider: Provider | undefined, c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return c.fetch(`${provider?.url ?? ''}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref }, ...(signal === undefined ? {} : { signal }) });
}

export const failingLookup = async (): Promise<Response | null> => {
  throw new Error('lookup down');
};

/** The ways, by name; each leaves `ref` pending in `store` with one effect at the provider. */
export function leftPendingWays(provider: () => Provider | undefined, client: (options: OnceClientOptions) => OnceClient) {
  const post = (c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> => postOrder(provider(), c, ref, signal);
  return {
    /** attempt 1 dropped after its commit; the lookup fails; no attempt left: RETRIES_EXHAUSTED */
    'attempts exhausted after a failed lookup': async (store: OnceStore, ref: string) => {
      provider()?.fault({ kind: 'drop_after_commit', match: { ref } });
      const d = client({ store, providerDedupes: true, lookups: { 'create-order': failingLookup }, retry: { maxAttempts: 1 } });
      await expect(post(d, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    },
    /** attempt 1 dropped after its commit; no lookup; the call is aborted right after `resend_after_ambiguous` */
    'an abort right after resend_after_ambiguous': async (store: OnceStore, ref: string) => {
      provider()?.fault({ kind: 'drop_after_commit', match: { ref } });
      const abort = new AbortController();
      const reason = new Error('caller gave up');
      const d = client({
        store,
        providerDedupes: true,
        retry: { maxAttempts: 3 },
        onEvent: (e) => {
          if (e.type === 'lookup') abort.abort(reason);
        },
      });
      await expect(post(d, ref, abort.signal)).rejects.toBe(reason);
    },
    /** attempt 1 held before its commit past its timeout; the lookup says absent before settleMs (trusted for a same-key resend only) */
    'an "absent" asked before settleMs': async (store: OnceStore, ref: string) => {
      provider()?.fault({ kind: 'delay_before_commit', delayMs: 400, match: { ref } });
      const d = client({ store, providerDedupes: true, lookups: { 'create-order': lookupByRef(provider()?.url ?? '') }, retry: { maxAttempts: 1, attemptTimeoutMs: 100 } });
      await expect(post(d, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
      await new Promise((r) => setTimeout(r, 500)); // the held request commits
    },
  } as const;
}

/** Checks that `ref` was left pending for a dedupe resend, one effect at the provider. */
export async function expectLeftPending(store: OnceStore, provider: Provider | undefined, ref: string): Promise<void> {
  const record = await store.get(JSON.stringify(['default', 'create-order', ref]));
  expect(record?.state).toBe('pending');
  expect(record?.evidence.some((e) => /^(resend with the same key|absent before settleMs)/.test(e.detail))).toBe(true);
  expect(provider?.effectsFor(ref)).toBe(1);
}
