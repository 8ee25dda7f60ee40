/**
 * A lookup's Response body is read whole for the stored snapshot. Like an attempt's (see
 * body-read-timeout.test.ts), it is tied to no signal when the lookup did not pass its own on (a
 * custom transport, or `fetch` called without it): when the lookup is given up (the call's deadline,
 * the caller's abort, recover()'s signal) while its body still trickles, the body's source must be
 * cancelled, or its producer goes on (its connection open) for nobody. Regression: it was read with
 * `arrayBuffer()`, which no abort reaches; the call ended at its deadline, the read went on for good.
 * Memory store, injected fetch, real short timers; one loopback server.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClientOptions } from '../../src/index.js';
import { tick, trickle as trickleOf, until } from '../helpers/trickle.js';

const trickle = () => trickleOf('{"id":"o-1"} ');
const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'L-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };

/** A provider that answers 500 (ambiguous): the call looks the operation up. */
function setup(options: OnceClientOptions = {}) {
  let sends = 0;
  const fetch = (async () => {
    sends++;
    return new Response('{"error":"oops"}', { status: 500 });
  }) as typeof globalThis.fetch;
  const c = createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, maxAttempts: 1, ...options.retry } });
  return { c, sends: () => sends };
}

describe("a lookup's body still being read when the lookup is given up", () => {
  it("at the call's deadline: its source is cancelled with the deadline's error, the call ends ambiguous with it as cause, the record stays ambiguous", async () => {
    const { body, seen } = trickle();
    const { c, sends } = setup({ retry: { deadlineMs: 200 } });
    const lookup: LookupFn = async () => new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
    const started = Date.now();
    const error = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).cause).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(2_000);
    await until(() => seen.cancelled);
    expect(seen.cancelled).toBe(true);
    expect(seen.reason).toBe((error as Error).cause);
    await tick(30);
    expect(seen.pullsAfterCancel).toBe(0);
    expect(sends()).toBe(1);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null, result: null });
    await c.close();
  });

  it("at the caller's abort: its source is cancelled with the caller's reason, the call rejects with it", async () => {
    const { body, seen } = trickle();
    const { c } = setup();
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    const lookup: LookupFn = async () => {
      setTimeout(() => caller.abort(reason), 50);
      return new Response(body, { status: 200 });
    };
    const error = await c.fetch(URL_ORDERS, { ...post, signal: caller.signal, once: { ...SCOPE, lookup } }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    await until(() => seen.cancelled);
    expect({ cancelled: seen.cancelled, reason: seen.reason }).toEqual({ cancelled: true, reason });
    expect((await c.get(SCOPE))?.state).toBe('ambiguous');
    await c.close();
  });

  it("in recover(), at its signal's abort: its source is cancelled with the signal's reason", async () => {
    const store = memoryStore();
    const first = setup({ store });
    await expect(first.c.fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const { body, seen } = trickle();
    const reason = new Error('recover stopped');
    const stop = new AbortController();
    const lookups = {
      [SCOPE.action]: (async () => {
        setTimeout(() => stop.abort(reason), 50);
        return new Response(body, { status: 200 });
      }) as LookupFn,
    };
    const { c } = setup({ store, lookups, settleMs: 0 });
    const error = await c.recover({ signal: stop.signal }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    await until(() => seen.cancelled);
    expect({ cancelled: seen.cancelled, reason: seen.reason }).toEqual({ cancelled: true, reason });
    expect((await c.get(SCOPE))?.state).toBe('ambiguous');
    await c.close();
    await first.c.close();
  });

  it('a loopback answer that sends its headers and then trickles forever: at the deadline its connection is closed', async () => {
    let open = 0;
    let closed = 0;
    const server = createServer((req, res) => {
      req.resume();
      open++;
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => res.write(' '), 5);
      res.on('close', () => {
        clearInterval(timer);
        closed++;
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
      const { c } = setup({ retry: { deadlineMs: 300 } });
      // the signal not passed on: nothing but oncefetch's read can end this body
      const lookup: LookupFn = async () => globalThis.fetch(`${url}?ref=${SCOPE.ref}`);
      const error = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect((error as Error).cause).toBeInstanceOf(DeadlineExceededError);
      await until(() => closed > 0);
      expect({ open, closed }).toEqual({ open: 1, closed: 1 });
      await c.close();
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("a lookup's body that ends", () => {
  it('is read whole through its stream, chunks of another realm included, and found', async () => {
    const chunk = (text: string): Uint8Array => runInNewContext(`new Uint8Array([${[...new TextEncoder().encode(text)].join(',')}])`) as Uint8Array;
    expect(chunk('x') instanceof Uint8Array).toBe(false);
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk('{"id":'));
        controller.enqueue(chunk('"o-1"}'));
        controller.close();
      },
      cancel() {
        cancelled = true;
      },
    });
    const { c, sends } = setup();
    const lookup: LookupFn = async () => new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
    const res = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup } });
    expect({ status: res.status, text: await res.text(), cancelled, sends: sends() }).toEqual({ status: 200, text: '{"id":"o-1"}', cancelled: false, sends: 1 });
    expect((await c.get(SCOPE))?.result).toMatchObject({ source: 'lookup', status: 200 });
    await c.close();
  });

  it('a chunk that is no Uint8Array is refused, as arrayBuffer() refuses it: the lookup failed, the record stays ambiguous', async () => {
    const { c } = setup();
    const lookup: LookupFn = async () =>
      new Response(new ReadableStream<unknown>({ start: (controller) => (controller.enqueue('{"id":"o-1"}'), controller.close()) }) as ReadableStream<Uint8Array>, { status: 200 });
    await expect(c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect((await c.get(SCOPE))?.state).toBe('ambiguous');
    await c.close();
  });

  it('one already whole in memory (WHOLE_BODY) is read without touching its `body`', async () => {
    const { WHOLE_BODY } = await import('../../src/operation/body.js');
    let touched = 0;
    const whole = new Response('{"id":"o-1"}', { status: 200 });
    Object.defineProperty(whole, WHOLE_BODY, { value: true });
    Object.defineProperty(whole, 'body', {
      get: () => {
        touched++;
        throw new Error('body touched');
      },
    });
    const { c } = setup();
    const res = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup: async () => whole } });
    expect({ status: res.status, text: await res.text(), touched }).toEqual({ status: 200, text: '{"id":"o-1"}', touched: 0 });
    await c.close();
  });
});

