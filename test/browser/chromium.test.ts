/**
 * oncefetch in real headless Chromium (Debian's `chromium`, driven by
 * playwright-core): the browser entry on real IndexedDB, fetch and Web Locks,
 * against the fault-injecting provider behind a CORS front on another origin.
 * Effects are counted at the provider.
 *
 * Without Chromium the file is skipped with a message; with CI=true a missing
 * Chromium fails it (.ci/run installs it).
 */
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBrowserExample } from '../../examples/browser/serve.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import type { OrderCall, OrderOutcome } from './page.js';
import type { CaseResult } from './vitest-shim.js';
import { bundleForBrowser, CHROMIUM_PATH, chromiumAvailable, launchChromium, pageHtml, unique, until } from './chromium.js';
import { startCorsProxy, startStaticServer, type Loopback, type StaticFile } from './servers.js';

const available = chromiumAvailable();
const inCi = process.env['CI'] === 'true';
if (!available && !inCi) {
  console.warn(`\n[oncefetch] SKIPPING the real-browser tests: no Chromium at ${CHROMIUM_PATH}. ` +
    'Install it with `apt-get install -y chromium` (or set CHROMIUM_PATH).\n');
}

describe.runIf(!available && inCi)('real Chromium (CI)', () => {
  it('Chromium is installed', () => {
    throw new Error(`CI=true and no Chromium at ${CHROMIUM_PATH}: .ci/run should have installed it`);
  });
});

