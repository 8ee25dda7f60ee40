/**
 * A response body that never ends, for tests of bodies given up mid-read, and a bounded wait.
 */

export const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A body that trickles `chunk` every 5 ms, forever, until its cancel is called; counts its pulls after that. */
export function trickle(chunk: string) {
  const seen = { cancelled: false, reason: undefined as unknown, pullsAfterCancel: 0 };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (seen.cancelled) seen.pullsAfterCancel++;
      await tick(5);
      controller.enqueue(new TextEncoder().encode(chunk));
    },
    cancel(reason) {
      seen.cancelled = true;
      seen.reason = reason;
    },
  });
  return { body, seen };
}

/** Waits (at most `ms`) until `done()` holds. */
export async function until(done: () => boolean, ms = 1_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await tick(5);
}
