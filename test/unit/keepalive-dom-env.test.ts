/**
 * keepalive under a DOM emulation in Node (jsdom, happy-dom): they give Node a
 * `navigator.onLine` (always true in both), but Node's fetch sends the request
 * and has no 64 KiB keepalive limit, so client.fetch must not refuse it as a
 * browser would. (jsdom is not installed here: its navigator is stubbed. The
 * browser's refusal is tested in real Chromium, test/browser/web-faults.test.ts.)
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

let server: Server;
let url: string;
const received: number[] = [];

beforeEach(async () => {
  received.length = 0;
  server = createServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => (bytes += chunk.byteLength));
    req.on('end', () => {
      received.push(bytes);
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"o-1"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
});

afterEach(async () => {
  vi.unstubAllGlobals();
  await new Promise((resolve) => server.close(resolve));
});

describe('client.fetch keepalive with a body over 64 KiB, in Node under a DOM emulation', () => {
  it.each([
    ['jsdom', 'Mozilla/5.0 (linux) AppleWebKit/537.36 (KHTML, like Gecko) jsdom/24.0.0'],
    ['happy-dom', 'Mozilla/5.0 (X11; Linux x64) AppleWebKit/537.36 (KHTML, like Gecko) HappyDOM/0.0.0'],
  ])('%s: sent by Node\'s fetch, not refused as in a browser', async (_name, userAgent) => {
    vi.stubGlobal('navigator', { onLine: true, userAgent });
    const client = createClient({ store: memoryStore() });
    try {
      const res = await client.fetch(url, { method: 'POST', body: new Uint8Array(70_000), keepalive: true, once: { action: 'upload', ref: 'big-1' } });
      expect(res.status).toBe(201);
      expect(received).toEqual([70_000]);
    } finally {
      await client.close();
    }
  });
});
