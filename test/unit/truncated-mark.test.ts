/**
 * A caller never gets a cut body without being told: every response whose body is a stored
 * snapshot capped at `maxStoredBodyBytes` carries `oncefetch-body-truncated: true`, replay or not,
 * and a snapshot never takes a transport's `Content-Length` over the bytes it actually gave.
 * Memory store, injected fetch; effects counted as calls of that fetch.
 */
import { describe, expect, it } from 'vitest';
import { REPLAYED_HEADER, TRUNCATED_HEADER, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClientOptions } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'A-17' };
const init = (lookup?: LookupFn): RequestInit & { once: object } => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{"sku":"A-17"}',
  once: { ...SCOPE, lookup },
});

/** A transport answering from `steps` in turn; `sent()` counts its calls. */
function transport(steps: (() => Response | Promise<Response>)[]) {
  let sent = 0;
  const fetch = (async () => {
    const step = steps[sent++];
    if (step === undefined) throw new Error(`unexpected fetch #${sent}`);
    return step();
  }) as typeof globalThis.fetch;
  return { fetch, sent: () => sent };
}

const client = (fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) =>
  createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, ...options.retry } });

const marks = (res: Response) => ({ replayed: res.headers.get(REPLAYED_HEADER), truncated: res.headers.get(TRUNCATED_HEADER) });

const stream = (...chunks: string[]): ReadableStream<Uint8Array> =>
  new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
      controller.close();
    },
  });

describe("a call's own lookup found a body longer than maxStoredBodyBytes", () => {
  const whole = JSON.stringify({ id: 'o-1', note: 'x'.repeat(100) });
  const lookup: LookupFn = async () => new Response(whole, { status: 200, headers: { 'content-type': 'application/json' } });
  const ambiguous = {
    '502 then lookup': () => new Response('bad gateway', { status: 502 }),
    'timeout then lookup': () => new Promise<Response>(() => undefined),
    'reset then lookup': () => Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) })),
  };

  it.each(Object.entries(ambiguous))('%s: the call gets the stored (cut) body marked truncated, not marked replayed', async (_name, first) => {
    const t = transport([first]);
    const c = client(t.fetch, { maxStoredBodyBytes: 10, retry: { attemptTimeoutMs: 50 } });
    const res = await c.fetch(URL_ORDERS, init(lookup));
    const text = await res.text();
    expect({ status: res.status, ...marks(res), content: text === whole ? 'whole' : text }).toEqual({ status: 200, replayed: null, truncated: 'true', content: whole.slice(0, 10) });
    expect(res.headers.get('content-length')).toBeNull();
    const again = await c.fetch(URL_ORDERS, init(lookup));
    expect(marks(again)).toEqual({ replayed: 'true', truncated: 'true' });
    expect(t.sent()).toBe(1);
  });

  it('a found body within the cap is whole and not marked', async () => {
    const t = transport([ambiguous['502 then lookup']]);
    const c = client(t.fetch, { maxStoredBodyBytes: 1000 });
    const res = await c.fetch(URL_ORDERS, init(lookup));
    expect({ ...marks(res), text: await res.text() }).toEqual({ replayed: null, truncated: null, text: whole });
  });
});

describe('a 2xx event stream from a custom fetch whose Content-Length says 0 but whose body has bytes', () => {
  const lying = () => new Response(stream('data: 1\n\n', 'data: 2\n\n'), { status: 200, headers: { 'content-type': 'text/event-stream', 'content-length': '0' } });

  it('the bytes read count, not the header: the live answer and the replay are whole', async () => {
    const t = transport([lying]);
    const c = client(t.fetch);
    const res = await c.fetch(URL_ORDERS, init());
    expect(await res.text()).toBe('data: 1\n\ndata: 2\n\n');
    const again = await c.fetch(URL_ORDERS, init());
    expect({ ...marks(again), length: again.headers.get('content-length'), text: await again.text() }).toEqual({ replayed: 'true', truncated: null, length: null, text: 'data: 1\n\ndata: 2\n\n' });
    expect(t.sent()).toBe(1);
  });

  it('over maxStoredBodyBytes, the replay is cut and marked truncated', async () => {
    const t = transport([lying]);
    const c = client(t.fetch, { maxStoredBodyBytes: 4 });
    await (await c.fetch(URL_ORDERS, init())).text();
    const again = await c.fetch(URL_ORDERS, init());
    expect({ ...marks(again), text: await again.text() }).toEqual({ replayed: 'true', truncated: 'true', text: 'data' });
  });
});

