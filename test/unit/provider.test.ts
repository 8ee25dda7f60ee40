import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startProvider, type Fault, type Provider, type ProviderOptions } from '../../src/testing/provider.js';

const open: Provider[] = [];

async function start(options?: ProviderOptions): Promise<Provider> {
  const provider = await startProvider(options);
  open.push(provider);
  return provider;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((p) => p.close()));
});

interface PostOptions {
  key?: string;
  headers?: Record<string, string>;
}

function post(provider: Provider, body: unknown, { key, headers = {} }: PostOptions = {}): Promise<Response> {
  const all: Record<string, string> = { 'content-type': 'application/json', ...headers };
  if (key !== undefined) all['idempotency-key'] = key;
  return fetch(`${provider.url}/orders`, {
    method: 'POST',
    headers: all,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function problemType(res: Response): Promise<string> {
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  const body = (await res.json()) as { type: string };
  return body.type;
}

async function waitFor(predicate: () => boolean, timeoutMs = 2000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > until) throw new Error('waitFor: condition not met');
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Settles to 'pending' when `promise` has not settled yet (after letting I/O run once). */
async function peek(promise: Promise<unknown>): Promise<'pending' | 'settled'> {
  const marker = Symbol('pending');
  const winner = await Promise.race([promise.then(() => 'settled' as const, () => 'settled' as const), new Promise((r) => setImmediate(() => r(marker)))]);
  return winner === marker ? 'pending' : 'settled';
}

describe('idempotency keys (IETF draft)', () => {
  it('replays a completed key: one effect, same order, Idempotent-Replayed', async () => {
    const provider = await start();
    const first = await post(provider, { ref: 'A-1', qty: 2 }, { key: 'k1' });
    const second = await post(provider, { ref: 'A-1', qty: 2 }, { key: 'k1' });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    const a = (await first.json()) as { id: string; ref: string; key: string; body: unknown };
    const b = (await second.json()) as { id: string };
    expect(a).toMatchObject({ id: 'ord_1', ref: 'A-1', key: 'k1', body: { ref: 'A-1', qty: 2 } });
    expect(b.id).toBe(a.id);
    expect(provider.effects).toBe(1);
    expect(provider.effectsFor('A-1')).toBe(1);
    expect(provider.requests).toHaveLength(2);
  });

  it('compares payload meaning: reordered keys replay, rawBodyCompare tells them apart', async () => {
    const lenient = await start();
    await post(lenient, '{"ref":"A","a":1,"b":{"x":1,"y":2}}', { key: 'k' });
    const replay = await post(lenient, '{"b":{"y":2,"x":1},"a":1.0,"ref":"A"}', { key: 'k' });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');

    const strict = await start({ rawBodyCompare: true });
    await post(strict, '{"ref":"A","a":1}', { key: 'k' });
    const reordered = await post(strict, '{"a":1,"ref":"A"}', { key: 'k' });
    expect(reordered.status).toBe(422);
    expect(strict.effects).toBe(1);
  });

  it('answers 422 to a key reused with a different payload, without an effect', async () => {
    const provider = await start();
    await post(provider, { ref: 'A', qty: 1 }, { key: 'k' });
    const res = await post(provider, { ref: 'A', qty: 9 }, { key: 'k' });
    expect(res.status).toBe(422);
    expect(await problemType(res)).toBe('https://oncefetch.dev/problems/idempotency-key-mismatch');
    expect(provider.effects).toBe(1);
  });

  it('answers 409 while the first request with the key is still processing', async () => {
    const provider = await start();
    provider.fault({ kind: 'delay_before_commit', delayMs: 150 });
    const first = post(provider, { ref: 'A' }, { key: 'k' });
    await waitFor(() => provider.requests.length === 1);
    const second = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(second.status).toBe(409);
    const body = (await second.json()) as { type: string; title: string };
    expect(body).toMatchObject({
      type: 'https://oncefetch.dev/problems/request-in-progress',
      title: 'A request with this Idempotency-Key is in progress',
    });
    expect(provider.effects).toBe(0);
    expect((await first).status).toBe(201);
    expect(provider.effects).toBe(1);
    const third = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(third.headers.get('idempotent-replayed')).toBe('true');
  });

  it('holds every commit for processingMs', async () => {
    const provider = await start({ processingMs: 100 });
    const first = post(provider, { ref: 'A' }, { key: 'k' });
    await waitFor(() => provider.requests.length === 1);
    expect((await post(provider, { ref: 'A' }, { key: 'k' })).status).toBe(409);
    expect((await first).status).toBe(201);
  });

  it('requireKey: 400 idempotency-key-missing, no effect; otherwise keyless POSTs just execute', async () => {
    const strict = await start({ requireKey: true });
    const res = await post(strict, { ref: 'A' });
    expect(res.status).toBe(400);
    expect(await problemType(res)).toBe('https://oncefetch.dev/problems/idempotency-key-missing');
    expect(strict.effects).toBe(0);

    const lax = await start();
    expect((await post(lax, { ref: 'A' })).status).toBe(201);
    expect((await post(lax, { ref: 'A' })).status).toBe(201);
    expect(lax.effectsFor('A')).toBe(2);
  });

  it('ignoreKeys: every POST is a new effect', async () => {
    const provider = await start({ ignoreKeys: true });
    const a = await post(provider, { ref: 'A' }, { key: 'k' });
    const b = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(((await a.json()) as { id: string }).id).not.toBe(((await b.json()) as { id: string }).id);
    expect(provider.effectsFor('A')).toBe(2);
  });

  it('honours a custom key header case-insensitively and RFC 8941 quoted keys', async () => {
    const provider = await start({ keyHeader: 'X-Request-Key' });
    await post(provider, { ref: 'A' }, { headers: { 'x-request-key': 'abc' } });
    const replay = await post(provider, { ref: 'A' }, { headers: { 'X-REQUEST-KEY': '"abc"' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(provider.requests.map((r) => r.key)).toEqual(['abc', 'abc']);
    expect(provider.effects).toBe(1);
  });

  it('rejects a body that is not JSON with 400 and no effect', async () => {
    const provider = await start();
    const res = await post(provider, 'not json', { key: 'k' });
    expect(res.status).toBe(400);
    expect(await problemType(res)).toBe('https://oncefetch.dev/problems/invalid-body');
    expect(provider.effects).toBe(0);
  });

  it('records request headers and body text', async () => {
    const provider = await start();
    await post(provider, { ref: 'A' }, { key: 'k', headers: { 'x-trace': 't1' } });
    expect(provider.requests[0]).toMatchObject({ key: 'k', ref: 'A', bodyText: '{"ref":"A"}' });
    expect(provider.requests[0]?.headers['x-trace']).toBe('t1');
  });
});

describe('lookups', () => {
  it('finds an order by ref, key and id; 404 otherwise', async () => {
    const provider = await start();
    await post(provider, { ref: 'A' }, { key: 'k1' });
    await post(provider, { ref: 'A' });
    const byRef = await fetch(`${provider.url}/orders?ref=A`);
    expect(byRef.status).toBe(200);
    expect(((await byRef.json()) as { id: string }).id).toBe('ord_1');
    const byKey = await fetch(`${provider.url}/orders?key=k1`);
    expect(((await byKey.json()) as { ref: string }).ref).toBe('A');
    expect((await fetch(`${provider.url}/orders/ord_2`)).status).toBe(200);
    expect((await fetch(`${provider.url}/orders?ref=B`)).status).toBe(404);
    expect((await fetch(`${provider.url}/orders?key=nope`)).status).toBe(404);
    expect((await fetch(`${provider.url}/orders/ord_9`)).status).toBe(404);
    expect((await fetch(`${provider.url}/orders`)).status).toBe(400);
    expect(provider.lookups).toBe(7);
    expect(provider.effects).toBe(2);
  });
});

describe('faults', () => {
  it('reset_before_commit: the fetch rejects, nothing happens, the next request is normal', async () => {
    const provider = await start();
    provider.fault({ kind: 'reset_before_commit' });
    await expect(post(provider, { ref: 'A' }, { key: 'k' })).rejects.toThrow();
    expect(provider.effects).toBe(0);
    expect(provider.faultsInjected.reset_before_commit).toBe(1);
    const retry = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(provider.effects).toBe(1);
  });

  it('status_before_commit: the status and Retry-After, no effect, the key stays fresh', async () => {
    const provider = await start();
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '2', headers: { 'x-should-retry': 'true' } });
    const res = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(res.headers.get('x-should-retry')).toBe('true');
    expect(provider.effects).toBe(0);
    const retry = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
  });

  it('drop_after_commit: the fetch rejects but the effect happened; a retry replays it', async () => {
    const provider = await start();
    provider.fault({ kind: 'drop_after_commit' });
    await expect(post(provider, { ref: 'A' }, { key: 'k' })).rejects.toThrow();
    expect(provider.effects).toBe(1);
    const retry = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(((await retry.json()) as { id: string }).id).toBe('ord_1');
    expect(provider.effects).toBe(1);
  });

  it('error_after_commit: 500 (or the given status) after the effect; a retry replays the 201', async () => {
    const provider = await start();
    provider.faults([{ kind: 'error_after_commit' }, { kind: 'error_after_commit', status: 502, match: { ref: 'B' } }]);
    const res = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(res.status).toBe(500);
    expect(provider.effects).toBe(1);
    const retry = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect((await post(provider, { ref: 'B' }, { key: 'k2' })).status).toBe(502);
    expect(provider.effects).toBe(2);
  });

  it('truncate_after_commit: headers arrive, reading the body fails, the effect happened', async () => {
    const provider = await start();
    provider.fault({ kind: 'truncate_after_commit' });
    const res = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(res.status).toBe(201);
    await expect(res.text()).rejects.toThrow();
    expect(provider.effects).toBe(1);
  });

  it('delay_after_commit: the effect is committed before the late response', async () => {
    const provider = await start();
    provider.fault({ kind: 'delay_after_commit', delayMs: 150 });
    const startedAt = performance.now();
    const pending = post(provider, { ref: 'A' }, { key: 'k' });
    await waitFor(() => provider.effects === 1);
    expect(await peek(pending)).toBe('pending');
    const res = await pending;
    expect(res.status).toBe(201);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(140);
  });

  it('applies a fault only to the request it matches', async () => {
    const provider = await start();
    provider.faults([
      { kind: 'status_before_commit', status: 429, match: { ref: 'B' } },
      { kind: 'status_before_commit', status: 503, match: { key: 'kc', ref: 'C' } },
    ]);
    expect((await post(provider, { ref: 'A' }, { key: 'ka' })).status).toBe(201);
    expect((await post(provider, { ref: 'C' }, { key: 'other' })).status).toBe(201);
    expect(provider.pendingFaults).toBe(2);
    expect((await post(provider, { ref: 'B' }, { key: 'kb' })).status).toBe(429);
    expect((await post(provider, { ref: 'C' }, { key: 'kc' })).status).toBe(503);
    expect((await post(provider, { ref: 'B' }, { key: 'kb' })).status).toBe(201);
    expect(provider.pendingFaults).toBe(0);
    expect(provider.faultsInjected.status_before_commit).toBe(2);
  });

  it('validates faults and enqueues none of a list with a bad one', async () => {
    const provider = await start();
    expect(() => provider.fault({ kind: 'nope' } as unknown as Fault)).toThrow(TypeError);
    expect(() => provider.fault({ kind: 'delay_after_commit', delayMs: -1 })).toThrow(/delayMs/);
    expect(() => provider.faults([{ kind: 'drop_after_commit' }, { kind: 'status_before_commit', status: 99 }])).toThrow(
      RangeError,
    );
    expect(provider.pendingFaults).toBe(0);
  });

  it('randomFaults: the same seed gives the same sequence; reset restarts it', async () => {
    const kinds: Fault[] = [
      { kind: 'status_before_commit', status: 503 },
      { kind: 'error_after_commit', status: 502 },
    ];
    async function statuses(provider: Provider, n: number): Promise<number[]> {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await post(provider, { ref: `r${i}` }, { key: `k${i}` })).status);
      return out;
    }
    const a = await start({ randomFaults: { seed: 42, rate: 0.5, kinds } });
    const b = await start({ randomFaults: { seed: 42, rate: 0.5, kinds } });
    const c = await start({ randomFaults: { seed: 7, rate: 0.5, kinds } });
    const seqA = await statuses(a, 24);
    expect(await statuses(b, 24)).toEqual(seqA);
    expect(await statuses(c, 24)).not.toEqual(seqA);
    expect(new Set(seqA)).toEqual(new Set([201, 502, 503]));
    const injected = a.faultsInjected;
    expect(injected.status_before_commit + injected.error_after_commit).toBe(seqA.filter((s) => s !== 201).length);
    a.reset();
    expect(await statuses(a, 24)).toEqual(seqA);
    await expect(startProvider({ randomFaults: { seed: 1, rate: 2, kinds } })).rejects.toThrow(/randomFaults.rate/);
  });

  it('scripted faults take precedence without shifting the random sequence', async () => {
    const kinds: Fault[] = [{ kind: 'status_before_commit', status: 503 }];
    const plain = await start({ randomFaults: { seed: 3, rate: 0.5, kinds } });
    const scripted = await start({ randomFaults: { seed: 3, rate: 0.5, kinds } });
    scripted.fault({ kind: 'status_before_commit', status: 418 });
    const seq = async (p: Provider): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < 12; i++) out.push((await post(p, { ref: `r${i}` }, { key: `k${i}` })).status);
      return out;
    };
    const expected = await seq(plain);
    const got = await seq(scripted);
    expect(got[0]).toBe(418);
    expect(got.slice(1)).toEqual(expected.slice(1));
  });
});

