/** A web stream that hands out `chunks` one pull at a time (whatever they are), then closes; `onCancel` sees a cancel and its result is the cancel's. */
export function streamOf(chunks: readonly unknown[], onCancel?: (reason: unknown) => void | Promise<void>): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++] as Uint8Array);
      else controller.close();
    },
    cancel(reason) {
      return onCancel?.(reason);
    },
  });
}
