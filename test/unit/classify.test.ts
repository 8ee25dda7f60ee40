import net from 'node:net';

import { afterAll, describe, expect, it, vi } from 'vitest';

import {
  applyOverride,
  classifyError,
  classifyResponse,
  needsBody,
  type AttemptPhase,
  type Classification,
  type ClassifyOverride,
  type OutcomeClass,
} from '../../src/classify/classify.js';

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);

function coded(code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`boom ${code}`), { code, ...extra });
}

function fetchFailed(cause: unknown): TypeError {
  return new TypeError('fetch failed', { cause });
}

function named(name: string): Error {
  const error = new Error(name);
  error.name = name;
  return error;
}

const IETF_IN_PROGRESS = JSON.stringify({
  type: 'https://developer.example.com/idempotency/docs',
  title: 'A request is outstanding for this Idempotency-Key',
  detail: 'A request with the same Idempotency-Key for the same operation is being processed or is outstanding.',
});
const IETF_MISMATCH = JSON.stringify({
  type: 'https://developer.example.com/idempotency/docs',
  title: 'Idempotency-Key is already used',
  detail: 'Idempotency Key MUST not be reused across different payloads of this operation.',
});
const STRIPE_MISMATCH = JSON.stringify({
  error: {
    type: 'idempotency_error',
    message: "Keys for idempotent requests can only be used with the same parameters they were first used with.",
  },
});
const STRIPE_IN_USE = JSON.stringify({ error: { code: 'idempotency_key_in_use', type: 'invalid_request_error' } });

