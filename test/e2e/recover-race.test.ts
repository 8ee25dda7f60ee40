/**
 * `client.recover()` and a call of the same client on one ref at once. recover() holds the record
 * under its own lease holder (`<owner>/recover`), so the call waits for it as it would for another
 * process. Regression: both used the client's owner id, so the call did not wait, and recover()'s
 * late "absent" (about attempt 1) was re-applied over the call's newer ambiguous attempt 2, which
 * had committed: the record went back to pending and the call sent a third time, two effects at a
 * provider that ignores keys. Memory and SQLite stores.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { LookupContext, OnceClient, OnceEvent, OnceStore } from '../../src/index.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider({ ignoreKeys: true });
});

afterEach(async () => {
  await provider.close();
  tmp.cleanup();
});

describe.each(['memory', 'sqlite'] as const)('recover() and a call on one ref, in one client (%s)', (kind) => {
  it('the call waits for the recovery; one effect, and no lookup answer is applied to a newer attempt', async () => {
    const ref = 'RR-1';
    const scope = { action: 'create-order', ref };
    const byRef = lookupByRef(provider.url);
    // recover()'s lookup (the first one asked) answers "absent" truthfully but late: when a third
    // lookup is asked (without the fix: the call's second, after its own send), or after 500 ms.
    let asked = 0;
    let release!: () => void;
    const late = new Promise<void>((resolve) => (release = resolve));
    const timer = setTimeout(release, 500);
    const lookup = async (ctx: LookupContext): Promise<Response | null> => {
      const n = ++asked;
      const answer = await byRef(ctx);
      if (n === 1) await late;
      if (n === 3) {
        release();
        await new Promise((r) => setTimeout(r, 150));
        return byRef(ctx);
      }
      return answer;
    };
    const events: OnceEvent[] = [];
    const client: OnceClient = createClient({
      store: kind === 'memory' ? memoryStore() : sqliteStore({ path: join(tmp.dir, 'once.db') }),
      lookups: { 'create-order': lookup },
      settleMs: 100,
      retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false },
      onEvent: (e) => events.push(e),
    });
    try {
      // An ambiguous record with no effect: reset before the commit, and that call's lookup was down.
      provider.fault({ kind: 'reset_before_commit' });
      const down = async (): Promise<never> => {
        throw new Error('lookup down');
      };
      await expect(client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { ...scope, lookup: down } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
      const first = await client.get(scope);
      expect(first).toMatchObject({ state: 'ambiguous', lease: null });
      asked = 0;
      await new Promise((r) => setTimeout(r, 150)); // past settleMs: an "absent" about attempt 1 is trusted

      // The next POST commits and its answer is lost.
      provider.fault({ kind: 'drop_after_commit' });
      const recovering = client.recover();
      while (asked === 0) await new Promise((r) => setTimeout(r, 5));
      const [report, res] = await Promise.all([recovering, client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: scope })]);

      expect(report).toMatchObject({ absent: [{ ref }], errors: [] });
      expect(res.status).toBe(200); // the lookup found the order the dropped POST created
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests).toHaveLength(2);
      const record = await client.get(scope);
      expect(record).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
      expect(record?.evidence.slice(first?.evidence.length).filter((e) => e.kind === 'lookup').map((e) => [e.owner.endsWith('/recover'), e.detail.split(':')[0]])).toEqual([
        [true, 'absent'],
        [false, 'found'],
      ]);
      expect(events.map((e) => e.type)).toContain('waiting');
      // called again, it replays
      const again = await client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: scope });
      expect(again.headers.get('oncefetch-replayed')).toBe('true');
      expect(provider.requests).toHaveLength(2);
    } finally {
      clearTimeout(timer);
      await client.close();
    }
  });
});

// Regression (review): a call whose claim was given up on at its deadline leaves that claim to be
// undone when it lands (`engine.abandoning`: its attempt closed as never sent, the lease released).
// recover() in the same client did not wait for that, as a call does: it took the landed record
// over first (its lease had expired meanwhile), read the opened attempt as possibly sent, and left
// the record ambiguous, nothing having been sent.
describe('recover() and a claim of this client being undone', () => {
  it('waits for the undo: the record ends pending with its attempt not_sent, not ambiguous', async () => {
    let clock = 1_000_000;
    const inner = memoryStore();
    let releaseClaim!: () => void;
    const claimHeld = new Promise<void>((r) => (releaseClaim = r));
    let holdNextWrite = false;
    const store: OnceStore = {
      ...inner,
      name: 'gated',
      claim: async (record) => {
        clock += 900; // the claim's write takes 900 ms of the 1 s lease it carries, then is held
        await claimHeld;
        return inner.claim(record);
      },
      // the first write after the late claim (the undo's) is slow: 20 ms
      compareAndSet: async (id, generation, next) => {
        if (holdNextWrite) {
          holdNextWrite = false;
          await new Promise((r) => setTimeout(r, 20));
        }
        return inner.compareAndSet(id, generation, next);
      },
      get: (id) => inner.get(id),
      list: (q) => inner.list(q),
      purge: (now) => inner.purge(now),
      close: () => inner.close(),
    };
    let sent = 0;
    const client = createClient({
      store,
      now: () => clock,
      leaseMs: 1_000,
      retry: { deadlineMs: 20, budget: false },
      fetch: (async () => {
        sent++;
        return new Response('{}', { status: 201 });
      }) as typeof fetch,
    });
    const scope = { action: 'create-order', ref: 'AB-1' };
    try {
      await expect(client.fetch('https://api.example.test/orders', { ...orderInit('AB-1'), once: scope })).rejects.toBeInstanceOf(DeadlineExceededError);
      clock += 150; // the lease the held claim carries has expired (not the undo's wait for it: 1 s from the give-up)
      holdNextWrite = true;
      releaseClaim();
      await new Promise((r) => setImmediate(r)); // the claim lands; its undo's first write is on its way
      const report = await client.recover();
      expect(report).toEqual({ resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] });
      const record = await client.get(scope);
      expect(record).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
      expect(sent).toBe(0);
    } finally {
      await client.close();
    }
  });
});