describe.runIf(available)('oncefetch in headless Chromium', { timeout: 30_000 }, () => {
  let browser: Browser;
  let context: BrowserContext;
  let provider: Provider;
  let api: Loopback;
  let site: Loopback;
  let pageUrl: string;
  /** the page bundle's chunk for explain(), loaded on first use */
  let explainChunk: string | undefined;

  beforeAll(async () => {
    const files = new Map<string, StaticFile>();
    // Code-split as an app's bundler would: explain() is a chunk fetched on first use.
    const bundle = await bundleForBrowser(fileURLToPath(new URL('./page.ts', import.meta.url)));
    files.set('/', { type: 'text/html; charset=utf-8', body: pageHtml('oncefetch browser tests', '/page.js') });
    for (const [path, body] of bundle) files.set(path, { type: 'text/javascript; charset=utf-8', body });
    explainChunk = [...bundle.keys()].find((p) => /^\/explain-[\w-]+\.js$/.test(p));
    provider = await startProvider();
    api = await startCorsProxy(provider.url);
    site = await startStaticServer(files);
    pageUrl = `${site.url}/?api=${encodeURIComponent(api.url)}`;
    browser = await launchChromium();
    context = await browser.newContext();
  }, 30_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await site?.close();
    await api?.close();
    await provider?.close();
  });

  async function openPage(): Promise<Page> {
    const page = await context.newPage();
    page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
    await page.goto(pageUrl);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    return page;
  }

  const place = (page: Page, call: OrderCall): Promise<OrderOutcome> =>
    page.evaluate((c) => window.oncefetchTest.placeOrder(c), call);
  const posts = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;
  const orderOf = (ref: string): string | undefined => provider.orders.find((o) => o.ref === ref)?.id;

  function ok(outcome: OrderOutcome): Extract<OrderOutcome, { ok: true }> {
    if (!outcome.ok) throw new Error(`the call failed: ${outcome.error.name} ${outcome.error.code ?? ''} ${outcome.error.message}`);
    return outcome;
  }

  it('the page is a secure context with IndexedDB and Web Locks', async () => {
    const page = await openPage();
    expect(await page.evaluate(() => window.oncefetchTest.isSecureContext())).toBe(true);
    expect(await page.evaluate(() => window.oncefetchTest.hasWebLocks())).toBe(true);
    await page.close();
  });

  it('happy path: one POST across origins, then replays from IndexedDB without the network, also after a reload', async () => {
    const page = await openPage();
    const call: OrderCall = { ref: unique('happy'), item: 'book', dbName: unique('db') };
    const first = ok(await place(page, call));
    expect(first.status).toBe(201);
    expect(first.replayed).toBeNull();
    expect(first.order.id).toBe(orderOf(call.ref));
    const sent = provider.requests.find((r) => r.ref === call.ref);
    expect(sent?.key).toMatch(/^[0-9a-f-]{36}$/); // the key crossed the CORS preflight

    const again = ok(await place(page, call));
    expect(again.replayed).toBe('true');
    expect(again.order.id).toBe(first.order.id);

    await page.reload();
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached' });
    const afterReload = ok(await place(page, call));
    expect(afterReload.replayed).toBe('true');
    expect(afterReload.order.id).toBe(first.order.id);
    expect(afterReload.events).toContain('replay');

    expect(posts(call.ref)).toBe(1);
    expect(provider.effectsFor(call.ref)).toBe(1);
    await page.close();
  });

  it('explain() fetches its chunk on first use, in a code-split page; recover() finds nothing to do', async () => {
    expect(explainChunk).toBeDefined();
    const page = await openPage();
    const fetched: string[] = [];
    page.on('request', (r) => fetched.push(new URL(r.url()).pathname));
    const call: OrderCall = { ref: unique('explain'), item: 'pen', dbName: unique('db') };
    ok(await place(page, call));
    expect(fetched).not.toContain(explainChunk);
    const got = await page.evaluate((c) => window.oncefetchTest.explainAndRecover(c), call);
    expect(fetched.filter((p) => p === explainChunk)).toHaveLength(1);
    expect(got).toMatchObject({ code: 'succeeded', state: 'succeeded', recovered: { resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] } });
    expect(posts(call.ref)).toBe(1);
    await page.close();
  });

  it('ambiguous timeout, then a lookup: the order is found, not sent again', async () => {
    const page = await openPage();
    const call: OrderCall = { ref: unique('timeout'), item: 'lamp', dbName: unique('db'), attemptTimeoutMs: 600 };
    provider.fault({ kind: 'delay_after_commit', delayMs: 3_000, match: { ref: call.ref } });
    const outcome = ok(await place(page, call));
    expect(outcome.status).toBe(200); // the lookup's answer
    expect(outcome.order.id).toBe(orderOf(call.ref));
    expect(outcome.events).toEqual(expect.arrayContaining(['attempt_finished', 'lookup']));
    expect(posts(call.ref)).toBe(1);
    expect(provider.effectsFor(call.ref)).toBe(1);
    const stored = (await page.evaluate((c) => window.oncefetchTest.record(c.dbName, c.ref), call)) as {
      state: string;
      attempts: Array<{ class: string }>;
    };
    expect(stored.state).toBe('succeeded');
    expect(stored.attempts.map((a) => a.class)).toEqual(['ambiguous']);
    await page.close();
  });

  for (const how of ['reload', 'close'] as const) {
    const title =
      how === 'reload'
        ? 'reload mid-flight: the next page load reconciles, one effect, the original order id'
        : 'tab closed mid-flight: the next tab reconciles, one effect, the original order id';
    it(title, async () => {
      let page = await openPage();
      const call: OrderCall = { ref: unique(how), item: 'chair', dbName: unique('db'), leaseMs: 1_000 };
      provider.fault({ kind: 'delay_after_commit', delayMs: 5_000, match: { ref: call.ref } });
      const lost = place(page, call).catch((e: unknown) => e); // dies with the page
      await until(() => provider.effectsFor(call.ref) === 1, 10_000, 'the provider to commit the order');
      const original = orderOf(call.ref);
      let resumed: OrderCall | null = call;
      if (how === 'reload') {
        await page.reload();
        await page.waitForSelector('body[data-ready="true"]', { state: 'attached' });
        resumed = await page.evaluate(() => window.oncefetchTest.pendingOrder());
        expect(resumed).toEqual(call); // the page remembers what it was placing
      } else {
        await page.close();
        page = await openPage();
      }
      expect(await lost).toBeInstanceOf(Error); // the first call died with its page, unanswered

      const outcome = ok(await place(page, resumed!));
      expect(outcome.order.id).toBe(original);
      // it waited out the dead tab's lease, took over, and asked the provider before any resend
      expect(outcome.events).toEqual(expect.arrayContaining(['takeover', 'lookup']));
      expect(outcome.events).not.toContain('attempt_started');
      expect(posts(call.ref)).toBe(1);
      expect(provider.effectsFor(call.ref)).toBe(1);
      console.info(`[browser] ${how} mid-flight: effects=${provider.effectsFor(call.ref)} posts=${posts(call.ref)}, settled in ${outcome.ms} ms`);
      await page.close();
    });
  }

  for (const locks of [true, false]) {
    const how = locks ? 'Web Locks + compare-and-set' : 'compare-and-set and lease alone (no Web Locks)';
    it(`two tabs at once, one scope: one send (${how})`, async () => {
      const [a, b] = [await openPage(), await openPage()];
      const call: OrderCall = { ref: unique(locks ? 'tabs' : 'tabs-nolock'), item: 'desk', dbName: unique('db'), locks };
      provider.fault({ kind: 'delay_after_commit', delayMs: 2_000, match: { ref: call.ref } });
      const outcomes = (await Promise.all([place(a, call), place(b, call)])).map(ok);
      expect(outcomes[0]!.order.id).toBe(orderOf(call.ref));
      expect(outcomes[1]!.order.id).toBe(orderOf(call.ref));
      const replays = outcomes.filter((o) => o.events.includes('replay'));
      expect(replays).toHaveLength(1);
      // With the lock the second tab waited on it, not on the lease (no polling).
      expect(replays[0]!.events.includes('waiting')).toBe(!locks);
      expect(posts(call.ref)).toBe(1);
      expect(provider.effectsFor(call.ref)).toBe(1);
      console.info(`[browser] two tabs (${how}): effects=${provider.effectsFor(call.ref)} posts=${posts(call.ref)}`);
      await a.close();
      await b.close();
    });
  }

  it('examples/browser: "Place order", reload mid-request, the page shows the one order', async () => {
    const example = await startBrowserExample({ delayMs: 3_000 });
    const page = await context.newPage();
    try {
      await page.goto(example.url);
      await page.waitForSelector('body[data-ready="true"]', { state: 'attached' });
      await page.click('#place');
      await until(() => example.provider.effects === 1, 10_000, 'the example API to create the order');
      await page.reload();
      await page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('done'), undefined, { timeout: 20_000 });
      expect(await page.textContent('#order')).toBe(example.provider.orders[0]?.id);
      expect(await page.textContent('#effects')).toBe('1');
      expect(example.provider.requests).toHaveLength(1);
      expect(example.provider.effects).toBe(1);
    } finally {
      await page.close();
      await example.close();
    }
  });

  // Regression: with another tab's deleteDatabase held up by a connection that stays open, the store's
  // open waited forever, and the call with it, past its deadline.
  it('a blocked database: the call ends at its deadline, nothing sent; a store read fails after 5 s saying what to do; unblocked, one send', async () => {
    const page = await openPage();
    const call: OrderCall = { ref: unique('blocked'), item: 'mug', dbName: unique('db'), deadlineMs: 500 };
    const { blocked, read, after } = await page.evaluate((c) => window.oncefetchTest.placeWhileBlocked(c), call);
    expect(blocked).toMatchObject({ ok: false, error: { code: 'DEADLINE_EXCEEDED' } });
    expect(blocked.ms).toBeLessThan(2_000);
    expect(read.code).toBe('STORE_ERROR');
    expect(read.message).toMatch(/open blocked 5000 ms.*other tabs/);
    expect(read.ms).toBeGreaterThanOrEqual(4_900);
    expect(read.ms).toBeLessThan(8_000);
    expect(ok(after).status).toBe(201);
    expect(posts(call.ref)).toBe(1);
    expect(provider.effectsFor(call.ref)).toBe(1);
    await page.close();
  });

  it('the store contract suite passes on real IndexedDB', async () => {
    const page = await openPage();
    const results: CaseResult[] = await page.evaluate(() => window.oncefetchTest.contract());
    const failed = results.filter((r) => r.status !== 'passed'); // skipped counts as failed: the durable case must run
    expect(failed).toEqual([]);
    expect(results.length).toBeGreaterThanOrEqual(15);
    expect(results.map((r) => r.name)).toEqual(expect.arrayContaining([expect.stringMatching(/50 parallel claims/), expect.stringMatching(/close and open again/)]));
    const slowest = [...results].sort((x, y) => y.ms - x.ms)[0];
    console.info(`[browser] contract suite: ${results.length} cases passed on Chromium IndexedDB (slowest ${slowest?.ms} ms: ${slowest?.name})`);
    await page.close();
  });
});
