/**
 * What a browser does to a once-only POST that Node never does, in real
 * headless Chromium (Debian's `chromium`, playwright-core): opaque redirects,
 * CORS answers the page may not read, Retry-After hidden by CORS, keepalive,
 * offline, navigation away mid-request, and a tab without Web Locks next to
 * one with them. The provider here is a small loopback server of the test's
 * own that does NOT deduplicate by key: every POST that reaches it is an
 * effect, so a resend shows up as a second effect.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleForBrowser, chromiumAvailable, launchChromium, pageHtml, unique, until } from './chromium.js';
import { listen, startStaticServer, type Loopback, type StaticFile } from './servers.js';
import type { WebCall, WebOutcome } from './web-page.js';

const available = chromiumAvailable();

interface Post {
  path: string;
  ref: string;
  key: string | undefined;
  at: number;
}

/** Per-path behaviour of the provider. Every POST is recorded; `effect: true` makes it an order. */
interface Route {
  /** answer the preflight (else 403 without CORS headers) @default true */
  preflight?: boolean;
  /** the POST's answer; `cors: false` leaves Access-Control-Allow-Origin off it */
  answer: (post: Post, n: number) => { status: number; headers?: Record<string, string>; body?: string; cors?: boolean; effect: boolean; delayMs?: number };
  /** expose these response headers @default 'retry-after, idempotent-replayed, location, content-type' */
  expose?: string;
  /** after the effect, run this, then reset the connection instead of answering (a phone losing its network) */
  reset?: () => Promise<void>;
}

interface TestProvider extends Loopback {
  posts: Post[];
  effects: Map<string, number>;
  routes: Map<string, Route>;
  preflights: number;
}

async function startTestProvider(): Promise<TestProvider> {
  const posts: Post[] = [];
  const effects = new Map<string, number>();
  const routes = new Map<string, Route>();
  const state = { preflights: 0 };
  const cors = (req: IncomingMessage, expose: string): Record<string, string> => ({
    'access-control-allow-origin': req.headers.origin ?? '*',
    'access-control-expose-headers': expose,
    vary: 'origin',
  });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const route = routes.get(url.pathname);
    const expose = route?.expose ?? 'retry-after, idempotent-replayed, location, content-type';
    if (req.method === 'OPTIONS') {
      state.preflights++;
      if (route?.preflight === false) return void res.writeHead(403).end();
      res
        .writeHead(204, {
          ...cors(req, expose),
          'access-control-allow-methods': 'POST, GET',
          'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '',
        })
        .end();
      return;
    }
    if (req.method === 'GET' && url.pathname === '/lookup') {
      const ref = url.searchParams.get('ref') ?? '';
      const n = effects.get(ref) ?? 0;
      res.writeHead(n > 0 ? 200 : 404, { ...cors(req, expose), 'content-type': 'application/json' }).end(JSON.stringify({ ref, found: n > 0 }));
      return;
    }
    if (req.method === 'GET' && url.pathname.startsWith('/orders/')) {
      res.writeHead(200, { ...cors(req, expose), 'content-type': 'application/json' }).end(JSON.stringify({ id: url.pathname.slice(8) }));
      return;
    }
    if (req.method !== 'POST' || route === undefined) return void res.writeHead(404, cors(req, expose)).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let ref = '';
      try {
        ref = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ref?: unknown }).ref ?? '');
      } catch {
        // not JSON: no ref
      }
      const post: Post = { path: url.pathname, ref, key: req.headers['idempotency-key'] as string | undefined, at: Date.now() };
      posts.push(post);
      if (route.reset !== undefined) {
        effects.set(ref, (effects.get(ref) ?? 0) + 1);
        void route.reset().then(() => req.socket.resetAndDestroy());
        return;
      }
      const a = route.answer(post, posts.filter((p) => p.path === post.path && p.ref === ref).length);
      const send = (): void => {
        if (a.effect) effects.set(ref, (effects.get(ref) ?? 0) + 1);
        const headers = { 'content-type': 'application/json', ...(a.cors === false ? {} : cors(req, expose)), ...a.headers };
        res.writeHead(a.status, headers).end(a.body ?? JSON.stringify({ ref }));
      };
      if (a.delayMs === undefined) send();
      else setTimeout(send, a.delayMs);
    });
  });
  const { url, close } = await listen(server);
  return {
    url,
    posts,
    effects,
    routes,
    get preflights() {
      return state.preflights;
    },
    close,
  };
}