describe('classifyResponse: status table', () => {
  it.each<[string, number, Record<string, string>, string | undefined, OutcomeClass]>([
    ['200', 200, {}, undefined, 'success'],
    ['201', 201, {}, undefined, 'success'],
    ['204', 204, {}, undefined, 'success'],
    ['2xx ignores x-should-retry', 200, { 'x-should-retry': 'true' }, undefined, 'success'],
    ['301 with redirect manual', 301, {}, undefined, 'terminal'],
    ['303 See Other with redirect manual: done, look here', 303, {}, undefined, 'success'],
    ['303 ignores x-should-retry: true (the provider said done)', 303, { 'x-should-retry': 'true' }, undefined, 'success'],
    ['307 with redirect manual', 307, {}, undefined, 'terminal'],
    ['304', 304, {}, undefined, 'terminal'],
    ['408', 408, {}, undefined, 'retryable'],
    ['425', 425, {}, undefined, 'retryable'],
    ['429', 429, {}, undefined, 'retryable'],
    ['503', 503, {}, undefined, 'retryable'],
    ['409 IETF in-progress', 409, {}, IETF_IN_PROGRESS, 'retryable'],
    ['409 Stripe idempotency_key_in_use', 409, {}, STRIPE_IN_USE, 'retryable'],
    ['409 "in progress"', 409, {}, 'request in progress', 'retryable'],
    ['409 plain conflict', 409, {}, '{"error":"version conflict"}', 'terminal'],
    ['409 without body', 409, {}, undefined, 'terminal'],
    // payment providers that say "in progress" with a 422 (PayPal, Adyen 704): not processed, later
    ['422 PayPal PREVIOUS_REQUEST_IN_PROGRESS', 422, {}, '{"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS"}]}', 'retryable'],
    ['422 Adyen 704 already processed or in progress', 422, {}, '{"errorCode":"704","message":"request already processed or in progress"}', 'retryable'],
    ['422 "outstanding" validation stays terminal', 422, {}, '{"error":"amount exceeds the outstanding balance"}', 'terminal'],
    ['422 "in progress" without "request" stays terminal', 422, {}, '{"error":"capture in progress for this authorization"}', 'terminal'],
    ['422 PayPal, whole body', 422, {}, '{"name":"UNPROCESSABLE_ENTITY","details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS","description":"A previous request on this resource is currently in progress."}]}', 'retryable'],
    // "request" from another JSON string (a key, an error type or code) before a validation message: terminal
    ['422 request_id key, then a validation "in progress"', 422, {}, '{"request_id":"req_8f2","message":"Order in progress, it cannot be modified"}', 'terminal'],
    ['422 INVALID_REQUEST_ERROR category, then a validation "in progress"', 422, {}, '{"errors":[{"category":"INVALID_REQUEST_ERROR","code":"BAD_REQUEST","detail":"Refund in progress"}]}', 'terminal'],
    ['422 invalid_request error code, then a validation "in progress"', 422, {}, '{"error":"invalid_request","error_description":"verification in progress"}', 'terminal'],
    ['x-should-retry: false on 422 request_id then "in progress": terminal, not ambiguous', 422, { 'x-should-retry': 'false' }, '{"request_id":"req_8f2","message":"Order in progress"}', 'terminal'],
    ['x-should-retry: false on 422 in progress', 422, { 'x-should-retry': 'false' }, '{"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS"}]}', 'ambiguous'],
    ['422 PayPal PAYPAL_REQUEST_ID_PREVIOUSLY_USED', 422, {}, '{"details":[{"issue":"PAYPAL_REQUEST_ID_PREVIOUSLY_USED"}]}', 'conflict'],
    ['400 PayPal DUPLICATE_REQUEST_ID', 400, {}, '{"name":"DUPLICATE_REQUEST_ID"}', 'conflict'],
    ['500', 500, {}, undefined, 'ambiguous'],
    ['502', 502, {}, undefined, 'ambiguous'],
    ['504', 504, {}, undefined, 'ambiguous'],
    ['507 (other 5xx)', 507, {}, undefined, 'ambiguous'],
    ['599 (other 5xx)', 599, {}, undefined, 'ambiguous'],
    ['501', 501, {}, undefined, 'terminal'],
    ['505', 505, {}, undefined, 'terminal'],
    ['400', 400, {}, '{"error":"missing field amount"}', 'terminal'],
    ['401', 401, {}, undefined, 'terminal'],
    ['403', 403, {}, undefined, 'terminal'],
    ['404', 404, {}, undefined, 'terminal'],
    ['422 validation', 422, {}, '{"error":"amount must be positive"}', 'terminal'],
    ['422 without body', 422, {}, undefined, 'terminal'],
    ['417', 417, {}, undefined, 'terminal'],
    ['418 (other 4xx)', 418, {}, undefined, 'terminal'],
    ['422 IETF mismatch', 422, {}, IETF_MISMATCH, 'conflict'],
    ['400 Stripe idempotency_error', 400, {}, STRIPE_MISMATCH, 'conflict'],
    ['417 key mismatch', 417, {}, 'Idempotency key mismatch', 'conflict'],
    ['400 key reused', 400, {}, 'This idempotency-key was reused with a different body', 'conflict'],
    ['400 reuse before idempotency', 400, {}, 'reuse of idempotency key with other payload', 'conflict'],
    ['400 idempotency-key-is-being-reused type', 400, {}, '{"type":"urn:x:idempotency-key-is-being-reused"}', 'conflict'],
    ['409 with mismatch text is not a conflict status', 409, {}, 'Idempotency key mismatch', 'terminal'],
    ['500 with mismatch text is not a conflict status', 500, {}, 'Idempotency key mismatch', 'ambiguous'],
    ['x-should-retry: true on 400', 400, { 'x-should-retry': 'true' }, undefined, 'retryable'],
    ['x-should-retry: true on 500', 500, { 'x-should-retry': 'true' }, undefined, 'retryable'],
    ['x-should-retry: TRUE (case-insensitive)', 404, { 'x-should-retry': 'TRUE' }, undefined, 'retryable'],
    ['x-should-retry: false on 503', 503, { 'x-should-retry': 'false' }, undefined, 'terminal'],
    // "do not retry" is no word on the effect: a 500's outcome stays unknown (Stripe stores a 500 once the endpoint began)
    ['x-should-retry: false on 500', 500, { 'x-should-retry': 'false' }, undefined, 'ambiguous'],
    ['stripe-should-retry: false on 500', 500, { 'stripe-should-retry': 'false' }, undefined, 'ambiguous'],
    ['stripe-should-retry: false on 502', 502, { 'stripe-should-retry': 'false' }, undefined, 'ambiguous'],
    ['x-should-retry: false on 599 (other 5xx)', 599, { 'x-should-retry': 'false' }, undefined, 'ambiguous'],
    ['x-should-retry: false on 501', 501, { 'x-should-retry': 'false' }, undefined, 'terminal'],
    ['x-should-retry: false on 400', 400, { 'x-should-retry': 'false' }, undefined, 'terminal'],
    ['x-should-retry: garbage is ignored', 500, { 'x-should-retry': 'maybe' }, undefined, 'ambiguous'],
    ['conflict signal beats x-should-retry: true', 422, { 'x-should-retry': 'true' }, IETF_MISMATCH, 'conflict'],
    ['stripe-should-retry: true on 500', 500, { 'stripe-should-retry': 'true' }, undefined, 'retryable'],
    ['stripe-should-retry: true on 400', 400, { 'stripe-should-retry': 'true' }, undefined, 'retryable'],
    ['stripe-should-retry: false on 503', 503, { 'stripe-should-retry': 'false' }, undefined, 'terminal'],
    // a 409 "in progress": a request with this key is being processed, its effect to come; "do not retry" says nothing of it
    ['stripe-should-retry: false on 409 in progress', 409, { 'stripe-should-retry': 'false' }, STRIPE_IN_USE, 'ambiguous'],
    ['x-should-retry: false on 409 IETF in progress', 409, { 'x-should-retry': 'false' }, IETF_IN_PROGRESS, 'ambiguous'],
    ['x-should-retry: false on 409 plain conflict', 409, { 'x-should-retry': 'false' }, '{"error":"version conflict"}', 'terminal'],
    ['stripe-should-retry: garbage is ignored', 503, { 'stripe-should-retry': 'yes' }, undefined, 'retryable'],
    ['conflict signal beats stripe-should-retry: true', 400, { 'stripe-should-retry': 'true' }, STRIPE_MISMATCH, 'conflict'],
    ['both hints true', 500, { 'x-should-retry': 'true', 'stripe-should-retry': 'true' }, undefined, 'retryable'],
    ['both hints false', 503, { 'x-should-retry': 'false', 'stripe-should-retry': 'false' }, undefined, 'terminal'],
  ])('%s', (_label, status, headers, bodyText, expected) => {
    const result = classifyResponse({ status, headers: new Headers(headers), bodyText }, NOW);
    expect(result.class).toBe(expected);
  });

  it.each<[number, string | undefined, string]>([
    [503, undefined, 'status 503'],
    [409, IETF_IN_PROGRESS, 'status 409 in progress'],
    [422, '{"details":[{"issue":"PREVIOUS_REQUEST_IN_PROGRESS"}]}', 'status 422 in progress'],
    [422, IETF_MISMATCH, 'idempotency key mismatch'],
  ])('reason for %i', (status, bodyText, reason) => {
    expect(classifyResponse({ status, headers: new Headers(), bodyText }, NOW).reason).toBe(reason);
  });

  it('reports the x-should-retry hint as the reason', () => {
    const result = classifyResponse({ status: 500, headers: new Headers({ 'x-should-retry': 'true' }) }, NOW);
    expect(result).toEqual({ class: 'retryable', reason: 'x-should-retry: true' });
  });

  it.each<[string, Record<string, string>, Classification]>([
    ['stripe-should-retry: true', { 'stripe-should-retry': 'true' }, { class: 'retryable', reason: 'stripe-should-retry: true' }],
    ['Stripe-Should-Retry: False (any case)', { 'Stripe-Should-Retry': 'False' }, { class: 'terminal', reason: 'stripe-should-retry: false' }],
    // Disagreeing hints: "do not retry" from either header wins (no resend is the safe side).
    ['x true, stripe false', { 'x-should-retry': 'true', 'stripe-should-retry': 'false' }, { class: 'terminal', reason: 'stripe-should-retry: false' }],
    ['x false, stripe true', { 'x-should-retry': 'false', 'stripe-should-retry': 'true' }, { class: 'terminal', reason: 'x-should-retry: false' }],
    ['x true, stripe garbage', { 'x-should-retry': 'true', 'stripe-should-retry': 'maybe' }, { class: 'retryable', reason: 'x-should-retry: true' }],
    ['x garbage, stripe false', { 'x-should-retry': 'maybe', 'stripe-should-retry': 'false' }, { class: 'terminal', reason: 'stripe-should-retry: false' }],
  ])('names the hint that decided: %s', (_label, headers, expected) => {
    // 503 is retryable by status: the hint decides either way
    expect(classifyResponse({ status: 503, headers: new Headers(headers) }, NOW)).toEqual(expected);
  });

  it('a 500 with a "do not retry" hint stays ambiguous, the hint in its reason', () => {
    expect(classifyResponse({ status: 500, headers: new Headers({ 'stripe-should-retry': 'false' }) }, NOW)).toEqual({
      class: 'ambiguous',
      reason: 'status 500, stripe-should-retry: false',
    });
    // disagreeing hints on a 500: false wins over true, and the 500 stays unknown
    expect(classifyResponse({ status: 500, headers: new Headers({ 'x-should-retry': 'true', 'stripe-should-retry': 'false' }) }, NOW).class).toBe('ambiguous');
  });

  it('only matches signals within the first 4 KiB of body text', () => {
    const bodyText = `${' '.repeat(5000)}Idempotency key mismatch`;
    expect(classifyResponse({ status: 422, headers: new Headers(), bodyText }, NOW).class).toBe('terminal');
  });
});

