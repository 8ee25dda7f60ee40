import type { LockManagerLike } from '../../src/web-locks.js';

/**
 * A LockManager as the Web Locks contract has it, in memory: one holder per name at a time, the
 * others queued in order; a waiter's abort rejects its request with the signal's reason. Every name
 * asked for is pushed to `names`.
 */
export function fakeLocks(names: string[] = []): LockManagerLike {
  const held = new Map<string, Promise<void>>();
  return {
    request: async (name, options, callback) => {
      names.push(name);
      const previous = held.get(name) ?? Promise.resolve();
      let release!: () => void;
      held.set(name, new Promise<void>((r) => (release = r)));
      try {
        await new Promise<void>((resolve, reject) => {
          previous.then(resolve, resolve);
          options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
        });
        return await callback();
      } finally {
        release();
      }
    },
  };
}
