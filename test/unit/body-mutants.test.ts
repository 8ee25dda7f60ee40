/**
 * Tests written to kill hand-made mutants of src/operation/body.ts that the other suites let survive:
 * the zero and negative caps, the cap on FormData and on an oversize Blob before it is read, cross-realm ArrayBuffers,
 * locked or already-read request streams, chunks a producer reuses, the reader released, a source
 * whose cancel rejects, and readBody's own paths (an already-aborted signal, a read given up that never
 * returns its part read nor reads on, a used body, a body that is no web stream, a chunk that is no
 * Uint8Array or only claims to be one, the watch undone once, the cross-bundle WHOLE_BODY mark).
 */
import { runInNewContext } from 'node:vm';

import { describe, expect, it } from 'vitest';

import { captureBody, readBody } from '../../src/operation/body.js';

const utf8 = (text: string): Uint8Array<ArrayBuffer> => new TextEncoder().encode(text);

import { streamOf } from '../helpers/streams.js';

const never = (): void => undefined;

describe('captureBody: caps', () => {
  it('a cap of 0 is valid: an empty body passes, one byte is refused', async () => {
    expect((await captureBody('', 0)).bytes).toEqual(new Uint8Array(0));
    expect((await captureBody(new Uint8Array(0), 0)).bytes).toEqual(new Uint8Array(0));
    await expect(captureBody('x', 0)).rejects.toThrow(/0-byte .*maxBodyBytes/);
  });

  it('refuses a negative cap as invalid, even for an empty body that no cap could exceed', async () => {
    await expect(captureBody('', -1)).rejects.toThrow('maxBodyBytes must be a non-negative integer or Infinity, got -1');
    await expect(captureBody(new Uint8Array(0), -5)).rejects.toBeInstanceOf(RangeError);
  });

  it('applies the cap to FormData, whose multipart bytes are larger than its fields', async () => {
    const form = new FormData();
    form.append('a', '1');
    const whole = await captureBody(form);
    const size = whole.bytes?.byteLength ?? 0;
    expect(size).toBeGreaterThan(1);
    await expect(captureBody(form, size - 1)).rejects.toBeInstanceOf(RangeError);
    await expect(captureBody(form, size - 1)).rejects.toThrow(/maxBodyBytes/);
    expect((await captureBody(form, size)).bytes?.byteLength).toBe(size);
  });

  it('refuses a Blob over the cap from its size, before reading its bytes', async () => {
    let reads = 0;
    class CountingBlob extends Blob {
      override arrayBuffer(): Promise<ArrayBuffer> {
        reads++;
        return super.arrayBuffer();
      }
    }
    await expect(captureBody(new CountingBlob([new Uint8Array(11)]), 10)).rejects.toBeInstanceOf(RangeError);
    expect(reads).toBe(0);
    expect((await captureBody(new CountingBlob([new Uint8Array(10)]), 10)).bytes?.byteLength).toBe(10);
    expect(reads).toBe(1);
  });
});

describe('captureBody: ArrayBuffers', () => {
  it('accepts an ArrayBuffer of another realm, copying its bytes', async () => {
    const foreign = runInNewContext('new Uint8Array([7, 8, 9]).buffer') as ArrayBuffer;
    expect(foreign instanceof ArrayBuffer).toBe(false);
    const captured = await captureBody(foreign);
    expect(captured.bytes).toEqual(Uint8Array.from([7, 8, 9]));
    expect(captured.impliedContentType).toBeUndefined();
    await expect(captureBody(foreign, 2)).rejects.toBeInstanceOf(RangeError);
  });

  it('accepts an ArrayBuffer of this realm whatever its toStringTag says', async () => {
    const buffer = Uint8Array.from([1, 2]).buffer;
    Object.defineProperty(buffer, Symbol.toStringTag, { value: 'Something' });
    expect((await captureBody(buffer)).bytes).toEqual(Uint8Array.from([1, 2]));
  });
});

describe('captureBody: request streams', () => {
  it('refuses a locked stream with the locked-or-read message, and leaves it untouched', async () => {
    const stream = streamOf([utf8('ab')]);
    const holder = stream.getReader();
    await expect(captureBody(stream)).rejects.toThrow('a request body stream must not be locked or already read from');
    expect(await holder.read()).toEqual({ done: false, value: utf8('ab') });
  });

  it('refuses a stream already read from: the rest of it is not the body', async () => {
    const stream = streamOf([utf8('ab'), utf8('cd')]);
    const reader = stream.getReader();
    await reader.read();
    reader.releaseLock();
    await expect(captureBody(stream)).rejects.toThrow('a request body stream must not be locked or already read from');
  });

  it('keeps each chunk as it was when read, though its producer writes the same buffer again', async () => {
    const shared = new Uint8Array(2);
    let n = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (n === 3) {
          controller.close();
          return;
        }
        shared.set([0x61 + n, 0x61 + n]);
        n++;
        controller.enqueue(shared);
      },
    });
    const captured = await captureBody(stream);
    expect(new TextDecoder().decode(captured.bytes)).toBe('aabbcc');
  });

  it('releases its reader: the stream read whole is left unlocked', async () => {
    const stream = streamOf([utf8('ab')]);
    await captureBody(stream);
    expect(stream.locked).toBe(false);
  });

  it('releases its reader when refusing an oversize stream too', async () => {
    const stream = streamOf([new Uint8Array(6), new Uint8Array(6)]);
    await expect(captureBody(stream, 10)).rejects.toBeInstanceOf(RangeError);
    expect(stream.locked).toBe(false);
  });

  it('a source whose cancel rejects: the cap error is the one reported', async () => {
    const stream = streamOf([new Uint8Array(11)], () => Promise.reject(new Error('cancel failed')));
    await expect(captureBody(stream, 10)).rejects.toThrow(/10-byte .*maxBodyBytes/);
  });

  it('names a null chunk as an object', async () => {
    await expect(captureBody(streamOf([null]))).rejects.toThrow('a request body stream must yield Uint8Array chunks, got object');
  });
});