describe('control endpoints', () => {
  it('enqueues faults, reports state and resets over HTTP', async () => {
    const provider = await start();
    const enqueue = await fetch(`${provider.url}/__control/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify([{ kind: 'error_after_commit', match: { ref: 'A' } }]),
    });
    expect(enqueue.status).toBe(200);
    expect(await enqueue.json()).toEqual({ pendingFaults: 1 });
    expect((await post(provider, { ref: 'A' }, { key: 'k' })).status).toBe(500);

    const state = (await (await fetch(`${provider.url}/__control/state`)).json()) as Record<string, unknown>;
    expect(state).toMatchObject({ effects: 1, pendingFaults: 0, lookups: 0 });
    expect(state['requests']).toHaveLength(1);
    expect(state['orders']).toMatchObject([{ id: 'ord_1', ref: 'A', key: 'k' }]);
    expect(state['faultsInjected']).toMatchObject({ error_after_commit: 1, drop_after_commit: 0 });

    const bad = await fetch(`${provider.url}/__control/faults`, { method: 'POST', body: '{"kind":"explode"}' });
    expect(bad.status).toBe(400);
    expect(await problemType(bad)).toBe('https://oncefetch.dev/problems/invalid-fault');

    expect((await fetch(`${provider.url}/__control/reset`, { method: 'POST' })).status).toBe(200);
    expect(provider.effects).toBe(0);
    expect(provider.requests).toHaveLength(0);
    expect(provider.faultsInjected.error_after_commit).toBe(0);
    // Keys are forgotten too: the same key executes again.
    const again = await post(provider, { ref: 'A' }, { key: 'k' });
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(provider.effects).toBe(1);
  });
});

describe('lifecycle', () => {
  it('reuses keep-alive sockets', async () => {
    const provider = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const once = (): Promise<boolean> =>
      new Promise((resolve, reject) => {
        const req = request(`${provider.url}/orders`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(req.reusedSocket));
        });
        req.on('error', reject);
        req.end('{"ref":"A"}');
      });
    expect(await once()).toBe(false);
    expect(await once()).toBe(true);
    agent.destroy();
    expect(provider.effects).toBe(2);
  });

  it('close() does not wait for open connections or pending delays', async () => {
    const provider = await startProvider();
    provider.fault({ kind: 'delay_before_commit', delayMs: 60_000 });
    const pending = post(provider, { ref: 'A' }, { key: 'k' });
    await waitFor(() => provider.requests.length === 1);
    const startedAt = performance.now();
    await provider.close();
    expect(performance.now() - startedAt).toBeLessThan(1000);
    await expect(pending).rejects.toThrow();
    expect(provider.effects).toBe(0);
    await provider.close(); // idempotent
  });

  it('reset() abandons requests still in progress', async () => {
    const provider = await start();
    provider.fault({ kind: 'delay_before_commit', delayMs: 60_000 });
    const pending = post(provider, { ref: 'A' }, { key: 'k' });
    await waitFor(() => provider.requests.length === 1);
    provider.reset();
    await expect(pending).rejects.toThrow();
    expect(provider.effects).toBe(0);
  });

  it('validates options, naming the bad one', async () => {
    await expect(startProvider({ port: -1 })).rejects.toThrow(/port/);
    await expect(startProvider({ keyHeader: 'bad header' })).rejects.toThrow(/keyHeader/);
    await expect(startProvider({ processingMs: Number.NaN })).rejects.toThrow(/processingMs/);
  });
});

const cliPath =
  process.env['ONCEFETCH_PROVIDER_CLI'] ?? fileURLToPath(new URL('../../dist/testing/provider-cli.js', import.meta.url));
const cliBuilt = existsSync(cliPath);

describe('provider-cli', () => {
  it.skipIf(!cliBuilt)(
    cliBuilt ? 'runs as a child process, scriptable over /__control' : 'runs as a child process (skipped: run `npm run build` first, dist/testing/provider-cli.js is missing)',
    async () => {
      const child = spawn(process.execPath, [cliPath, '--port', '0', '--require-key'], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const line = await new Promise<string>((resolve, reject) => {
          let buffer = '';
          child.stdout.setEncoding('utf8');
          child.stdout.on('data', (chunk: string) => {
            buffer += chunk;
            const newline = buffer.indexOf('\n');
            if (newline >= 0) resolve(buffer.slice(0, newline));
          });
          child.once('exit', () => reject(new Error(`provider-cli exited early: ${buffer}`)));
        });
        const { url } = JSON.parse(line) as { url: string };
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        await fetch(`${url}/__control/faults`, { method: 'POST', body: '{"kind":"drop_after_commit"}' });
        const fake = { url } as Provider;
        await expect(post(fake, { ref: 'A' }, { key: 'k' })).rejects.toThrow();
        expect((await post(fake, { ref: 'A' }, { key: 'k' })).headers.get('idempotent-replayed')).toBe('true');
        expect((await post(fake, { ref: 'A' })).status).toBe(400);
        const state = (await (await fetch(`${url}/__control/state`)).json()) as { effects: number };
        expect(state.effects).toBe(1);
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
    },
    10_000,
  );
});
