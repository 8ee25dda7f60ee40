import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { captureBody, DEFAULT_MAX_BODY_BYTES } from '../../src/operation/body.js';

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

import { streamOf } from '../helpers/streams.js';

describe('captureBody', () => {
  it('documents a 1 MiB default cap', () => {
    expect(DEFAULT_MAX_BODY_BYTES).toBe(1_048_576);
  });

  it.each([null, undefined])('%s → no body', async (body) => {
    expect(await captureBody(body)).toEqual({ bytes: undefined, impliedContentType: undefined });
  });

  it.each<[string, () => BodyInit, Uint8Array, string | undefined]>([
    ['string as UTF-8', () => 'héllo €', utf8('héllo €'), 'text/plain;charset=UTF-8'],
    ['empty string', () => '', new Uint8Array(0), 'text/plain;charset=UTF-8'],
    ['URLSearchParams', () => new URLSearchParams([['b', 'x y'], ['a', 'é&']]), utf8('b=x+y&a=%C3%A9%26'), 'application/x-www-form-urlencoded;charset=UTF-8'],
    ['ArrayBuffer', () => Uint8Array.from([1, 2, 3]).buffer, Uint8Array.from([1, 2, 3]), undefined],
    ['Uint8Array view with offset', () => Uint8Array.from([0, 1, 2, 3, 4, 5, 6, 7]).subarray(3, 6), Uint8Array.from([3, 4, 5]), undefined],
    ['DataView with offset', () => new DataView(Uint8Array.from([9, 8, 7, 6]).buffer, 1, 2), Uint8Array.from([8, 7]), undefined],
    ['Uint16Array view', () => new Uint16Array(Uint16Array.from([1, 0x0203, 4]).buffer, 2, 1), new Uint8Array(new Uint16Array([0x0203]).buffer), undefined],
    ['typed Blob', () => new Blob(['{"a":1}'], { type: 'application/json' }), utf8('{"a":1}'), 'application/json'],
    ['untyped Blob', () => new Blob([Uint8Array.from([5, 6])]), Uint8Array.from([5, 6]), undefined],
    ['ReadableStream', () => streamOf([utf8('ab'), utf8(''), utf8('cd')]), utf8('abcd'), undefined],
  ])('%s', async (_name, make, bytes, contentType) => {
    const captured = await captureBody(make());
    expect(captured.bytes).toEqual(new Uint8Array(bytes));
    expect(captured.impliedContentType).toBe(contentType);
  });

  it('copies the bytes, so later writes to the source do not change them', async () => {
    const source = Uint8Array.from([0, 1, 2, 3, 4, 5]);
    const view = source.subarray(2, 4);
    const fromView = await captureBody(view);
    const fromBuffer = await captureBody(source.buffer);
    source.fill(0xff);
    expect(fromView.bytes).toEqual(Uint8Array.from([2, 3]));
    expect(fromView.bytes?.buffer.byteLength).toBe(2); // not the whole underlying buffer
    expect(fromBuffer.bytes).toEqual(Uint8Array.from([0, 1, 2, 3, 4, 5]));
  });

  it('accepts a stream exactly at the cap', async () => {
    const captured = await captureBody(streamOf([new Uint8Array(6), new Uint8Array(4)]), 10);
    expect(captured.bytes?.byteLength).toBe(10);
  });

  it('rejects a stream over the cap, naming the cap and maxBodyBytes, and cancels it', async () => {
    let cancelled: unknown = 'not cancelled';
    let pulled = 0;
    const chunks = [new Uint8Array(6), new Uint8Array(5), new Uint8Array(100)];
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const chunk = chunks[pulled++];
        if (chunk === undefined) controller.close();
        else controller.enqueue(chunk);
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    const error: unknown = await captureBody(stream, 10).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toMatch(/10-byte .*maxBodyBytes/);
    expect(cancelled).toBe(error);
    expect(pulled).toBeLessThan(3);
  });

  it.each<[string, () => BodyInit]>([
    ['string', () => 'x'.repeat(11)],
    ['multi-byte string', () => '€€€€'], // 12 bytes, 4 code units
    ['ArrayBuffer', () => new ArrayBuffer(11)],
    ['view', () => new Uint8Array(20).subarray(0, 11)],
    ['Blob', () => new Blob([new Uint8Array(11)])],
    ['URLSearchParams', () => new URLSearchParams({ a: '123456789' })],
  ])('applies the cap to a %s body too', async (_name, make) => {
    await expect(captureBody(make(), 10)).rejects.toThrow(/maxBodyBytes/);
    await expect(captureBody(make(), 10)).rejects.toBeInstanceOf(RangeError);
  });

  it('uses the 1 MiB default cap', async () => {
    await expect(captureBody('x'.repeat(DEFAULT_MAX_BODY_BYTES))).resolves.toBeDefined();
    await expect(captureBody('x'.repeat(DEFAULT_MAX_BODY_BYTES + 1))).rejects.toThrow(/1048576-byte/);
  });

  it('accepts Infinity as "no cap"', async () => {
    const captured = await captureBody(new Uint8Array(2 * DEFAULT_MAX_BODY_BYTES), Infinity);
    expect(captured.bytes?.byteLength).toBe(2 * DEFAULT_MAX_BODY_BYTES);
  });

  it.each([-1, 1.5, NaN])('rejects maxBytes %s', async (maxBytes) => {
    await expect(captureBody('x', maxBytes)).rejects.toThrow(RangeError);
    await expect(captureBody('x', maxBytes)).rejects.toThrow(/maxBodyBytes/);
  });

  it('serialises FormData once, as multipart with its boundary as the implied content type', async () => {
    const form = new FormData();
    form.append('a', '1');
    const { bytes, impliedContentType } = await captureBody(form);
    const boundary = /boundary=(\S+)/.exec(impliedContentType ?? '')?.[1];
    expect(impliedContentType).toMatch(/^multipart\/form-data; boundary=/);
    const text = new TextDecoder().decode(bytes);
    expect(text).toContain(`--${boundary}`);
    expect(text).toContain('name="a"');
  });

  it('rejects a stream that yields something other than Uint8Array', async () => {
    let cancelled = false;
    const stream = streamOf(['text'], () => {
      cancelled = true;
    });
    await expect(captureBody(stream)).rejects.toThrow(/Uint8Array chunks, got string/);
    expect(cancelled).toBe(true);
  });

  it('rejects an unsupported body type', async () => {
    await expect(captureBody({ not: 'a body' } as unknown as BodyInit)).rejects.toThrow(/type Object/);
  });

  it.each<[string, unknown]>([
    ['a plain object', { a: 1 }],
    ['an object without prototype', Object.assign(Object.create(null) as object, { a: 1 })],
    ['an array', [1, 2]],
  ])('refuses %s with a hint to pass it as JSON', async (_label, body) => {
    await expect(captureBody(body as BodyInit)).rejects.toThrow('(pass JSON.stringify(body) with a content-type: application/json header)');
  });

  it('gives no JSON hint for a class instance (a Map is no JSON)', async () => {
    const refused = captureBody(new Map([['a', 1]]) as unknown as BodyInit);
    await expect(refused).rejects.toThrow(/type Map$/);
  });
});

describe('client.fetch with a body it cannot capture', () => {
  it('a plain object is refused with a hint to pass it as JSON, before anything is sent', async () => {
    let sent = 0;
    const client = createClient({ store: memoryStore(), fetch: () => Promise.resolve(new Response(null, { status: (sent++, 201) })) });
    try {
      const call = client.fetch('https://api.example.com/orders', { method: 'POST', body: { a: 1 } as unknown as BodyInit, once: { action: 'create-order', ref: 'o-2' } });
      await expect(call).rejects.toThrow('cannot capture a request body of type Object (pass JSON.stringify(body) with a content-type: application/json header)');
      expect(sent).toBe(0);
    } finally {
      await client.close();
    }
  });
});
