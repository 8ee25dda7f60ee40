import { afterEach, beforeEach } from 'vitest';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';

/**
 * A loopback provider that ignores idempotency keys (a resend is a second effect), started before
 * each test of the file and given to `set`; after the test, the cleanups it pushed run, last first,
 * then the provider closes. Call it once at the top of the file.
 *
 * @returns the file's cleanups (push a client's close, say)
 */
export function keylessProviderEachTest(set: (provider: Provider) => void): (() => unknown)[] {
  const cleanups: (() => unknown)[] = [];
  let started: Provider | undefined;
  beforeEach(async () => {
    started = await startProvider({ ignoreKeys: true });
    set(started);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await started?.close();
  });
  return cleanups;
}

/**
 * How a call ended (its status, or its error's name) and after how many ms; with `capMs`, the
 * outcome `pending after <capMs> ms` when it had not ended by then.
 */
export async function timed(call: Promise<Response>, capMs?: number): Promise<{ outcome: string; ms: number; value: unknown }> {
  const started = performance.now();
  let cap: ReturnType<typeof setTimeout> | undefined;
  const settled = call.then(
    (res) => ({ outcome: String(res.status), value: res as unknown }),
    (error: unknown) => ({ outcome: error instanceof Error ? error.name : String(error), value: error }),
  );
  const ended =
    capMs === undefined
      ? await settled
      : await Promise.race([settled, new Promise<{ outcome: string; value: unknown }>((r) => (cap = setTimeout(() => r({ outcome: `pending after ${capMs} ms`, value: undefined }), capMs)))]);
  clearTimeout(cap);
  return { ...ended, ms: Math.round(performance.now() - started) };
}