describe('classifyResponse: Retry-After', () => {
  it.each<[string, number, Record<string, string>, OutcomeClass, number | undefined]>([
    ['503 keeps its class and carries the wait', 503, { 'retry-after': '2' }, 'retryable', 2000],
    ['429 with retry-after-ms', 429, { 'retry-after-ms': '250' }, 'retryable', 250],
    ['500 keeps ambiguous and carries the wait', 500, { 'retry-after': '1' }, 'ambiguous', 1000],
    ['400 stays terminal with a valid Retry-After', 400, { 'retry-after': '1' }, 'terminal', 1000],
    ['invalid Retry-After is not attached', 503, { 'retry-after': '5abc' }, 'retryable', undefined],
    ['2xx never carries a wait', 200, { 'retry-after': '3' }, 'success', undefined],
  ])('%s', (_label, status, headers, expectedClass, expectedWait) => {
    const result = classifyResponse({ status, headers: new Headers(headers) }, NOW);
    expect(result.class).toBe(expectedClass);
    expect(result.retryAfterMs).toBe(expectedWait);
    expect('retryAfterMs' in result).toBe(expectedWait !== undefined);
  });

  it('uses the injected clock for HTTP-dates', () => {
    const headers = new Headers({ 'retry-after': new Date(NOW + 7000).toUTCString() });
    expect(classifyResponse({ status: 503, headers }, NOW).retryAfterMs).toBe(7000);
  });
});

