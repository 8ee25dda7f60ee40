/**
 * A 2xx `text/event-stream` handed to the caller as it arrives, on the default Node transport
 * (`requestFetch`): the caller may stop it early or never read it. Either way the connection must
 * be released, and nothing may throw outside the caller's reach (an uncaught exception ends a Node
 * process). Counted at a loopback server that streams until the client goes away.
 */
import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const loop = eachTest();

/** Streams `data: n` every `everyMs` until the client goes away; counts requests and closed responses. */
async function endless(everyMs: number): Promise<{ url: string; state: { requests: number; closed: number } }> {
  const state = { requests: 0, closed: 0 };
  const origin = await loop.serve((req, res) => {
    state.requests++;
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let n = 0;
    const timer = setInterval(() => res.write(`data: ${n++}\n\n`), everyMs);
    res.on('close', () => {
      clearInterval(timer);
      state.closed++;
    });
  });
  return { url: `${origin}/v1/chat/completions`, state };
}

const call = (c: OnceClient, url: string, ref: string): Promise<Response> =>
  c.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"stream":true}', once: { action: 'chat', ref } });

/** Uncaught exceptions while `fn` runs and for `settleMs` after. */
async function uncaughtDuring(fn: () => Promise<void>, settleMs: number): Promise<unknown[]> {
  const seen: unknown[] = [];
  const monitor = (error: unknown): void => void seen.push(error);
  process.on('uncaughtExceptionMonitor', monitor);
  try {
    await fn();
    await new Promise((resolve) => setTimeout(resolve, settleMs));
  } finally {
    process.off('uncaughtExceptionMonitor', monitor);
  }
  return seen;
}

describe('an event stream the caller stops early', () => {
  // Before the fix (Readable.toWeb under the body), every cancel below threw ERR_INVALID_STATE
  // "Controller is already closed" as an uncaught exception (nodejs/node#54205).
  it('cancelled before any read: no uncaught exception, the connection is closed', async () => {
    const { url, state } = await endless(5);
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false }));
    const uncaught = await uncaughtDuring(async () => {
      for (let i = 0; i < 5; i++) await (await call(c, url, `cancel-${i}`)).body?.cancel();
    }, 200);
    expect(uncaught).toEqual([]);
    expect(state.requests).toBe(5);
    expect(state.closed).toBe(5);
  });

  it('cancelled after the first event: no uncaught exception, the connection is closed', async () => {
    const { url, state } = await endless(5);
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false }));
    const uncaught = await uncaughtDuring(async () => {
      for (let i = 0; i < 5; i++) {
        const reader = (await call(c, url, `read-cancel-${i}`)).body!.getReader();
        expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/^data: /);
        await reader.cancel();
      }
    }, 200);
    expect(uncaught).toEqual([]);
    expect(state.closed).toBe(5);
  });
});

/** An event stream of one event that ends at once (chunked: no Content-Length, so the body is streamed, not buffered). */
async function short(): Promise<string> {
  const origin = await loop.serve((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: done\n\n');
  });
  return `${origin}/v1/chat/completions`;
}

describe('an event stream that ended before the caller reads it (the default transport)', () => {
  // undici destroys a body not read to its end with a RequestAbortedError 'error' event; its listener
  // is attached only by the first read, so before the fix a cancel (or a collection) before any read
  // threw that error as an uncaught exception, which ends a Node process.
  it('cancelled before any read: no uncaught exception', async () => {
    const url = await short();
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false }));
    const uncaught = await uncaughtDuring(async () => {
      for (let i = 0; i < 3; i++) {
        const res = await call(c, url, `ended-cancel-${i}`);
        // (the whole body has arrived, unread)
        await new Promise((resolve) => setTimeout(resolve, 50));
        await res.body?.cancel();
      }
    }, 200);
    expect(uncaught).toEqual([]);
  });

  it('never read, collected: no uncaught exception', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const url = await short();
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false }));
    const uncaught = await uncaughtDuring(async () => {
      const statuses = await (async () => [(await call(c, url, 'ended-unread-0')).status, (await call(c, url, 'ended-unread-1')).status])();
      expect(statuses).toEqual([200, 200]);
      for (let i = 0; i < 10; i++) {
        gc();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }, 200);
    expect(uncaught).toEqual([]);
  });
});

