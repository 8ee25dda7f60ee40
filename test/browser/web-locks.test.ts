/**
 * The Web Locks wrapper on a fake LockManager (Node has no `navigator.locks`):
 * exclusion per name, giving up after `maxWaitMs` (and then running anyway),
 * aborts while waiting, errors from the body. The real API is exercised by the
 * two-tab case in chromium.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { LOCK_PREFIX, webLocks, type LockManagerLike } from '../../src/web-locks.js';

/** Exclusive locks by name, FIFO, with `signal` support, like the Web Locks API. */
function fakeLocks(): LockManagerLike & { held: Set<string>; requested: string[] } {
  const tails = new Map<string, Promise<void>>();
  const held = new Set<string>();
  const requested: string[] = [];
  return {
    held,
    requested,
    request<T>(name: string, options: { signal?: AbortSignal }, callback: () => Promise<T>): Promise<T> {
      requested.push(name);
      const previous = tails.get(name) ?? Promise.resolve();
      let release!: () => void;
      const mine = new Promise<void>((r) => (release = r));
      tails.set(name, previous.then(() => mine));
      return new Promise<T>((resolve, reject) => {
        let aborted = false;
        options.signal?.addEventListener('abort', () => {
          aborted = true;
          reject(options.signal?.reason);
        }, { once: true });
        void previous.then(async () => {
          if (aborted) return release();
          held.add(name);
          try {
            resolve(await callback());
          } catch (e) {
            reject(e);
          } finally {
            held.delete(name);
            release();
          }
        });
      });
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('webLocks', () => {
  it('is undefined without navigator.locks (Node)', () => {
    expect(webLocks()).toBeUndefined();
  });

  it('runs one body per record id at a time, under a lock named after the id', async () => {
    const locks = fakeLocks();
    const exclusive = webLocks(locks)!;
    const order: string[] = [];
    const body = (tag: string) => async () => {
      order.push(`${tag} start`);
      await sleep(20);
      order.push(`${tag} end`);
      return tag;
    };
    const wait = { signal: undefined, maxWaitMs: 1_000 };
    const results = await Promise.all([exclusive('id-1', body('a'), wait), exclusive('id-1', body('b'), wait)]);
    expect(results).toEqual(['a', 'b']);
    expect(order).toEqual(['a start', 'a end', 'b start', 'b end']);
    expect(locks.requested).toEqual([`${LOCK_PREFIX}id-1`, `${LOCK_PREFIX}id-1`]);
  });

  it('other ids do not wait for each other', async () => {
    const exclusive = webLocks(fakeLocks())!;
    const order: string[] = [];
    const wait = { signal: undefined, maxWaitMs: 1_000 };
    await Promise.all([
      exclusive('x', async () => { order.push('x start'); await sleep(30); order.push('x end'); }, wait),
      exclusive('y', async () => { order.push('y start'); await sleep(5); order.push('y end'); }, wait),
    ]);
    expect(order.slice(0, 2)).toEqual(['x start', 'y start']);
  });

  it('after maxWaitMs without the lock, runs the body anyway (the lease decides then)', async () => {
    const locks = fakeLocks();
    const exclusive = webLocks(locks)!;
    let releaseFirst!: () => void;
    const first = exclusive('id', () => new Promise<string>((r) => (releaseFirst = () => r('first'))), { signal: undefined, maxWaitMs: 1_000 });
    await sleep(5);
    const started = Date.now();
    const second = await exclusive('id', async () => (locks.held.has(`${LOCK_PREFIX}id`) ? 'ran while the lock was held elsewhere' : 'ran with the lock'), {
      signal: undefined,
      maxWaitMs: 50,
    });
    expect(second).toBe('ran while the lock was held elsewhere');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    releaseFirst();
    expect(await first).toBe('first');
  });

  it('an abort while waiting rejects with signal.reason as given, and the body never runs', async () => {
    const exclusive = webLocks(fakeLocks())!;
    let releaseFirst!: () => void;
    const first = exclusive('id', () => new Promise<void>((r) => (releaseFirst = r)), { signal: undefined, maxWaitMs: 1_000 });
    await sleep(5);
    const controller = new AbortController();
    const reason = { why: 'user left' };
    let ran = false;
    const second = exclusive('id', async () => void (ran = true), { signal: controller.signal, maxWaitMs: 1_000 });
    controller.abort(reason);
    await expect(second).rejects.toBe(reason);
    releaseFirst();
    await first;
    await sleep(5);
    expect(ran).toBe(false);
  });

  it('an already aborted signal rejects at once with its reason', async () => {
    const exclusive = webLocks(fakeLocks())!;
    const reason = new Error('stop');
    await expect(exclusive('id', async () => 'never', { signal: AbortSignal.abort(reason), maxWaitMs: 1_000 })).rejects.toBe(reason);
  });

  it("the body's own error passes through unchanged, and the lock is released", async () => {
    const locks = fakeLocks();
    const exclusive = webLocks(locks)!;
    const error = new TypeError('boom');
    const wait = { signal: undefined, maxWaitMs: 1_000 };
    await expect(exclusive('id', async () => { throw error; }, wait)).rejects.toBe(error);
    expect(locks.held.size).toBe(0);
    expect(await exclusive('id', async () => 'next', wait)).toBe('next');
  });

  // Regression (adversarial run in Chromium): in an opaque origin the Locks API throws
  // SecurityError; the call failed with that raw DOMException. The lock is an optimisation only.
  it('a Locks API that refuses (SecurityError) runs the body without the lock', async () => {
    const refusing: LockManagerLike = {
      request: () => Promise.reject(new DOMException('Access to the Locks API is denied in this context.', 'SecurityError')),
    };
    const exclusive = webLocks(refusing)!;
    expect(await exclusive('id', async () => 'ran', { signal: undefined, maxWaitMs: 1_000 })).toBe('ran');
  });
  // Regression (adversarial run in Chromium, tabs.test.ts): another context's request with `steal: true`
  // rejects the held lock's request at once with an AbortError while its callback goes on running; the
  // call rejected with that AbortError while its POST was on the wire.
  it('a lock stolen while the body runs: the call ends as the body does, not with the steal\'s AbortError', async () => {
    let stolen!: () => void;
    const stealing: LockManagerLike = {
      request: <T>(_name: string, _options: { signal?: AbortSignal }, callback: () => Promise<T>): Promise<T> =>
        new Promise<T>((resolve, reject) => {
          stolen = () => reject(new DOMException("Lock broken by another request with the 'steal' option.", 'AbortError'));
          callback().then(resolve, reject);
        }),
    };
    const exclusive = webLocks(stealing)!;
    const wait = { signal: undefined, maxWaitMs: 1_000 };
    const ok = exclusive('id', async () => {
      stolen();
      await sleep(20);
      return 'sent and answered';
    }, wait);
    expect(await ok).toBe('sent and answered');
    const error = new TypeError('the body failed after the steal');
    const failed = exclusive('id', async () => {
      stolen();
      await sleep(20);
      throw error;
    }, wait);
    await expect(failed).rejects.toBe(error);
  });

  // A body that throws before it returns a promise (an Exclusive's body is any function): e084baf's catch saw no
  // running body and ran it again, without the lock, as if the lock had never been granted.
  it('a body that throws synchronously under the lock rejects with its error and is not run a second time', async () => {
    const exclusive = webLocks(fakeLocks())!;
    let runs = 0;
    const error = new TypeError('thrown before any await');
    const body = ((): Promise<string> => {
      runs++;
      throw error;
    }) as () => Promise<string>;
    await expect(exclusive('id', body, { signal: undefined, maxWaitMs: 1_000 })).rejects.toBe(error);
    expect(runs).toBe(1);
  });
});
