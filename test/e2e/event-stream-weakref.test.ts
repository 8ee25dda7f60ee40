/**
 * passThrough's abort listener reaches the stream's controller through a WeakRef (00ce531). A caller
 * with a read pending must still be reachable from the signal, also when nothing else roots the
 * stream (a scripted transport's stalled body): the pending pull keeps the controller. Pinned here with
 * collections forced while reads are pending: the abort must reject the read (a hang otherwise).
 * Left alone (not pinned): a caller that only awaits reader.closed, reading nothing, over an unrooted
 * source, is collected with the stream: the abort no longer reaches it (it did before 00ce531).
 */
import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const enc = new TextEncoder();
const sse = (body: ReadableStream<Uint8Array>) => new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
const collect = async () => {
  for (let i = 0; i < 6; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 20));
  }
};

it('stalled unrooted source, pending read held only by the caller frame: abort after gc rejects it', async () => {
  let effects = 0;
  const fetch = (async () => {
    effects++;
    return sse(new ReadableStream({ start: (c) => c.enqueue(enc.encode('data: 1\n\n')) }));
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, telemetry: false });
  const ac = new AbortController();
  const outcome = (async () => {
    const res = await client.fetch('https://api.example.test/chat', { method: 'POST', body: '{}', signal: ac.signal, once: { action: 'chat', ref: 'r1' } });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read(); // stalls
    return 'read';
  })().then((v) => v, (e: unknown) => e);
  await new Promise((r) => setTimeout(r, 50));
  await collect();
  const reason = new Error('gave up');
  ac.abort(reason);
  const got = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('HANG'), 1000))]);
  expect(got).toBe(reason);
  expect(effects).toBe(1);
});

it('a stream read chunk by chunk with collections between reads, then aborted: rejects; listener gone', async () => {
  let push: ((s: string) => void) | undefined;
  const fetch = (async () => sse(new ReadableStream({ start: (c) => { push = (s) => c.enqueue(enc.encode(s)); } }))) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, telemetry: false });
  const ac = new AbortController();
  const res = await client.fetch('https://api.example.test/chat', { method: 'POST', body: '{}', signal: ac.signal, once: { action: 'chat', ref: 'r3' } });
  const reader = res.body!.getReader();
  for (let i = 0; i < 3; i++) {
    const p = reader.read();
    await collect();
    push!(`data: ${i}\n\n`);
    expect(new TextDecoder().decode((await p).value)).toBe(`data: ${i}\n\n`);
    await collect();
  }
  const p = reader.read();
  await collect();
  const reason = new Error('stop');
  ac.abort(reason);
  await expect(p).rejects.toBe(reason);
  expect(getEventListeners(ac.signal, 'abort').length).toBe(0);
});

it('abort after the unread stream was collected: no throw, listener gone, source cancelled', async () => {
  let cancelled = 0;
  const fetch = (async () => sse(new ReadableStream({ pull: () => new Promise(() => undefined), cancel: () => void cancelled++ }))) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, telemetry: false });
  const ac = new AbortController();
  const statuses = await (async () => [(await client.fetch('https://api.example.test/chat', { method: 'POST', body: '{}', signal: ac.signal, once: { action: 'chat', ref: 'r4' } })).status])();
  expect(statuses).toEqual([200]);
  const before = getEventListeners(ac.signal, 'abort').length;
  await collect();
  const after = getEventListeners(ac.signal, 'abort').length;
  ac.abort(new Error('late'));
  await new Promise((r) => setTimeout(r, 50));
  expect({ before, after, cancelled }).toEqual({ before: 1, after: 0, cancelled: 1 });
});