describe.runIf(available)('browser-only failure modes in headless Chromium', { timeout: 30_000 }, () => {
  let browser: Browser;
  let context: BrowserContext;
  let provider: TestProvider;
  let site: Loopback;

  beforeAll(async () => {
    const files = new Map<string, StaticFile>();
    const bundle = await bundleForBrowser(fileURLToPath(new URL('./web-page.ts', import.meta.url)));
    files.set('/', { type: 'text/html; charset=utf-8', body: pageHtml('oncefetch browser faults', '/page.js') });
    for (const [path, body] of bundle) files.set(path, { type: 'text/javascript; charset=utf-8', body });
    provider = await startTestProvider();
    site = await startStaticServer(files);
    browser = await launchChromium();
    context = await browser.newContext();
  }, 30_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await site?.close();
    await provider?.close();
  });

  async function openPage(ctx: BrowserContext = context): Promise<Page> {
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
    await page.goto(`${site.url}/`);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    return page;
  }

  const post = (page: Page, call: WebCall): Promise<WebOutcome> => page.evaluate((c) => window.webTest.post(c), call);
  const posts = (ref: string): Post[] => provider.posts.filter((p) => p.ref === ref);
  const effects = (ref: string): number => provider.effects.get(ref) ?? 0;
  const call = (path: string, extra: Partial<WebCall> = {}): WebCall => ({ url: `${provider.url}${path}`, ref: unique(path.slice(1)), dbName: unique('db'), ...extra });

  it("redirect 'manual', answered 303 after the effect: one effect, ambiguous with the opaque-redirect reason; a lookup settles it", async () => {
    provider.routes.set('/redirect-303', { answer: (p) => ({ status: 303, headers: { location: `/orders/${p.ref}` }, effect: true }) });
    const page = await openPage();
    const bare = call('/redirect-303', { redirect: 'manual' });
    const got = await post(page, bare);
    expect(got).toMatchObject({ ok: false, error: { name: 'AmbiguousOutcomeError', code: 'AMBIGUOUS_OUTCOME' } });
    expect(got.record).toMatchObject({ state: 'ambiguous', attempts: [{ class: 'ambiguous', reason: expect.stringMatching(/^opaque redirect/) }] });
    expect([posts(bare.ref).length, effects(bare.ref)]).toEqual([1, 1]);

    const looked = call('/redirect-303', { redirect: 'manual', lookupUrl: `${provider.url}/lookup` });
    const settled = await post(page, looked);
    expect(settled).toMatchObject({ ok: true, status: 200, record: { state: 'succeeded' } });
    expect([posts(looked.ref).length, effects(looked.ref)]).toEqual([1, 1]);
    console.info(`[web] opaque redirect: ${got.error?.message}; record reason "${got.record?.attempts[0]?.reason?.slice(0, 40)}…"`);
    await page.close();
  });

  it("redirect 'follow' (the default), answered 303 after the effect: the GET it lands on is the answer, one effect", async () => {
    provider.routes.set('/follow-303', { answer: (p) => ({ status: 303, headers: { location: `/orders/${p.ref}` }, effect: true }) });
    const page = await openPage();
    const c = call('/follow-303');
    const got = await post(page, c);
    expect(got).toMatchObject({ ok: true, status: 200, record: { state: 'succeeded' } });
    expect(JSON.parse(got.body ?? '{}')).toEqual({ id: c.ref });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    await page.close();
  });

  it('CORS: the POST is processed but its answer lacks Access-Control-Allow-Origin (preflight fine): ambiguous, never resent, one effect (maxAttempts 3)', async () => {
    provider.routes.set('/hidden-answer', { answer: () => ({ status: 201, cors: false, effect: true }) });
    const page = await openPage();
    const c = call('/hidden-answer', { maxAttempts: 3 });
    const got = await post(page, c);
    expect(got).toMatchObject({ ok: false, error: { code: 'AMBIGUOUS_OUTCOME' } });
    expect(got.record).toMatchObject({ state: 'ambiguous', attempts: [{ class: 'ambiguous' }] });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    // Called again (a retry button, a reload): still no resend without a lookup.
    const again = await post(page, c);
    expect(again).toMatchObject({ ok: false, error: { code: 'AMBIGUOUS_OUTCOME' } });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    // With a lookup: found, settled, still one effect.
    const looked = await post(page, { ...c, lookupUrl: `${provider.url}/lookup` });
    expect(looked).toMatchObject({ ok: true, status: 200, record: { state: 'succeeded' } });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    console.info(`[web] CORS-hidden answer: reason "${got.record?.attempts[0]?.reason}", posts=${posts(c.ref).length} effects=${effects(c.ref)}`);
    await page.close();
  });

  it('CORS: a preflight refused (nothing reaches the provider): ambiguous, as the browser reports it like a hidden answer; the lookup finds nothing and the resend goes out with the same key', async () => {
    provider.routes.set('/no-preflight', { preflight: false, answer: () => ({ status: 201, effect: true }) });
    const page = await openPage();
    const c = call('/no-preflight', { maxAttempts: 3, lookupUrl: `${provider.url}/lookup`, settleMs: 200 });
    const before = provider.preflights;
    const got = await post(page, c);
    expect(got).toMatchObject({ ok: false, error: { code: 'RETRIES_EXHAUSTED' }, record: { state: 'pending' } });
    expect(posts(c.ref)).toEqual([]);
    expect(provider.preflights - before).toBe(3);
    expect(got.record?.attempts.map((a) => a.class)).toEqual(['ambiguous', 'ambiguous', 'ambiguous']);
    expect(got.events.filter((e) => e === 'lookup')).toHaveLength(3);
    console.info(`[web] preflight refused: ${got.ms} ms, ${got.error?.code} after ${got.record?.attempts.length} attempts (${got.record?.attempts.map((a) => `${a.class}: ${a.reason}`).join('; ')}), preflights=${provider.preflights - before}`);
    await page.close();
  });

  it('CORS: Retry-After not exposed: the 503 is retried on backoff (the hint is unseen, not misread); one effect', async () => {
    provider.routes.set('/hidden-retry-after', {
      expose: 'content-type',
      answer: (_p, k) => (k < 3 ? { status: 503, headers: { 'retry-after': '120' }, effect: false } : { status: 201, effect: true }),
    });
    const page = await openPage();
    const c = call('/hidden-retry-after', { maxAttempts: 3 });
    const got = await post(page, c);
    expect(got).toMatchObject({ ok: true, status: 201, record: { state: 'succeeded' } });
    expect(got.record?.attempts.map((a) => a.class)).toEqual(['retryable', 'retryable', 'success']);
    expect(new Set(posts(c.ref).map((p) => p.key)).size).toBe(1);
    expect(effects(c.ref)).toBe(1);
    expect(got.ms).toBeLessThan(5_000);
    console.info(`[web] Retry-After hidden: ${got.record?.attempts.map((a) => a.reason).join(' / ')}; ${got.ms} ms`);
    await page.close();
  });

  it('offline (navigator.onLine false): nothing reaches the provider; the ref is not left ambiguous, and back online the same call sends it once', async () => {
    provider.routes.set('/offline', { answer: () => ({ status: 201, effect: true }) });
    const ctx = await browser.newContext();
    const page = await openPage(ctx);
    const c = call('/offline', { maxAttempts: 2 });
    await ctx.setOffline(true);
    expect(await page.evaluate(() => window.webTest.online())).toBe(false);
    const offline = await post(page, c);
    await ctx.setOffline(false);
    console.info(`[web] offline: ${offline.error?.code} ${offline.error?.message}; record ${offline.record?.state} ${JSON.stringify(offline.record?.attempts)}`);
    expect(posts(c.ref)).toEqual([]);
    expect(offline).toMatchObject({ ok: false });
    expect(offline.record?.state).not.toBe('ambiguous');
    const online = await post(page, c);
    expect(online).toMatchObject({ ok: true, status: 201, record: { state: 'succeeded' } });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    await ctx.close();
  });

  it('offline while the POST is out (the provider acted, then the connection dropped as the browser went offline): ambiguous, the reason says offline rather than CORS; back online the lookup settles it with nothing resent', async () => {
    const ctx = await browser.newContext();
    provider.routes.set('/offline-mid', { answer: () => ({ status: 201, effect: true }), reset: () => ctx.setOffline(true) });
    const page = await openPage(ctx);
    const c = call('/offline-mid', { maxAttempts: 3, lookupUrl: `${provider.url}/lookup` });
    const got = await post(page, c);
    const sent = posts(c.ref).length;
    console.info(`[web] offline mid-request: ${got.error?.code} ${got.error?.message}; reasons ${JSON.stringify(got.record?.attempts)}; posts=${sent} effects=${effects(c.ref)}`);
    expect(got).toMatchObject({ ok: false, error: { code: 'AMBIGUOUS_OUTCOME' }, record: { state: 'ambiguous' } });
    expect(got.record?.attempts).toEqual([{ class: 'ambiguous', reason: expect.stringMatching(/^unknown error: TypeError: Failed to fetch \(the browser was offline when it failed: it may have been sent\)$/) }]);
    await ctx.setOffline(false);
    const again = await post(page, c);
    expect(again).toMatchObject({ ok: true, status: 200, record: { state: 'succeeded' } });
    expect(again.events).not.toContain('attempt_started');
    expect(posts(c.ref).length).toBe(sent);
    await ctx.close();
  });

  it('keepalive with a body over 64 KiB: fetch refuses it before sending; the ref is not left ambiguous', async () => {
    provider.routes.set('/keepalive-big', { answer: () => ({ status: 201, effect: true }) });
    const page = await openPage();
    const c = call('/keepalive-big', { keepalive: true, bodyBytes: 70_000, maxAttempts: 2 });
    const got = await post(page, c);
    console.info(`[web] keepalive 70 kB: ${got.error?.name} ${got.error?.code} ${got.error?.message}; record ${JSON.stringify(got.record)}`);
    expect(posts(c.ref)).toEqual([]);
    expect(got).toMatchObject({ ok: false, error: { name: 'TypeError', message: expect.stringMatching(/keepalive.*64 KiB/) }, record: null });
    // Under the limit it goes out as usual.
    const small = call('/keepalive-big', { keepalive: true, bodyBytes: 60_000 });
    expect(await post(page, small)).toMatchObject({ ok: true, status: 201, record: { state: 'succeeded' } });
    expect([posts(small.ref).length, effects(small.ref)]).toEqual([1, 1]);
    await page.close();
  });

  for (const keepalive of [true, false]) {
    it(`navigating away mid-request (keepalive ${keepalive}): the provider acts once; the next page load reconciles with the lookup, nothing resent`, async () => {
      provider.routes.set('/slow', { answer: () => ({ status: 201, effect: true, delayMs: 1_500 }) });
      const page = await openPage();
      const c = call('/slow', { keepalive, leaseMs: 1_000, lookupUrl: `${provider.url}/lookup` });
      await page.evaluate((x) => window.webTest.start(x), c);
      await until(() => posts(c.ref).length === 1, 5_000, 'the POST to arrive');
      await page.goto(`${site.url}/`); // pagehide, unload: the page's fetches are cancelled (keepalive ones go on)
      await page.waitForSelector('body[data-ready="true"]', { state: 'attached' });
      await until(() => effects(c.ref) === 1, 5_000, 'the provider to act');
      const resumed = await page.evaluate(() => window.webTest.pending());
      expect(resumed).toEqual(c);
      const got = await post(page, c);
      expect(got).toMatchObject({ ok: true, status: 200, record: { state: 'succeeded' } });
      expect(got.events).toEqual(expect.arrayContaining(['takeover', 'lookup']));
      expect(got.events).not.toContain('attempt_started');
      expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
      await page.close();
    });
  }

  it('a tab with Web Locks and an old tab without them (an earlier SDK), one scope at once: one send', async () => {
    provider.routes.set('/mixed', { answer: () => ({ status: 201, effect: true, delayMs: 1_000 }) });
    const [a, b] = [await openPage(), await openPage()];
    const c = call('/mixed', { lookupUrl: `${provider.url}/lookup` });
    const [x, y] = await Promise.all([post(a, c), post(b, { ...c, locks: false })]);
    expect([x.ok, y.ok]).toEqual([true, true]);
    expect([x.body, y.body].map((t) => JSON.parse(t ?? '{}'))).toEqual([{ ref: c.ref }, { ref: c.ref }]);
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    // And the other way round: the old tab first.
    const d = call('/mixed', { lookupUrl: `${provider.url}/lookup` });
    const old = post(b, { ...d, locks: false });
    await until(() => posts(d.ref).length === 1, 5_000, 'the old tab to send');
    const next = await post(a, d);
    expect([(await old).ok, next.ok]).toEqual([true, true]);
    expect([posts(d.ref).length, effects(d.ref)]).toEqual([1, 1]);
    await a.close();
    await b.close();
  });

  it('IndexedDB deleted by another tab while a request is on the wire: the store lets go, and the answer is recorded in the database made anew; nothing resent, the next call replays it', async () => {
    provider.routes.set('/deleted', { answer: () => ({ status: 201, effect: true, delayMs: 800 }) });
    const [a, b] = [await openPage(), await openPage()];
    const c = call('/deleted', { maxAttempts: 3 });
    const running = post(a, c);
    await until(() => posts(c.ref).length === 1, 5_000, 'the POST to arrive');
    const deleted = await b.evaluate((name) => new Promise<string>((resolve) => {
      const r = indexedDB.deleteDatabase(name);
      r.onsuccess = () => resolve('deleted');
      r.onerror = () => resolve(`error ${String(r.error)}`);
      r.onblocked = () => resolve('blocked');
    }), c.dbName);
    const got = await running;
    console.info(`[web] database deleted mid-request: ${deleted}; ${got.status ?? `${got.error?.code} ${got.error?.message}`}; record after ${JSON.stringify(got.record)}`);
    expect(deleted).toBe('deleted');
    expect(got).toMatchObject({ ok: true, status: 201, record: { state: 'succeeded' } });
    const again = await post(a, c);
    expect(again).toMatchObject({ ok: true, status: 201 });
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([1, 1]);
    await a.close();
    await b.close();
  });

  it('IndexedDB that cannot be opened (left at a newer version): a StoreError before anything is sent', async () => {
    provider.routes.set('/no-db', { answer: () => ({ status: 201, effect: true }) });
    const page = await openPage();
    const c = call('/no-db');
    await page.evaluate((name) => new Promise<void>((resolve, reject) => {
      const r = indexedDB.open(name, 7);
      r.onsuccess = () => { r.result.close(); resolve(); };
      r.onerror = () => reject(r.error);
    }), c.dbName);
    const got = await post(page, c).catch((e: unknown) => ({ ok: false, error: { name: 'thrown', code: undefined, message: String(e) } }) as WebOutcome);
    console.info(`[web] database at a newer version: ${got.error?.name} ${got.error?.code} ${got.error?.message}`);
    expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
    expect(got.error?.message).toMatch(/is at version 7, newer than version 2 this oncefetch opens: another program or a newer oncefetch uses it; use another dbName$/);
    expect(posts(c.ref)).toEqual([]);
    await page.close();
  });

  it('a sandboxed iframe (opaque origin, no storage): a StoreError that says storage is unavailable here and nothing was sent', async () => {
    provider.routes.set('/sandboxed', { answer: () => ({ status: 201, effect: true }) });
    const ctx = await browser.newContext();
    // The frame's origin is opaque ('null'): its module scripts are CORS fetches.
    await ctx.route(`${site.url}/**`, async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, headers: { ...response.headers(), 'access-control-allow-origin': '*' } });
    });
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
    await page.goto(`${site.url}/`);
    await page.evaluate((src) => {
      const frame = document.createElement('iframe');
      frame.setAttribute('sandbox', 'allow-scripts');
      frame.src = src;
      document.body.append(frame);
    }, `${site.url}/`);
    await until(() => page.frames().length === 2, 10_000, 'the sandboxed frame');
    const frame = page.frames()[1]!;
    await frame.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    expect(await frame.evaluate(() => window.origin)).toBe('null');
    const c = call('/sandboxed');
    const got = await frame.evaluate((x) => window.webTest.post(x), c);
    console.info(`[web] sandboxed frame: ${got.error?.name} ${got.error?.code} ${got.error?.message}`);
    expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
    expect(got.error?.message).toMatch(/storage unavailable here \(sandboxed or third-party frame, private mode, storage disabled\?\); nothing was sent \(SecurityError/);
    expect([posts(c.ref).length, effects(c.ref)]).toEqual([0, 0]);
    await ctx.close();
  });

  it('IndexedDB over quota: a StoreError before anything is sent', async () => {
    provider.routes.set('/quota', { answer: () => ({ status: 201, effect: true }) });
    const ctx = await browser.newContext();
    const page = await openPage(ctx);
    const cdp = await ctx.newCDPSession(page);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: site.url, quotaSize: 1 }); // one byte: every write fails
    const c = call('/quota');
    const got = await page.evaluate((x) => window.webTest.post(x).catch((e: unknown) => ({ ok: false, error: { name: 'thrown', code: undefined, message: String(e) }, events: [], record: null, ms: 0 })), c);
    console.info(`[web] quota of one byte: ${got.error?.name} ${got.error?.code} ${got.error?.message}`);
    expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
    expect(posts(c.ref)).toEqual([]);
    await ctx.close();
  });
});
