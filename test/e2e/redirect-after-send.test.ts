/**
 * Regression (review): a request that was answered with a redirect had reached the provider. When
 * following that redirect then fails to connect (refused, or a certificate the client refuses),
 * the transport's error carried the connect-phase code and the attempt was classified `not_sent`:
 * the POST was resent at once and acted twice (303 See Other is how a provider says "created,
 * look here"). Once any response has come back, a later failure is `ambiguous`.
 */
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyError } from '../../src/classify/classify.js';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import { requestFetch } from '../../src/node-defaults.js';

// A self-signed certificate for 127.0.0.1 (valid until 2126): the client refuses it
// (DEPTH_ZERO_SELF_SIGNED_CERT), after the handshake started, before any request byte.
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZFgB8nxJn/CiA/zR
7D3L1jE2/F1DBtOqwlUC4QVPW/ehRANCAAT2MjcUUk8aG6yb/9Sq2KgulYLdJX92
kmhzZrx43mT/WhcSCDLqEGkeDsz7SxHp4rRRwV6/jBHD54C91ZUjE1ss
-----END PRIVATE KEY-----`;
const CERT = `-----BEGIN CERTIFICATE-----
MIIBkDCCATagAwIBAgIUb5P1TXlEPH1+nVanLbtt8OccYcYwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyOTIwMjkxMloYDzIxMjYxMTA1
MjAyOTEyWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAT2MjcUUk8aG6yb/9Sq2KgulYLdJX92kmhzZrx43mT/WhcSCDLqEGke
Dsz7SxHp4rRRwV6/jBHD54C91ZUjE1sso2QwYjAdBgNVHQ4EFgQUUFiUXG4xFpNn
iLlWq5qCo9KOgtUwHwYDVR0jBBgwFoAUUFiUXG4xFpNniLlWq5qCo9KOgtUwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0gAMEUC
IQD2Z7Muhkw5pOUvIsKGjBYS4/MkS+KfiWcd74qiHGMcDQIgSlcrdlFIWclTCV70
lpwQQQY79KkngZAkcPwlWcenRL0=
-----END CERTIFICATE-----`;

let provider: Server;
let tls: TlsServer;
let base: string;
let refusedUrl: string;
let untrustedUrl: string;
let effects = 0;

beforeAll(async () => {
  tls = createTlsServer({ key: KEY, cert: CERT }, (_req, res) => res.end('{}'));
  await new Promise<void>((done) => tls.listen(0, '127.0.0.1', done));
  untrustedUrl = `https://127.0.0.1:${(tls.address() as AddressInfo).port}/orders/1`;
  // a port nobody listens on: bind one, note it, close it
  const closed = createServer();
  await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
  refusedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/orders/1`;
  await new Promise((done) => closed.close(done));

  provider = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      effects++; // the order is created, then the client is sent to look at it
      const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to');
      res.writeHead(303, { location: to === 'tls' ? untrustedUrl : to === 'invalid' ? 'http://[::1/orders/1' : refusedUrl });
      res.end();
    });
  });
  await new Promise<void>((done) => provider.listen(0, '127.0.0.1', done));
  base = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
});

afterAll(async () => {
  provider.closeAllConnections();
  tls.closeAllConnections();
  await Promise.all([new Promise((done) => provider.close(done)), new Promise((done) => tls.close(done))]);
});

describe('a redirect followed after the provider answered', () => {
  const cases = [
    ['refused', '', 'direct'],
    ['refused', '', 'through undici fetch (accept-encoding)'],
    ['a refused certificate', 'tls', 'direct'],
    ['a refused certificate', 'tls', 'through undici fetch (accept-encoding)'],
    ['an invalid URL (ERR_INVALID_URL)', 'invalid', 'direct'],
    ['an invalid URL (ERR_INVALID_URL)', 'invalid', 'through undici fetch (accept-encoding)'],
  ] as const;
  it.each(cases)('a 303 target %s (%s, %s) is ambiguous: the POST is not resent', async (_what, to, path) => {
    effects = 0;
    const client = createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 } });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (path !== 'direct') headers['accept-encoding'] = 'identity';
    const error: unknown = await client
      .fetch(`${base}/orders?to=${to}`, { method: 'POST', headers, body: '{"sku":"A-17"}', once: { action: 'create-order', ref: `r-${to}-${path}` } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(effects).toBe(1);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    await client.close();
  });

  it.each([['direct', {}], ['through undici fetch', { 'accept-encoding': 'identity' }]] as const)(
    'a first hop refused (%s) still classifies not_sent: nothing was answered',
    async (_path, headers) => {
      for (const url of [refusedUrl, untrustedUrl]) {
        const error: unknown = await requestFetch()(url, { method: 'POST', headers, body: '{}' }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(classifyError(error, 'awaiting_response').class).toBe('not_sent');
      }
    },
  );
});