describe('captureBody: refused bodies', () => {
  it('names an instance of an anonymous class "object"', async () => {
    const Anonymous = [class {}][0]!;
    expect(Anonymous.name).toBe('');
    await expect(captureBody(new Anonymous() as unknown as BodyInit)).rejects.toThrow(/cannot capture a request body of type object$/);
  });
});

describe('readBody', () => {
  it('with a signal already aborted: cancels the source at once and rejects with the reason, whatever the body', async () => {
    let cancelled: unknown = 'not cancelled';
    const reason = new Error('gone');
    const controller = new AbortController();
    controller.abort(reason);
    const response = new Response(streamOf([utf8('ab'), utf8('cd')], (r) => void (cancelled = r)));
    await expect(readBody(response, controller.signal, never)).rejects.toBe(reason);
    expect(cancelled).toBe(reason);
  });

  it('a body already used is refused as arrayBuffer() refuses it, not read as empty', async () => {
    const response = new Response('abc');
    await response.text();
    let watched = 0;
    await expect(
      readBody(response, new AbortController().signal, () => {
        watched++;
      }),
    ).rejects.toBeInstanceOf(TypeError);
    expect(watched).toBe(0);
  });

  it('a body read from and released is refused, not its rest returned as the whole body', async () => {
    const response = new Response(streamOf([utf8('ab'), utf8('cd')]));
    const reader = response.body!.getReader();
    await reader.read();
    reader.releaseLock();
    expect(response.bodyUsed).toBe(true);
    await expect(readBody(response, new AbortController().signal, never)).rejects.toBeInstanceOf(TypeError);
  });

  it('a body that is no web stream (another fetch’s) is read with arrayBuffer()', async () => {
    const like = {
      body: { pipe: never },
      bodyUsed: false,
      arrayBuffer: () => Promise.resolve(utf8('xyz').buffer),
    } as unknown as Response;
    expect(new TextDecoder().decode(await readBody(like, new AbortController().signal, never))).toBe('xyz');
  });

  it('refuses a chunk that only claims to be a Uint8Array by its tag, and cancels the source', async () => {
    let cancelled = false;
    const fake = { [Symbol.toStringTag]: 'Uint8Array', byteLength: 2, length: 2, 0: 1, 1: 2 };
    const response = new Response(streamOf([utf8('ab'), fake], () => void (cancelled = true)));
    await expect(readBody(response, new AbortController().signal, never)).rejects.toThrow('a response body chunk is not a Uint8Array');
    expect(cancelled).toBe(true);
  });

  it.each<[string, unknown]>([
    ['a string', 'cd'],
    ['a DataView', new DataView(new ArrayBuffer(2))],
    ['a Uint16Array', new Uint16Array(1)],
  ])('refuses a chunk that is %s and cancels the source', async (_name, chunk) => {
    let cancelled = false;
    const response = new Response(streamOf([utf8('ab'), chunk, utf8('ef')], () => void (cancelled = true)));
    await expect(readBody(response, new AbortController().signal, never)).rejects.toThrow('a response body chunk is not a Uint8Array');
    expect(cancelled).toBe(true);
  });

  it('a body given up whose source refuses to be cancelled is read no further', async () => {
    let reads = 0;
    const reader = {
      read: () => Promise.resolve(reads++ < 5 ? { done: false, value: utf8('x') } : { done: true, value: undefined }),
      cancel: () => {
        throw new Error('cannot cancel');
      },
      releaseLock: never,
    };
    const like = { body: { getReader: () => reader }, bodyUsed: false, arrayBuffer: () => Promise.reject(new Error('not this way')) } as unknown as Response;
    const reason = new Error('gone');
    const controller = new AbortController();
    controller.abort(reason);
    await expect(readBody(like, controller.signal, never)).rejects.toBe(reason);
    expect(reads).toBe(1);
  });

  it('calls what watch returned exactly once, when the read ends, whole or refused', async () => {
    let unwatched = 0;
    const watch = (): (() => void) => () => void unwatched++;
    const bytes = await readBody(new Response(streamOf([utf8('ab'), utf8('cd')])), new AbortController().signal, watch);
    expect(new TextDecoder().decode(bytes)).toBe('abcd');
    expect(unwatched).toBe(1);
    await expect(readBody(new Response(streamOf(['x'])), new AbortController().signal, watch)).rejects.toThrow(TypeError);
    expect(unwatched).toBe(2);
  });

  it('reads a Response marked by the registered WHOLE_BODY symbol (another bundle’s) with arrayBuffer(), not its body', async () => {
    const response = new Response('whole');
    Object.defineProperty(response, Symbol.for('oncefetch.whole-body'), { value: true });
    Object.defineProperty(response, 'body', {
      get: () => {
        throw new Error('body touched');
      },
    });
    expect(new TextDecoder().decode(await readBody(response, new AbortController().signal, never))).toBe('whole');
  });

  it('a cancel given mid-read stops the read: it rejects with the reason, never returning the part read', async () => {
    const reason = new Error('given up');
    const controller = new AbortController();
    let pulls = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        pulls++;
        if (pulls === 2) controller.abort(reason);
        c.enqueue(utf8('x'));
      },
    });
    const read = readBody(new Response(stream), controller.signal, (r) => {
      const giveUp = (): void => r.cancel(controller.signal.reason);
      controller.signal.addEventListener('abort', giveUp, { once: true });
      return () => controller.signal.removeEventListener('abort', giveUp);
    });
    await expect(read).rejects.toBe(reason);
  });
});