describe('in recover() called without a signal', () => {
  it("a lookup whose body trickles forever is given up at retry.deadlineMs, as a call's lookup is: recorded unknown, the record stays ambiguous (never resent), and the next record is settled", async () => {
    const store = memoryStore();
    const first = setup({ store });
    const HANGS = { action: SCOPE.action, ref: 'L-hang' };
    const FOUND = { action: SCOPE.action, ref: 'L-found' };
    await expect(first.c.fetch(URL_ORDERS, { ...post, once: HANGS })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    await tick(5); // (listed oldest first: the trickling one before the other)
    await expect(first.c.fetch(URL_ORDERS, { ...post, once: FOUND })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const { body, seen } = trickle();
    const lookups = {
      [SCOPE.action]: (async ({ scope }) =>
        scope.ref === HANGS.ref ? new Response(body, { status: 200 }) : new Response('{"id":"o-2"}', { status: 200 })) as LookupFn,
    };
    const second = setup({ store, lookups, settleMs: 0, retry: { deadlineMs: 200 } });
    const started = Date.now();
    const cap = new Promise<string>((r) => setTimeout(() => r('still pending after 3000 ms'), 3_000));
    const report = await Promise.race([second.c.recover(), cap]);
    expect(report).toMatchObject({ resolved: [{ ref: FOUND.ref }], stillAmbiguous: [{ ref: HANGS.ref }], absent: [], errors: [] });
    expect(Date.now() - started).toBeLessThan(2_000);
    await until(() => seen.cancelled);
    expect(seen.cancelled).toBe(true);
    await tick(30);
    expect(seen.pullsAfterCancel).toBe(0);
    const hung = await second.c.get(HANGS);
    expect(hung).toMatchObject({ state: 'ambiguous', lease: null, result: null });
    expect(hung?.evidence.some((e) => e.kind === 'lookup' && e.detail.startsWith('unknown: recover: ') && e.detail.includes('200 ms'))).toBe(true);
    expect(hung?.attempts).toHaveLength(1);
    expect((await second.c.get(FOUND))?.state).toBe('succeeded');
    expect(first.sends() + second.sends()).toBe(2);
    await second.c.close();
    await first.c.close();
  });

  it('a lookup that never settles is given up at retry.deadlineMs too: recorded unknown, the record ambiguous, nothing resent', async () => {
    const store = memoryStore();
    const first = setup({ store });
    await expect(first.c.fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const lookups = { [SCOPE.action]: (() => new Promise<null>(() => undefined)) as LookupFn };
    const second = setup({ store, lookups, settleMs: 0, retry: { deadlineMs: 200 } });
    const cap = new Promise<string>((r) => setTimeout(() => r('still pending after 3000 ms'), 3_000));
    const report = await Promise.race([second.c.recover(), cap]);
    expect(report).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [{ ref: SCOPE.ref }], errors: [] });
    expect(await second.c.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null, result: null });
    expect(first.sends() + second.sends()).toBe(1);
    await second.c.close();
    await first.c.close();
  });
});