describe('needsBody', () => {
  it.each([
    [400, true],
    [409, true],
    [417, true],
    [422, true],
    [200, false],
    [404, false],
    [429, false],
    [500, false],
  ])('%i → %s', (status, expected) => {
    expect(needsBody(status)).toBe(expected);
  });
});

describe('classifyError', () => {
  it.each<[string, unknown, AttemptPhase, OutcomeClass, string]>([
    ['ECONNREFUSED', coded('ECONNREFUSED', { syscall: 'connect' }), 'awaiting_response', 'not_sent', 'ECONNREFUSED'],
    ['UND_ERR_CONNECT_TIMEOUT', coded('UND_ERR_CONNECT_TIMEOUT'), 'awaiting_response', 'not_sent', 'UND_ERR_CONNECT_TIMEOUT'],
    ['fetch failed → ECONNREFUSED', fetchFailed(coded('ECONNREFUSED')), 'awaiting_response', 'not_sent', 'ECONNREFUSED'],
    ['ENOTFOUND (DNS)', fetchFailed(coded('ENOTFOUND', { syscall: 'getaddrinfo' })), 'awaiting_response', 'not_sent', 'ENOTFOUND'],
    ['EAI_AGAIN (DNS)', fetchFailed(coded('EAI_AGAIN')), 'awaiting_response', 'not_sent', 'EAI_AGAIN'],
    ['EHOSTUNREACH at connect', fetchFailed(coded('EHOSTUNREACH', { syscall: 'connect' })), 'awaiting_response', 'not_sent', 'EHOSTUNREACH'],
    ['ENETUNREACH', fetchFailed(coded('ENETUNREACH')), 'awaiting_response', 'not_sent', 'ENETUNREACH'],
    ['EADDRNOTAVAIL', fetchFailed(coded('EADDRNOTAVAIL')), 'awaiting_response', 'not_sent', 'EADDRNOTAVAIL'],
    ['ERR_INVALID_URL', new TypeError('Failed to parse URL', { cause: coded('ERR_INVALID_URL') }), 'awaiting_response', 'not_sent', 'ERR_INVALID_URL'],
    ['ETIMEDOUT at connect', fetchFailed(coded('ETIMEDOUT', { syscall: 'connect' })), 'awaiting_response', 'not_sent', 'ETIMEDOUT'],
    ['TLS certificate failure', fetchFailed(coded('CERT_HAS_EXPIRED')), 'awaiting_response', 'not_sent', 'CERT_HAS_EXPIRED'],
    // Regression (review): an incomplete chain (a proxy's CA not trusted, a missing intermediate) was
    // ambiguous, so the ref stayed stuck although the handshake failed before any request byte.
    ['TLS chain: issuer unknown locally', fetchFailed(coded('UNABLE_TO_GET_ISSUER_CERT_LOCALLY')), 'awaiting_response', 'not_sent', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'],
    ['TLS chain: issuer unknown', fetchFailed(coded('UNABLE_TO_GET_ISSUER_CERT')), 'awaiting_response', 'not_sent', 'UNABLE_TO_GET_ISSUER_CERT'],
    ['TLS certificate not yet valid', fetchFailed(coded('CERT_NOT_YET_VALID')), 'awaiting_response', 'not_sent', 'CERT_NOT_YET_VALID'],
    [
      'AggregateError of connect failures (Happy Eyeballs)',
      fetchFailed(new AggregateError([coded('ECONNREFUSED'), coded('ETIMEDOUT', { syscall: 'connect' })])),
      'awaiting_response',
      'not_sent',
      'ECONNREFUSED',
    ],
    ['anything before dispatch', new Error('body serialisation failed'), 'before_dispatch', 'not_sent', 'before dispatch: Error: body serialisation failed'],
    ['abort before dispatch', named('AbortError'), 'before_dispatch', 'not_sent', 'before dispatch: AbortError'],
    ['headers timeout', fetchFailed(coded('UND_ERR_HEADERS_TIMEOUT')), 'awaiting_response', 'ambiguous', 'UND_ERR_HEADERS_TIMEOUT'],
    ['body timeout', fetchFailed(coded('UND_ERR_BODY_TIMEOUT')), 'awaiting_response', 'ambiguous', 'UND_ERR_BODY_TIMEOUT'],
    ['ECONNRESET after send', fetchFailed(coded('ECONNRESET', { syscall: 'read' })), 'awaiting_response', 'ambiguous', 'ECONNRESET'],
    ['EPIPE', fetchFailed(coded('EPIPE')), 'awaiting_response', 'ambiguous', 'EPIPE'],
    ['UND_ERR_SOCKET (other side closed)', fetchFailed(coded('UND_ERR_SOCKET')), 'awaiting_response', 'ambiguous', 'UND_ERR_SOCKET'],
    ['content-length mismatch', coded('UND_ERR_RES_CONTENT_LENGTH_MISMATCH'), 'awaiting_response', 'ambiguous', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH'],
    ['terminated', new TypeError('terminated', { cause: new Error('other side closed') }), 'awaiting_response', 'ambiguous', 'terminated'],
    ['per-attempt TimeoutError', named('TimeoutError'), 'awaiting_response', 'ambiguous', 'TimeoutError'],
    ['AbortError after dispatch', named('AbortError'), 'awaiting_response', 'ambiguous', 'AbortError'],
    ['DOMException TimeoutError', new DOMException('timed out', 'TimeoutError'), 'awaiting_response', 'ambiguous', 'TimeoutError'],
    ['ETIMEDOUT on read', fetchFailed(coded('ETIMEDOUT', { syscall: 'read' })), 'awaiting_response', 'ambiguous', 'ETIMEDOUT'],
    ['EHOSTUNREACH on read is no proof', fetchFailed(coded('EHOSTUNREACH', { syscall: 'read' })), 'awaiting_response', 'ambiguous', 'EHOSTUNREACH on read'],
    ['reset wins over refused in one chain', fetchFailed(coded('ECONNRESET', { cause: coded('ECONNREFUSED') })), 'awaiting_response', 'ambiguous', 'ECONNRESET'],
    ['unknown error', new Error('weird'), 'awaiting_response', 'ambiguous', 'unknown error: Error: weird'],
    // a browser's fetch rejects with nothing but this (a network failure, a CORS refusal): its message is all there is to say
    ['browser fetch failure', new TypeError('Failed to fetch'), 'awaiting_response', 'ambiguous', 'unknown error: TypeError: Failed to fetch'],
    ['an unknown error without message', new TypeError(''), 'awaiting_response', 'ambiguous', 'unknown error: TypeError'],
    ['a long message, cut', new TypeError('x'.repeat(500)), 'awaiting_response', 'ambiguous', `unknown error: TypeError: ${'x'.repeat(99)}…`],
    ['unknown code', fetchFailed(coded('UND_ERR_WHATEVER')), 'awaiting_response', 'ambiguous', 'unknown error: UND_ERR_WHATEVER'],
    ['thrown string', 'oops', 'awaiting_response', 'ambiguous', 'unknown error: non-error value'],
    ['null', null, 'awaiting_response', 'ambiguous', 'unknown error: non-error value'],
    ['truncated body', fetchFailed(coded('ECONNRESET')), 'reading_body', 'ambiguous', 'reading body: ECONNRESET'],
    ['reading_body even with a connect code', coded('ECONNREFUSED'), 'reading_body', 'ambiguous', 'reading body: ECONNREFUSED'],
  ])('%s', (_label, error, phase, expectedClass, expectedReason) => {
    expect(classifyError(error, phase)).toEqual({ class: expectedClass, reason: expectedReason });
  });

  it('stops walking the cause chain after 8 levels', () => {
    let error: Error = coded('ECONNREFUSED');
    for (let i = 0; i < 8; i++) error = new Error(`wrap ${i}`, { cause: error });
    expect(classifyError(error, 'awaiting_response').class).toBe('ambiguous');
    expect(classifyError(error.cause, 'awaiting_response').class).toBe('not_sent');
  });

  it('survives cause cycles', () => {
    const a = new Error('a');
    const b = Object.assign(new Error('b', { cause: a }), { code: 'ECONNREFUSED' });
    Object.assign(a, { cause: b });
    expect(classifyError(a, 'awaiting_response')).toEqual({ class: 'not_sent', reason: 'ECONNREFUSED' });
  });

  it('never throws on hostile errors', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('nope');
        },
      },
    );
    expect(classifyError(hostile, 'awaiting_response')).toEqual({ class: 'ambiguous', reason: 'unreadable error' });
  });
});

