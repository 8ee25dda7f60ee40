/**
 * Unit tests of a React app under Vitest with a test DOM (jsdom, happy-dom), as a
 * user trial ran them (vitest 4.1, jsdom 29, happy-dom 21, Node 20):
 * - happy-dom replaces the global AbortController with its own, whose signal is not
 *   Node's EventTarget: `startProvider()` threw "The "eventTargets" argument must be
 *   an instance of EventEmitter or EventTarget. Received an instance of AbortSignal".
 * - happy-dom's `navigator.locks` is null: the browser entry's `createClient` (what a
 *   config with `resolve: { conditions: ['browser'] }` loads) threw "Cannot read
 *   properties of null (reading 'request')", with any store.
 * Neither DOM is installed here: the part of each that matters is stubbed.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../src/browser.js';
import { memoryStore } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import { webLocks } from '../../src/web-locks.js';

/** An AbortController like happy-dom's: its signal is an event target of its own, not Node's. */
class ForeignAbortController {
  readonly signal = new ForeignAbortSignal();
  abort(reason?: unknown): void {
    this.signal.fire(reason);
  }
}
class ForeignAbortSignal {
  aborted = false;
  reason: unknown;
  private readonly listeners = new Set<() => void>();
  addEventListener(_type: string, listener: () => void): void {
    this.listeners.add(listener);
  }
  removeEventListener(_type: string, listener: () => void): void {
    this.listeners.delete(listener);
  }
  fire(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    for (const listener of [...this.listeners]) listener();
  }
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('under a test DOM in Node', () => {
  it('happy-dom\'s AbortController: the testing provider starts, holds a delayed commit and resets', async () => {
    vi.stubGlobal('AbortController', ForeignAbortController);
    const provider = await startProvider({ requireKey: true });
    try {
      provider.fault({ kind: 'delay_before_commit', delayMs: 60_000, match: { ref: 'H-1' } });
      const post = (ref: string): Promise<number> =>
        fetch(`${provider.url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `k-${ref}` },
          body: JSON.stringify({ ref }),
        }).then((r) => r.status, () => 0);
      const held = post('H-1');
      await vi.waitFor(() => expect(provider.requests.length).toBe(1));
      provider.reset(); // aborts the held request through the foreign signal
      expect(await held).toBe(0);
      expect(await post('H-2')).toBe(201);
      expect(provider.effectsFor('H-1')).toBe(0);
      expect(provider.effectsFor('H-2')).toBe(1);
    } finally {
      await provider.close();
    }
  });

  it('happy-dom\'s navigator.locks (null): no Web Locks, and the browser entry\'s createClient works', async () => {
    vi.stubGlobal('navigator', { locks: null, onLine: true, userAgent: 'HappyDOM/0.0.0' });
    expect(webLocks()).toBeUndefined();
    let sends = 0;
    const client = createClient({
      store: memoryStore(),
      fetch: () => {
        sends++;
        return Promise.resolve(new Response('{}', { status: 201 }));
      },
    });
    const call = () => client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'place-order', ref: 'L-1' } });
    expect((await call()).status).toBe(201);
    expect((await call()).status).toBe(201);
    expect(sends).toBe(1);
    await client.close();
  });
});

describe('the testing provider from a page\'s fetch (happy-dom\'s enforces CORS; so do browsers)', () => {
  it('answers the preflight and lets the page read the response and its headers', async () => {
    const provider = await startProvider({ requireKey: true });
    try {
      const origin = 'http://localhost:3000';
      const preflight = await fetch(`${provider.url}/orders`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,idempotency-key' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
      expect(preflight.headers.get('access-control-allow-methods')).toMatch(/POST/);
      expect(preflight.headers.get('access-control-allow-headers')).toBe('content-type,idempotency-key');
      const post = await fetch(`${provider.url}/orders`, {
        method: 'POST',
        headers: { origin, 'content-type': 'application/json', 'idempotency-key': 'k-C-1' },
        body: JSON.stringify({ ref: 'C-1' }),
      });
      expect(post.status).toBe(201);
      expect(post.headers.get('access-control-allow-origin')).toBe('*');
      expect(post.headers.get('access-control-expose-headers')).toBe('*');
      expect(provider.effectsFor('C-1')).toBe(1);
      expect(provider.requests).toHaveLength(1); // the preflight is not a request to the API
    } finally {
      await provider.close();
    }
  });
});
