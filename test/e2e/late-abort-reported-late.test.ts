/**
 * A transport that honours its AbortSignal but reports the abort late must not have its cut-off
 * outcome taken by the next attempt as a call still out. The default Node transport (`requestFetch`,
 * undici's `request`) reads a small body (content-length ≤ 64 KiB) before it resolves; an abort
 * during that read used to resolve a Response whose body fails with the signal's reason, and the
 * late-call rule ("a call that rejects by the abort's turn honoured its signal") kept it as if the
 * request were still out: the next attempt took it (a 201 whose body fails with the earlier
 * attempt's TimeoutError) instead of sending, and with the last attempt the caller got an
 * AmbiguousOutcomeError where a resend under the same key would have had the provider's replay.
 * Now the transport rejects with the reason, and a kept call that rejects with its own attempt's
 * abort reason, however late, counts as having honoured its signal.
 *
 * The provider here dedupes by key: the first request of a key commits, sends its headers and half
 * its body, then stalls; a later request of the key is answered in full with the stored order.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceEvent } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { orderInit } from '../helpers/setup.js';

const { serve, use } = eachTest();

function stallingProvider(stall: 'body' | 'headers' = 'body'): { effects: Map<string, number>; requests: string[]; handler: (req: IncomingMessage, res: ServerResponse) => void } {
  const effects = new Map<string, number>();
  const requests: string[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const key = String(req.headers['idempotency-key'] ?? '');
      requests.push(key);
      const ref = (JSON.parse(Buffer.concat(chunks).toString()) as { ref: string }).ref;
      const body = JSON.stringify({ id: `order-${ref}`, ref, padding: 'x'.repeat(200) });
      const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
      if (effects.has(key)) {
        res.writeHead(201, { ...headers, 'idempotent-replayed': 'true' });
        res.end(body);
        return;
      }
      effects.set(key, 1);
      if (stall === 'headers') return; // committed, never answered
      res.writeHead(201, headers);
      res.write(body.slice(0, 50)); // the rest never comes
    });
  };
  return { effects, requests, handler };
}

describe('default transport, abort while it reads a small body', () => {
  it('the next attempt resends under the same key (the provider replays), not takes the cut-off response', async () => {
    const provider = stallingProvider();
    const url = await serve(provider.handler);
    const events: OnceEvent[] = [];
    const c = use(
      createClient({
        store: memoryStore(),
        providerDedupes: true,
        random: () => 0,
        onEvent: (e) => events.push(e),
        retry: { budget: false, attemptTimeoutMs: 300, maxAttempts: 2, deadlineMs: 5_000, baseDelayMs: 10 },
      }),
    );
    const res = await c.fetch(`${url}/orders`, { ...orderInit('R3-1'), once: { action: 'create-order', ref: 'R3-1' } });
    const reasons = events.filter((e) => e.type === 'attempt_finished').map((e) => (e as { reason: string }).reason);
    expect({ status: res.status, sent: provider.requests.length, reasons }).toMatchObject({ status: 201, sent: 2 });
    expect(((await res.json()) as { ref: string }).ref).toBe('R3-1');
    expect(provider.effects.size).toBe(1);
  });

  it('a custom fetch that honours its signal but rejects 100 ms after the abort (with signal.reason) is not taken by the next attempt', async () => {
    const provider = stallingProvider('headers');
    const url = await serve(provider.handler);
    /** aborts its request at once, reports the abort 100 ms later (a wrapper that awaits its own clean-up, say) */
    const slowToSay: typeof fetch = (input, init) => {
      const inner = new AbortController();
      const signal = init?.signal;
      return new Promise((resolve, reject) => {
        signal?.addEventListener('abort', () => {
          inner.abort(signal.reason);
          setTimeout(() => reject(signal.reason), 100);
        });
        fetch(input, { ...init, signal: inner.signal }).then(resolve, (error: unknown) => {
          if (signal?.aborted !== true) reject(error);
        });
      });
    };
    const events: OnceEvent[] = [];
    const c = use(
      createClient({
        store: memoryStore(),
        fetch: slowToSay,
        providerDedupes: true,
        random: () => 0,
        onEvent: (e) => events.push(e),
        retry: { budget: false, attemptTimeoutMs: 300, maxAttempts: 2, deadlineMs: 5_000, baseDelayMs: 10 },
      }),
    );
    const res = await c.fetch(`${url}/orders`, { ...orderInit('R3-2'), once: { action: 'create-order', ref: 'R3-2' } });
    const reasons = events.filter((e) => e.type === 'attempt_finished').map((e) => (e as { reason: string }).reason);
    expect({ status: res.status, sent: provider.requests.length, reasons }).toMatchObject({ status: 201, sent: 2 });
    expect(provider.effects.size).toBe(1);
  });
});