describe('classifyError: real errors from Node fetch on loopback', () => {
  const servers: net.Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });

  async function listen(onSocket: (socket: net.Socket) => void): Promise<string> {
    const server = net.createServer(onSocket);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    return `http://127.0.0.1:${port}/`;
  }

  async function caught(run: () => Promise<unknown>): Promise<unknown> {
    try {
      await run();
    } catch (error) {
      return error;
    }
    throw new Error('expected a rejection');
  }

  it('refused connection → not_sent', async () => {
    const url = await listen(() => undefined);
    const server = servers.pop();
    await new Promise((resolve) => server?.close(resolve));
    const error = await caught(() => fetch(url, { method: 'POST', body: 'x' }));
    expect(classifyError(error, 'awaiting_response')).toEqual({ class: 'not_sent', reason: 'ECONNREFUSED' });
  });

  it('reset after the request was written → ambiguous', async () => {
    const url = await listen((socket) => socket.once('data', () => socket.resetAndDestroy()));
    const error = await caught(() => fetch(url, { method: 'POST', body: 'x' }));
    expect(classifyError(error, 'awaiting_response').class).toBe('ambiguous');
  });

  it('closed after the request was written → ambiguous', async () => {
    const url = await listen((socket) => socket.once('data', () => socket.end()));
    const error = await caught(() => fetch(url, { method: 'POST', body: 'x' }));
    expect(classifyError(error, 'awaiting_response')).toEqual({ class: 'ambiguous', reason: 'UND_ERR_SOCKET' });
  });

  it('truncated body → ambiguous', async () => {
    const url = await listen((socket) =>
      socket.once('data', () => {
        socket.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc');
      }),
    );
    const response = await fetch(url, { method: 'POST', body: 'x' });
    const error = await caught(() => response.text());
    expect(classifyError(error, 'reading_body').class).toBe('ambiguous');
    expect(classifyError(error, 'awaiting_response')).toEqual({ class: 'ambiguous', reason: 'terminated' });
  });

  it('unparsable URL → not_sent', async () => {
    const error = await caught(() => fetch('not a url'));
    expect(classifyError(error, 'awaiting_response')).toEqual({ class: 'not_sent', reason: 'ERR_INVALID_URL' });
  });
});

