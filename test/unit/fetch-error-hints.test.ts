/**
 * What a caller is told when a fetch keeps failing with nothing but a `TypeError` (a browser's
 * "Failed to fetch": a network failure and a CORS refusal look alike). Regression (browser trial):
 * after 5 attempts the call ended with `RetriesExhaustedError: … last: unknown error: TypeError`
 * and no `cause`.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore, RetriesExhaustedError } from '../../src/index.js';

const url = 'https://api.example.com/orders';

/** A fetch that rejects as a browser's does on a refused preflight; `thrown` holds what it threw, in order. */
function failingFetch(make: () => Error = () => new TypeError('Failed to fetch')): { fetch: typeof fetch; thrown: Error[] } {
  const thrown: Error[] = [];
  const fetch = (): Promise<Response> => {
    const error = make();
    thrown.push(error);
    return Promise.reject(error);
  };
  return { fetch, thrown };
}

/**
 * A provider that dedupes and a lookup that finds nothing: each ambiguous attempt is followed by a
 * same-key resend, and the last one's "absent" leaves the record resumable (RetriesExhaustedError).
 */
async function exhaust(fetch: typeof globalThis.fetch, options: { keyHeader?: string; budget?: false | { reserve: number; ratio: number } } = {}): Promise<unknown> {
  const client = createClient({
    store: memoryStore(),
    fetch,
    providerDedupes: true,
    ...(options.keyHeader === undefined ? {} : { keyHeader: options.keyHeader }),
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, budget: options.budget ?? false },
  });
  try {
    await client.fetch(url, { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'o-1', lookup: async () => null } });
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await client.close();
  }
}

/** Looks like an Electron renderer: `navigator.onLine`, and `process.versions.electron` beside `node` (Chromium's fetch). */
function asBrowser(): void {
  vi.stubGlobal('navigator', { onLine: true });
  const versions = Object.getOwnPropertyDescriptor(process, 'versions');
  Object.defineProperty(process, 'versions', { ...versions, value: { ...process.versions, electron: '31.0.0' } });
  restore.push(() => Object.defineProperty(process, 'versions', versions ?? {}));
}

const restore: (() => void)[] = [];
afterEach(() => {
  vi.unstubAllGlobals();
  for (const undo of restore.splice(0)) undo();
});

describe('a fetch that keeps rejecting', () => {
  it("TypeError('Failed to fetch'): RetriesExhaustedError whose cause is the last attempt's error", async () => {
    const { fetch, thrown } = failingFetch();
    const error = await exhaust(fetch);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(thrown).toHaveLength(3);
    expect((error as Error).cause).toBe(thrown[2]);
    // the reason quotes the message, all a browser's fetch says (and in Node nothing of CORS)
    expect((error as Error).message).toContain('last: unknown error: TypeError: Failed to fetch;');
    expect((error as Error).message).not.toMatch(/CORS/);
  });

  // A request that never left (ECONNREFUSED) leaves the record pending: a RetriesExhaustedError of its own.
  const refused = (): Error => new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });

  it("never sent, attempts used up: the cause is the last attempt's error too", async () => {
    const { fetch, thrown } = failingFetch(refused);
    const error = await exhaust(fetch);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect((error as Error).message).toContain('last: ECONNREFUSED');
    expect((error as Error).cause).toBe(thrown.at(-1));
  });

  it("never sent, retry budget drained: the cause is the last attempt's error", async () => {
    const { fetch, thrown } = failingFetch(refused);
    const error = await exhaust(fetch, { budget: { reserve: 0, ratio: 0 } });
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect((error as Error).message).toMatch(/budget/);
    expect(thrown).toHaveLength(1);
    expect((error as Error).cause).toBe(thrown[0]);
  });
});

describe("a browser's fetch that keeps rejecting", () => {
  it('a TypeError: the reason adds that a CORS refusal looks the same, naming the key header', async () => {
    asBrowser();
    const { fetch, thrown } = failingFetch();
    const error = await exhaust(fetch);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect((error as Error).cause).toBe(thrown.at(-1));
    expect((error as Error).message).toMatch(/unknown error: TypeError: Failed to fetch \(.*CORS.*Idempotency-Key.*\)/);
    const custom = await exhaust(failingFetch().fetch, { keyHeader: 'X-Request-Key' });
    expect((custom as Error).message).toMatch(/CORS.*X-Request-Key/);
  });

  it('an error other than a TypeError gets no CORS hint', async () => {
    asBrowser();
    const error = await exhaust(failingFetch(() => new Error('boom')).fetch);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect((error as Error).message).toContain('unknown error: Error: boom;');
  });
});