describe('an event stream the caller never reads', () => {
  // As fetch's own Response, collected unread, gives its connection back. Before the fixes the
  // connections stayed open for good (measured: 0 of 3 closed after 3 s of collections; the default
  // transport before 1ffa104, Node's global fetch while client.fetch piped the body; Node's global
  // fetch called directly the same way: 5 of 5 closed).
  it.each([
    ['the default transport', undefined],
    ["Node's global fetch", globalThis.fetch],
  ] as const)('is released once its Response is garbage collected (%s)', async (_, transport) => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { url, state } = await endless(50);
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false, ...(transport === undefined ? {} : { fetch: transport }) }));
    // (statuses only: the Responses are left for the collector)
    const statuses = await (async () => [(await call(c, url, 'unread-0')).status, (await call(c, url, 'unread-1')).status, (await call(c, url, 'unread-2')).status])();
    expect(statuses).toEqual([200, 200, 200]);
    for (let i = 0; i < 30 && state.closed < 3; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(state.closed).toBe(3);
  });
});

describe('an event stream the caller never reads, under a signal that outlives it', () => {
  // Agents pass one long-lived AbortSignal to every call. The stream's abort listener on it held the
  // stream's controller, so the stream stayed reachable from the signal: never collected, its listener
  // never removed, its connection never given back. Measured in a user trial before the fix: 200 calls
  // left unread kept 200 listeners on the signal after collections; here 0 of 3 endless streams closed.
  it.each([
    ['the default transport', undefined],
    ["Node's global fetch", globalThis.fetch],
  ] as const)('is released once collected, and its listener removed (%s)', async (_, transport) => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { url, state } = await endless(50);
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false, ...(transport === undefined ? {} : { fetch: transport }) }));
    const controller = new AbortController();
    const listeners = (): number => getEventListeners(controller.signal, 'abort').length;
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      statuses.push((await c.fetch(url, { method: 'POST', body: '{"stream":true}', signal: controller.signal, once: { action: 'chat', ref: `shared-${i}` } })).status);
    }
    expect(statuses).toEqual([200, 200, 200]);
    for (let i = 0; i < 30 && (state.closed < 3 || listeners() > 0); i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect({ closed: state.closed, listeners: listeners() }).toEqual({ closed: 3, listeners: 0 });
  });

  it('keeps no listener once read to its end, nor once cancelled', async () => {
    const url = await short();
    const c = loop.use(createClient({ store: memoryStore(), telemetry: false }));
    const controller = new AbortController();
    for (let i = 0; i < 5; i++) {
      const res = await c.fetch(url, { method: 'POST', body: '{"stream":true}', signal: controller.signal, once: { action: 'chat', ref: `read-${i}` } });
      if (i % 2 === 0) expect(await res.text()).toBe('data: done\n\n');
      else await res.body?.cancel();
    }
    expect(getEventListeners(controller.signal, 'abort').length).toBe(0);
  });
});

describe("the caller's abort", () => {
  it.each([
    ['the default transport', undefined],
    ["Node's global fetch", globalThis.fetch],
  ] as const)('rejects a pending read with its reason and closes the connection (%s)', async (_, transport) => {
    const { url, state } = await endless(50);
    const client = loop.use(createClient({ store: memoryStore(), telemetry: false, ...(transport === undefined ? {} : { fetch: transport }) }));
    const controller = new AbortController();
    const res = await client.fetch(url, { method: 'POST', body: '{}', signal: controller.signal, once: { action: 'chat', ref: 'abort' } });
    const reader = res.body!.getReader();
    await reader.read();
    const pending = reader.read().then(() => reader.read());
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(state.closed).toBe(1);
  });
});