describe('applyOverride', () => {
  const computed: Classification = { class: 'ambiguous', reason: 'status 500', retryAfterMs: 1000 };
  const response = new Response(null, { status: 500 });

  it.each<[string, ClassifyOverride | undefined, Classification]>([
    ['no override keeps the default', undefined, computed],
    ['undefined keeps the default', () => undefined, computed],
    ['same class keeps the default', () => 'ambiguous', computed],
    ['a class replaces it', () => 'retryable', { class: 'retryable', reason: 'override: status 500', retryAfterMs: 1000 }],
    ['terminal', () => 'terminal', { class: 'terminal', reason: 'override: status 500', retryAfterMs: 1000 }],
  ])('%s', (_label, override, expected) => {
    expect(applyOverride(override, { response }, computed)).toEqual(expected);
  });

  it('passes response, error and the default to the override', () => {
    const error = new Error('x');
    const override = vi.fn<ClassifyOverride>(() => undefined);
    applyOverride(override, { response, error }, computed);
    expect(override).toHaveBeenCalledWith({ response, error, default: computed });
  });

  it('rejects a value that is not an outcome class, naming the option', () => {
    const bad = (() => 'retry') as unknown as ClassifyOverride;
    expect(() => applyOverride(bad, {}, computed)).toThrow(TypeError);
    expect(() => applyOverride(bad, {}, computed)).toThrow(/classify/);
  });
});
