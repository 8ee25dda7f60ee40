/**
 * Two requests under one ref that mean different things must never share a fingerprint: the
 * second would be answered with the first's replayed result while its own effect never happens.
 * Each case sends the first request, then the second under the same ref, and counts what reached
 * the provider: the second must end in IdempotencyConflictError with nothing sent. Beside them, the
 * same request spelled another way (or a form serialised again) must stay one operation.
 */
import { once as onceEvent } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IdempotencyConflictError } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
let client: OnceClient;

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
  client = sqliteClient(join(tmp.dir, 'once.db')).client;
});

afterEach(async () => {
  await client.close();
  await provider.close();
  tmp.cleanup();
});

/** A JSON order whose amount is written as given (JSON.stringify cannot write every literal). */
const order = (ref: string, amount: string): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: `{"ref":"${ref}","sku":"A-17","qty":1,"amount":${amount}}`,
});

describe('JSON numbers: one double, two amounts', () => {
  // JSON.parse reads both as 1, but a provider that reads decimals (BigDecimal, Decimal,
  // PostgreSQL numeric) books two amounts. Before the fix the second call got the first's 201.
  it.each([
    ['9007199254740993', '9007199254740992'], // an unsafe integer: refused canonicalisation already
    ['1.000000000000000001', '1'],
    ['0.30000000000000001', '0.3'],
    ['1e-400', '0'],
  ])('an amount of %s then %s under one ref: the second is a conflict, never a replay', async (first, second) => {
    const once = { action: 'create-order', ref: 'F-1' };
    const res = await client.fetch(`${provider.url}/orders`, { ...order('F-1', first), once });
    expect(res.status).toBe(201);
    const err = await client.fetch(`${provider.url}/orders`, { ...order('F-1', second), once }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyConflictError);
    expect(provider.requests.map((r) => r.bodyText)).toEqual([order('F-1', first).body]);
    expect(provider.effects).toBe(1);
  });

  it('the same amount spelled another way is still one operation: replayed, not sent again', async () => {
    const once = { action: 'create-order', ref: 'F-2' };
    expect((await client.fetch(`${provider.url}/orders`, { ...order('F-2', '1.50'), once })).status).toBe(201);
    const again = await client.fetch(`${provider.url}/orders`, { ...order('F-2', '15E-1'), once });
    expect(again.status).toBe(201);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);
  });
});

describe('a byte order mark', () => {
  // The provider (JSON.parse, as Go's encoding/json) refuses a BOM-led body with a 400; the
  // fingerprint dropped the BOM, so such a body got the 201 of the same JSON without it.
  it('a BOM-led JSON body is not the same request as the body without it', async () => {
    const once = { action: 'create-order', ref: 'F-3' };
    const plain = order('F-3', '1');
    expect((await client.fetch(`${provider.url}/orders`, { ...plain, once })).status).toBe(201);
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(String(plain.body))]);
    const err = await client.fetch(`${provider.url}/orders`, { ...plain, body: withBom, once }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyConflictError);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);
  });
});

describe('multipart forms', () => {
  /** A loopback endpoint that takes any body: every request it sees is an effect. */
  async function formEndpoint(): Promise<{ url: string; bodies: string[]; close: () => Promise<void> }> {
    const bodies: string[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        bodies.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ effect: bodies.length }));
      });
    });
    server.listen(0, '127.0.0.1');
    await onceEvent(server, 'listening');
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}/uploads`, bodies, close: () => new Promise((r) => server.close(() => r())) };
  }

  // A field value holding the text the fingerprint puts where each boundary stood made a form of
  // one field compare like a form of two: the second form got the first's 201, and its field g
  // never reached the provider.
  it('a form of one field whose value spells a delimiter is not the form of two fields it resembles', async () => {
    const endpoint = await formEndpoint();
    try {
      const once = { action: 'upload', ref: 'F-4' };
      const crafted = new FormData();
      crafted.set('f', 'x\r\n--\u0000boundary\u0000\r\nContent-Disposition: form-data; name="g"\r\n\r\ny');
      expect((await client.fetch(endpoint.url, { method: 'POST', body: crafted, once })).status).toBe(201);
      const honest = new FormData();
      honest.set('f', 'x');
      honest.set('g', 'y');
      const err = await client.fetch(endpoint.url, { method: 'POST', body: honest, once }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyConflictError);
      expect(endpoint.bodies).toHaveLength(1);
    } finally {
      await endpoint.close();
    }
  });

  it('the same form, serialised again under a new boundary, is still one operation', async () => {
    const endpoint = await formEndpoint();
    try {
      const once = { action: 'upload', ref: 'F-5' };
      const form = (): FormData => {
        const f = new FormData();
        f.set('f', 'x');
        f.set('file', new Blob(['\u0000boundary'], { type: 'text/plain' }), 'a.txt');
        return f;
      };
      expect((await client.fetch(endpoint.url, { method: 'POST', body: form(), once })).status).toBe(201);
      expect((await client.fetch(endpoint.url, { method: 'POST', body: form(), once })).status).toBe(201);
      expect(endpoint.bodies).toHaveLength(1);
    } finally {
      await endpoint.close();
    }
  });
});
