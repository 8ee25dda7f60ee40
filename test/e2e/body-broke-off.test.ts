/**
 * A provider that answers with a status, starts the body and then drops the connection. The attempt
 * is ambiguous (the status came: the request may have taken effect; its body did not), never a
 * result to replay. Regression: the attempt was stored with status null, as if no answer had come,
 * and explain said the attempt "ended without an answer". The stored attempt keeps the status that
 * came; the record keeps no result. Loopback node:http server, both transports (the default one, and
 * Node's fetch), a framed body (Content-Length) and a chunked one.
 */
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();
const SCOPE = { tenant: 'default', action: 'create-order', ref: 'BR-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };

/** Writes the status and part of the body, then destroys the socket once the part is out. */
function breakOff(res: ServerResponse, framed: boolean): void {
  res.writeHead(200, { 'content-type': 'application/json', ...(framed ? { 'content-length': '100' } : {}) });
  res.write('{"id":"o-1",', () => setTimeout(() => res.socket?.destroy(), 20));
}

const transports = {
  'the default transport': undefined,
  "Node's fetch": globalThis.fetch,
};

describe('a status, then a body that breaks off', () => {
  for (const [transport, fetch] of Object.entries(transports)) {
    for (const framed of [true, false]) {
      it(`${transport}, ${framed ? 'Content-Length' : 'chunked'}: ambiguous, the attempt stored with status 200, no result, nothing resent or replayed`, async () => {
        let sends = 0;
        const url = await serve((req, res) => {
          sends++;
          req.resume();
          breakOff(res, framed);
        });
        const c = use(createClient({ store: memoryStore(), ...(fetch === undefined ? {} : { fetch }), random: () => 0, retry: { budget: false, maxAttempts: 3, baseDelayMs: 1 } }));
        const call = () => c.fetch(`${url}/orders`, { ...post, once: SCOPE });
        await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
        const rec = await c.get(SCOPE);
        expect(rec).toMatchObject({ state: 'ambiguous', result: null });
        expect(rec?.attempts.map((a) => [a.class, a.status])).toEqual([['ambiguous', 200]]);
        expect(rec?.attempts[0]?.reason).toMatch(/^reading body: /);
        // a later call neither replays the partial answer nor resends (no lookup, no dedupe)
        await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
        expect(sends).toBe(1);
        const x = await c.explain(SCOPE);
        expect(x?.diagnosis.code).toBe('timeout_before_response');
        expect(x?.handoff.attempts.map((a) => a.status)).toEqual([200]);
        expect(x?.diagnosis.summary).toMatch(/^Attempt 1 got 200 \(reading body: [^)]+\): the provider answered, but its answer does not say whether the request took effect/);
      });
    }
  }
});
