/**
 * `oncefetch-replayed: true` says "answered from the store; this call sent nothing". A call that sent,
 * whose answer came back after another owner took the operation over (its lease looked expired) and
 * settled it, follows that owner's record: it is not a replay, whatever its own answer was (c48ae25
 * made it so for a 201; a 502 or a 503 was still marked). One whose request never left (not_sent)
 * sent nothing, and is. Memory store shared by two clients; B's clock runs a minute ahead.
 */
import { describe, expect, it } from 'vitest';
import { REPLAYED_HEADER, createClient, memoryStore } from '../../src/index.js';
import type { OnceEvent } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const init = () => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{"sku":"A-17"}',
  once: { action: 'create-order', ref: 'A-17', lookup: async () => new Response('{"found":true}', { status: 200 }) },
});
const refused = () => Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) }));

async function lateAfterTakeover(answer: () => Promise<Response>) {
  const store = memoryStore();
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const sent = { a: 0, b: 0 };
  const events: OnceEvent['type'][] = [];
  const a = createClient({
    store,
    owner: 'a',
    leaseMs: 200,
    random: () => 0,
    onEvent: (e) => events.push(e.type),
    retry: { budget: false, attemptTimeoutMs: 5000 },
    fetch: (async () => {
      sent.a++;
      await gate;
      return answer();
    }) as typeof fetch,
  });
  const b = createClient({ store, owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, random: () => 0, retry: { budget: false }, fetch: (async () => (sent.b++, new Response('{}', { status: 201 }))) as typeof fetch });
  const first = a.fetch(URL_ORDERS, init());
  for (let i = 0; i < 100 && sent.a === 0; i++) await new Promise((r) => setTimeout(r, 5));
  // B takes A's (to B, expired) lease over; its lookup finds the effect A's request made
  const byB = await b.fetch(URL_ORDERS, init());
  expect({ status: byB.status, replayed: byB.headers.get(REPLAYED_HEADER) }).toEqual({ status: 200, replayed: null });
  open();
  const res = await first;
  return { res, sent, events, stats: a.stats() };
}

describe("a call that sent, its answer late after another owner took over and recorded the success", () => {
  it.each([
    ['502 (ambiguous)', 502],
    ['503 (retryable)', 503],
  ])('A got a %s: it gets the recorded success, not marked replayed, no replay counted', async (_name, status) => {
    const { res, sent, events, stats } = await lateAfterTakeover(async () => new Response('late', { status }));
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER), body: await res.text() }).toEqual({ status: 200, replayed: null, body: '{"found":true}' });
    expect(sent).toEqual({ a: 1, b: 0 });
    expect(events).toContain('late_evidence');
    expect(events).not.toContain('replay');
    expect(stats.replays).toBe(0);
  });

  it('A\'s request never left (ECONNREFUSED, not_sent): it sent nothing, so it is a replay', async () => {
    const { res, sent, events } = await lateAfterTakeover(refused);
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER) }).toEqual({ status: 200, replayed: 'true' });
    expect(sent).toEqual({ a: 1, b: 0 });
    expect(events).toContain('replay');
  });
});
