/**
 * Many calls of one client at once must not pile listeners on one AbortSignal: Node warns past 10
 * (MaxListenersExceededWarning, "Possible EventTarget memory leak detected"), which `npm run bench`
 * printed at c=16 once the client's close was listened for by every write after a send. Counted at
 * a loopback provider: 32 orders, 32 effects, no warning.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { wait } from '../helpers/setup.js';

const loop = eachTest();

/** A provider that answers each ref's first request 503 with `Retry-After: 1` when `busyFirst`, then 201; counts effects. */
async function provider(busyFirst: boolean): Promise<{ url: string; effects: () => number }> {
  const seen = new Set<string>();
  let effects = 0;
  const origin = await loop.serve((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (busyFirst && !seen.has(body)) {
        seen.add(body);
        res.writeHead(503, { 'retry-after': '1' });
        res.end();
        return;
      }
      effects++;
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  return { url: `${origin}/orders`, effects: () => effects };
}

/** A memory store whose compare-and-set answers after `ms`: the writes after the sends overlap. */
function slowWrites(ms: number): OnceStore {
  const inner = memoryStore();
  return Object.assign(Object.create(inner) as OnceStore, {
    compareAndSet: async (...args: Parameters<OnceStore['compareAndSet']>) => {
      await wait(ms);
      return inner.compareAndSet(...args);
    },
  });
}

/** Warnings Node emits while `fn` runs. */
async function warningsDuring(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (warning: Error): void => void seen.push(`${warning.name}: ${warning.message}`);
  process.on('warning', listener);
  try {
    await fn();
    await wait(50); // (warnings are emitted on the next tick)
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

const order = (c: OnceClient, url: string, i: number): Promise<Response> =>
  c.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"order":${i}}`, once: { action: 'order', ref: `o-${i}` } });

describe('32 calls of one client at once', () => {
  it('writes after the sends, all pending together: no listener warning, 32 effects', async () => {
    const p = await provider(false);
    const client = loop.use(createClient({ store: slowWrites(40) }));
    const warnings = await warningsDuring(async () => {
      const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => order(client, p.url, i)));
      expect(answers.map((r) => r.status)).toEqual(Array.from({ length: 32 }, () => 201));
    });
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    expect(p.effects()).toBe(32);
  });

  it('all waiting out a Retry-After together: no listener warning, 32 effects', async () => {
    const p = await provider(true);
    // (the shared retry budget would refuse most of 32 retries at once)
    const client = loop.use(createClient({ store: memoryStore(), retry: { budget: false } }));
    const warnings = await warningsDuring(async () => {
      const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => order(client, p.url, i)));
      expect(answers.map((r) => r.status)).toEqual(Array.from({ length: 32 }, () => 201));
    });
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    expect(p.effects()).toBe(32);
  });
});