// The record of a passed-through stream is written before the stream is read (the caller reads it
// live), so one that turns out empty, with no Content-Length to say so first, cannot be told from a
// stream with bytes: in doubt, its replay is marked truncated (see `answered` in fetch-operation.ts).
describe('a 2xx event stream with no Content-Length that turns out empty', () => {
  it('is passed through live, and its replay is marked truncated (in doubt)', async () => {
    const t = transport([() => new Response(stream(), { status: 200, headers: { 'content-type': 'text/event-stream' } })]);
    const c = client(t.fetch);
    const res = await c.fetch(URL_ORDERS, init());
    expect(await res.text()).toBe('');
    const again = await c.fetch(URL_ORDERS, init());
    expect({ ...marks(again), text: await again.text() }).toEqual({ replayed: 'true', truncated: 'true', text: '' });
    expect(t.sent()).toBe(1);
  });
});

// A call that joined another in this process gets the live response's bytes (README: "gets the live
// response's headers"), whole: only a body that is the stored cut one, or a stream's empty stand-in,
// is marked truncated. Was: the joiner of a 100-byte body over a cap of 10 got all 100 bytes, with
// Content-Length: 100, marked oncefetch-body-truncated: true.
describe('a concurrent identical call joined to a live one', () => {
  const joined = async (answer: () => Response, cap: number) => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const t = transport([async () => (await gate, answer())]);
    const c = client(t.fetch, { maxStoredBodyBytes: cap });
    const first = c.fetch(URL_ORDERS, init());
    await new Promise((r) => setTimeout(r, 20));
    const second = c.fetch(URL_ORDERS, init());
    open();
    const [live, joiner] = await Promise.all([first, second]);
    return { t, c, live, joiner };
  };

  it('of a body over maxStoredBodyBytes: gets it whole, not marked truncated; a later replay is cut and marked', async () => {
    const whole = 'x'.repeat(100);
    const { t, c, live, joiner } = await joined(() => new Response(whole, { status: 201, headers: { 'content-type': 'text/plain', 'content-length': '100' } }), 10);
    expect({ ...marks(live), text: await live.text() }).toEqual({ replayed: null, truncated: null, text: whole });
    expect({ ...marks(joiner), length: joiner.headers.get('content-length'), text: await joiner.text() }).toEqual({ replayed: 'true', truncated: null, length: '100', text: whole });
    const again = await c.fetch(URL_ORDERS, init());
    expect({ ...marks(again), length: again.headers.get('content-length'), text: await again.text() }).toEqual({ replayed: 'true', truncated: 'true', length: null, text: whole.slice(0, 10) });
    expect(t.sent()).toBe(1);
  });

  it('of an event stream declaring its Content-Length: gets an empty body marked truncated, without that Content-Length', async () => {
    const events = 'data: 1\n\ndata: 2\n\n';
    const sse = () => new Response(stream(events), { status: 200, headers: { 'content-type': 'text/event-stream', 'content-length': String(events.length) } });
    const { live, joiner } = await joined(sse, 1000);
    expect({ ...marks(live), text: await live.text() }).toEqual({ replayed: null, truncated: null, text: events });
    expect({ ...marks(joiner), length: joiner.headers.get('content-length'), text: await joiner.text() }).toEqual({ replayed: 'true', truncated: 'true', length: null, text: '' });
  });
});
