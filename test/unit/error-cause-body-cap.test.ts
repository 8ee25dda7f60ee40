/**
 * The Response an error carries as its cause (an AmbiguousOutcomeError's 5xx, a terminal answer that
 * refused a same-key resend) keeps at most `maxStoredBodyBytes` of its body, the cap the record's
 * stored result already has, marked `oncefetch-body-truncated: true` when cut.
 *
 * Regression: the cause was built from the whole live body, so a provider's 32 MiB error page stayed
 * in memory for as long as the caller held the error (a copy of it in the cause, and one per joined
 * caller's clone), and `client.wrap()` keeps each keyless call's unknown outcome for `retry.deadlineMs`.
 * Measured (Node 20, ArrayBuffers after gc): a held error of a 32 MiB 500, 64.0 MiB before (Node's Response
 * keeps the bytes it is given besides its copy), 2.0 MiB now; four keyless 8 MiB 500s remembered by wrap(),
 * 64.0 MiB before, 8.0 MiB now.
 * What a caller gets back as its own answer (a first attempt's terminal 4xx, returned as fetch does) is
 * untouched: whole.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, TRUNCATED_HEADER, createClient, memoryStore } from '../../src/index.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const MiB = 1024 * 1024;
const BIG = 32 * MiB;
const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'A-17' };
const init = (ref = SCOPE.ref): RequestInit & { once: typeof SCOPE } => ({ method: 'POST', body: '{"sku":"A-17"}', once: { ...SCOPE, ref } });

/** ArrayBuffer bytes live after two full collections. */
async function retained(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return process.memoryUsage().arrayBuffers;
}

/** A transport answering every send with `status` and a fresh `size`-byte body (not kept here), counting sends. */
function bigAnswers(status: number, size: number) {
  const sent = { n: 0 };
  const fetch = (async () => {
    sent.n++;
    return new Response(new Uint8Array(size).fill(0x78), { status, headers: { 'content-type': 'text/html', 'content-length': String(size) } });
  }) as typeof globalThis.fetch;
  return { fetch, sent };
}

describe('the Response an error keeps as its cause is capped at maxStoredBodyBytes', () => {
  it('a 32 MiB 500: the held AmbiguousOutcomeError keeps under 4 MiB; its cause reads the first 1 MiB, marked truncated', async () => {
    const { fetch, sent } = bigAnswers(500, BIG);
    const client = createClient({ store: memoryStore(), fetch, random: () => 0, retry: { budget: false } });
    const before = await retained();
    const error = await client.fetch(URL_ORDERS, init()).catch((e: unknown) => e);
    const held = (await retained()) - before;
    console.log(`ArrayBuffers retained while the error is held: ${(held / MiB).toFixed(1)} MiB (body ${BIG / MiB} MiB)`);
    expect(sent.n).toBe(1);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect(held).toBeLessThan(4 * MiB);
    const cause = (error as Error).cause as Response;
    expect([cause.status, cause.headers.get(TRUNCATED_HEADER), cause.headers.get('content-length'), cause.headers.get('content-type')]).toEqual([500, 'true', null, 'text/html']);
    expect((await cause.arrayBuffer()).byteLength).toBe(MiB);
  });

  it("client.wrap() remembers each keyless unknown outcome's error for retry.deadlineMs: each keeps a capped body", async () => {
    const { fetch, sent } = bigAnswers(500, 8 * MiB);
    const client = createClient({ store: memoryStore(), fetch, random: () => 0, retry: { budget: false } });
    const wrapped = client.wrap();
    const before = await retained();
    for (let i = 0; i < 4; i++) {
      // (each error dropped at once: only what wrap() remembers is left)
      const error = await wrapped(URL_ORDERS, { method: 'POST', body: `{"n":${i}}` }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    }
    const held = (await retained()) - before;
    console.log(`ArrayBuffers retained by wrap() after 4 keyless 500s of 8 MiB: ${(held / MiB).toFixed(1)} MiB`);
    expect(sent.n).toBe(4);
    expect(held).toBeLessThan(12 * MiB);
  });

  it('two callers that joined one call each get a readable capped copy', async () => {
    const { fetch, sent } = bigAnswers(502, 3 * MiB);
    const client = createClient({ store: memoryStore(), fetch, random: () => 0, maxStoredBodyBytes: 1000, retry: { budget: false } });
    const errors = await Promise.all([client.fetch(URL_ORDERS, init()).catch((e: unknown) => e), client.fetch(URL_ORDERS, init()).catch((e: unknown) => e)]);
    expect(sent.n).toBe(1);
    for (const error of errors) {
      const cause = (error as Error).cause as Response;
      expect([cause.headers.get(TRUNCATED_HEADER), (await cause.text()).length]).toEqual(['true', 1000]);
    }
  });

  it('a body within the cap is kept whole and unmarked', async () => {
    const { fetch } = bigAnswers(504, 1000);
    const client = createClient({ store: memoryStore(), fetch, random: () => 0, retry: { budget: false } });
    const cause = ((await client.fetch(URL_ORDERS, init()).catch((e: unknown) => e)) as Error).cause as Response;
    expect([cause.headers.get(TRUNCATED_HEADER), cause.headers.get('content-length'), (await cause.text()).length]).toEqual([null, '1000', 1000]);
  });

  it("a first attempt's terminal 4xx is the caller's answer: returned whole, its stored replay capped as before", async () => {
    const { fetch, sent } = bigAnswers(422, 2 * MiB);
    const client = createClient({ store: memoryStore(), fetch, random: () => 0 });
    const res = await client.fetch(URL_ORDERS, init());
    expect([res.status, res.headers.get(TRUNCATED_HEADER), (await res.arrayBuffer()).byteLength]).toEqual([422, null, 2 * MiB]);
    const replay = await client.fetch(URL_ORDERS, init());
    expect([replay.headers.get(TRUNCATED_HEADER), (await replay.arrayBuffer()).byteLength]).toEqual(['true', MiB]);
    expect(sent.n).toBe(1);
  });
});
