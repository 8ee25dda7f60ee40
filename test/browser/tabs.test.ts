/**
 * One tab against another, in real headless Chromium: what another tab of the origin can do to
 * the IndexedDB store and the Web Locks while a once-only POST is made (race it on its own
 * connection, hang while holding the lock, upgrade the database). The provider is a loopback
 * server of the test's own on the page's origin that does NOT deduplicate: every POST is an
 * effect.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Frame, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleForBrowser, CHROMIUM_ARGS, CHROMIUM_PATH, chromiumAvailable, launchChromium, pageHtml, unique, until } from './chromium.js';
import { listen } from './servers.js';
import type { TabCall, TabOutcome } from './tabs-page.js';

const available = chromiumAvailable();

/** Serves the page's files, and POST /orders: every POST an effect, answered 201 after `delayMs`. */
async function startSite(files: Map<string, string>): Promise<{ url: string; effects: Map<string, number>; delayMs: Map<string, number>; close: () => Promise<void> }> {
  const effects = new Map<string, number>();
  const delayMs = new Map<string, number>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method === 'GET' && url.pathname === '/lookup') {
      const ref = url.searchParams.get('ref') ?? '';
      const found = (effects.get(ref) ?? 0) > 0;
      res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify({ ref, found }));
      return;
    }
    if (req.method === 'GET') {
      const body = url.pathname === '/' ? pageHtml('oncefetch tabs', '/page.js') : files.get(url.pathname);
      if (body === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': url.pathname === '/' ? 'text/html; charset=utf-8' : 'text/javascript; charset=utf-8', 'cache-control': 'no-store' }).end(body);
      return;
    }
    if (req.method !== 'POST' || url.pathname !== '/orders') return void res.writeHead(404).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ref = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ref?: unknown }).ref ?? '');
      effects.set(ref, (effects.get(ref) ?? 0) + 1);
      setTimeout(() => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ ref })), delayMs.get(ref) ?? 0);
    });
  });
  return { ...(await listen(server)), effects, delayMs };
}

describe.runIf(available)('one tab against another in headless Chromium', { timeout: 30_000 }, () => {
  let browser: Browser;
  let context: BrowserContext;
  let site: Awaited<ReturnType<typeof startSite>>;

  beforeAll(async () => {
    const bundle = await bundleForBrowser(fileURLToPath(new URL('./tabs-page.ts', import.meta.url)));
    site = await startSite(bundle);
    browser = await launchChromium();
    context = await browser.newContext();
  }, 30_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    await site?.close();
  });

  /** A tab of the site, loaded; with `locks: false`, one whose `navigator.locks` is undefined (a browser or frame without Web Locks). */
  async function openPage(o: { locks?: boolean } = {}): Promise<Page> {
    const page = await context.newPage();
    page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
    if (o.locks === false) await page.addInitScript(() => Object.defineProperty(Navigator.prototype, 'locks', { get: () => undefined, configurable: true }));
    await page.goto(`${site.url}/`);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    return page;
  }

  const post = (page: Page, call: TabCall): Promise<TabOutcome> => page.evaluate((c) => window.tabsTest.post(c), call);
  const call = (extra: Partial<TabCall> = {}): TabCall => ({ url: `${site.url}/orders`, ref: unique('tabs'), dbName: unique('db'), ...extra });
  const effects = (ref: string): number => site.effects.get(ref) ?? 0;

  for (const groupCommit of [true, false]) {
    it(`two tabs racing compare-and-set on one record, each on its own connection (groupCommit ${groupCommit}): no lost update`, async () => {
      const [a, b] = [await openPage(), await openPage()];
      const dbName = unique('db');
      const id = await a.evaluate(([d, r]) => window.tabsTest.casSetup(d, r), [dbName, unique('race')] as const);
      const before = (await a.evaluate(([d, i]) => window.tabsTest.generation(d, i), [dbName, id] as const))!;
      const rounds = 60;
      const [x, y] = await Promise.all([a, b].map((p) => p.evaluate(([d, i, n, g]) => window.tabsTest.casRace(d, i, n, g), [dbName, id, rounds, groupCommit] as const)));
      const after = (await a.evaluate(([d, i]) => window.tabsTest.generation(d, i), [dbName, id] as const))!;
      console.info(`[tabs] CAS race (groupCommit ${groupCommit}): won ${x!.won}+${y!.won}, lost ${x!.lost}+${y!.lost}, generation ${before} -> ${after}`);
      expect(x!.won + y!.won).toBe(after - before);
      expect(x!.won + x!.lost + y!.won + y!.lost).toBe(4 * rounds);
      await a.close();
      await b.close();
    });
  }

  it('a tab hung while holding the Web Lock of a scope: the other tab waits inFlightWaitMs, not forever, then sends once', async () => {
    const [hung, other] = [await openPage(), await openPage()];
    const c = call({ inFlightWaitMs: 1_000 });
    await hung.evaluate(([d, r]) => window.tabsTest.holdLock(d, r), [c.dbName, c.ref] as const);
    const got = await post(other, c);
    expect(got).toMatchObject({ ok: true, status: 201 });
    expect(got.ms).toBeGreaterThanOrEqual(950);
    expect(got.ms).toBeLessThan(5_000);
    expect(got.locks).toEqual({ held: 1, pending: 0 }); // the hung tab's; this tab's request was withdrawn
    expect(effects(c.ref)).toBe(1);
    await hung.close();
    await other.close();
  });

  it('two apps of one origin on two databases, one ref: the second sends at once, not after the first\'s long request; on one database two tabs still make one POST', async () => {
    const [a, b] = [await openPage(), await openPage()];
    const first = call({ inFlightWaitMs: 10_000 });
    const other: TabCall = { ...first, dbName: unique('db') };
    site.delayMs.set(first.ref, 2_000);
    const running = post(a, first);
    await until(() => effects(first.ref) === 1, 5_000, 'the first POST to arrive');
    site.delayMs.set(first.ref, 0); // the second POST is answered at once: its call's time is its wait
    const second = await post(b, other);
    const firstGot = await running;
    console.info(`[tabs] two databases, one ref: the second call took ${second.ms} ms while the first's took ${firstGot.ms} ms; POSTs=${effects(first.ref)}`);
    expect(firstGot).toMatchObject({ ok: true, status: 201 });
    expect(second).toMatchObject({ ok: true, status: 201 });
    expect(second.events).not.toContain('replay');
    expect(second.ms).toBeLessThan(1_000);
    expect(effects(first.ref)).toBe(2); // one operation per database, each sent once

    const shared = call({ inFlightWaitMs: 10_000 });
    site.delayMs.set(shared.ref, 1_000);
    const owner = post(a, shared);
    await until(() => effects(shared.ref) === 1, 5_000, 'the owner\'s POST to arrive');
    const joined = await post(b, shared);
    const ownerGot = await owner;
    console.info(`[tabs] one database, two tabs: owner ${ownerGot.ms} ms, the other tab ${joined.ms} ms (${joined.events.join(', ')}); POSTs=${effects(shared.ref)}`);
    expect(ownerGot).toMatchObject({ ok: true, status: 201 });
    expect(joined).toMatchObject({ ok: true, status: 201 });
    expect(joined.events).toContain('replay');
    expect(joined.events).not.toContain('waiting'); // it waited on the Web Lock, not by polling the lease
    expect(effects(shared.ref)).toBe(1);
    await a.close();
    await b.close();
  });

  it("the caller's abort while waiting for a hung tab's Web Lock: rejects with its reason, nothing sent, the lock request withdrawn", async () => {
    const [hung, other] = [await openPage(), await openPage()];
    const c = call({ abortAfterMs: 300 });
    await hung.evaluate(([d, r]) => window.tabsTest.holdLock(d, r), [c.dbName, c.ref] as const);
    const got = await post(other, c);
    expect(got).toMatchObject({ ok: false, error: { message: 'caller gave up' } });
    expect(got.ms).toBeLessThan(2_000);
    expect(got.locks).toEqual({ held: 1, pending: 0 });
    expect(effects(c.ref)).toBe(0);
    await hung.close();
    await other.close();
  });

  it('the call deadline while waiting for a hung tab\'s Web Lock: DeadlineExceededError at the deadline, nothing sent', async () => {
    const [hung, other] = [await openPage(), await openPage()];
    const c = call({ deadlineMs: 500 });
    await hung.evaluate(([d, r]) => window.tabsTest.holdLock(d, r), [c.dbName, c.ref] as const);
    const got = await post(other, c);
    expect(got).toMatchObject({ ok: false, error: { code: 'DEADLINE_EXCEEDED' } });
    expect(got.ms).toBeLessThan(2_000);
    expect(got.locks).toEqual({ held: 1, pending: 0 });
    expect(effects(c.ref)).toBe(0);
    await hung.close();
    await other.close();
  });

  // Regression (user trial): a close whose waitMs ran out left a call queued on the lock until the
  // other tab let go (up to inFlightWaitMs), and only then did it fail, on the closed store.
  it("client.close({ waitMs: 0 }) while waiting for a hung tab's Web Lock: rejects with the close's StoreError, nothing sent, the lock request withdrawn", async () => {
    const [hung, other] = [await openPage(), await openPage()];
    const c = call({ closeAfterMs: 300, inFlightWaitMs: 20_000 });
    await hung.evaluate(([d, r]) => window.tabsTest.holdLock(d, r), [c.dbName, c.ref] as const);
    const got = await post(other, c);
    expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR', message: expect.stringContaining('client.close({ waitMs: 0 })') } });
    expect(got.ms).toBeLessThan(2_000);
    expect(got.locks).toEqual({ held: 1, pending: 0 });
    expect(effects(c.ref)).toBe(0);
    await hung.close();
    await other.close();
  });

  it('another tab steals the Web Lock (steal: true) while the POST is on the wire: the call still answers with its 201, not the lock\'s AbortError; one effect, the next call replays it', async () => {
    const [a, b] = [await openPage(), await openPage()];
    const c = call();
    site.delayMs.set(c.ref, 1_000);
    const running = post(a, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    await b.evaluate(([d, r]) => window.tabsTest.stealLock(d, r, 50), [c.dbName, c.ref] as const);
    const got = await running;
    const again = await post(b, c);
    console.info(`[tabs] Web Lock stolen mid-request: ${got.status ?? `${got.error?.name}: ${got.error?.message}`} (${got.ms} ms), then ${again.status ?? again.error?.message}; effects=${effects(c.ref)}`);
    expect(got).toMatchObject({ ok: true, status: 201 });
    expect(again).toMatchObject({ ok: true, status: 201 });
    expect(again.events).toContain('replay');
    expect(effects(c.ref)).toBe(1);
    await a.close();
    await b.close();
  });

  it('the owner tab\'s main thread busy 3 s (a hung or frozen tab) while its POST is on the wire, past its lease: another tab takes over and the lookup finds the order; unfrozen, the first call answers without sending; one effect', async () => {
    const [a, b] = [await openPage(), await openPage()];
    const c = call({ leaseMs: 1_000, inFlightWaitMs: 1_500, lookup: true });
    site.delayMs.set(c.ref, 1_000);
    const running = post(a, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    // (CDP's Page.setWebLifecycleState 'frozen' does not stop a visible headless page's timers: a busy main thread does)
    void a.evaluate(() => {
      const until = performance.now() + 3_000;
      while (performance.now() < until);
    });
    const other = await post(b, c);
    const got = await running;
    const again = await post(b, c);
    const fmt = (o: TabOutcome): string => `${o.status ?? `${o.error?.name}: ${o.error?.message}`} (${o.ms} ms) [${o.events.join(',')}]`;
    console.info(`[tabs] owner busy mid-request: other tab ${fmt(other)}; first ${fmt(got)}; again ${fmt(again)}; effects=${effects(c.ref)}`);
    expect(effects(c.ref)).toBe(1);
    expect(other.events).not.toContain('attempt_started');
    expect(again.ok).toBe(true);
    await a.close();
    await b.close();
  });

  for (const lookup of [false, true]) {
    it(`a tab hung inside a readwrite transaction on the store: another tab's calls end at their deadline, nothing sent; the claim given up on lands after the hang (lookup ${lookup})`, { timeout: 60_000 }, async () => {
      const [hung, other] = [await openPage(), await openPage()];
      const done = call();
      expect(await post(other, done)).toMatchObject({ ok: true, status: 201 });
      const fresh = call({ dbName: done.dbName, deadlineMs: 1_500, leaseMs: 2_000, lookup });
      const hang = hung.evaluate(([d]) => window.tabsTest.hangInTransaction(d, 7_000), [done.dbName] as const);
      await new Promise((r) => setTimeout(r, 300));
      const replay = await post(other, { ...done, deadlineMs: 1_500 });
      const blocked = await post(other, fresh);
      const fmt = (o: TabOutcome): string => `${o.status ?? `${o.error?.name}: ${o.error?.message}`} (${o.ms} ms) [${o.events.join(',')}]`;
      console.info(`[tabs] a tab hung in a transaction: replay ${fmt(replay)}; new ref ${fmt(blocked)}; effects ${effects(done.ref)}, ${effects(fresh.ref)}`);
      expect(replay.ms).toBeLessThan(3_000);
      expect(blocked.ms).toBeLessThan(3_000);
      expect(effects(fresh.ref)).toBe(0);
      expect(await hang).toBe('complete');
      const stored = await other.evaluate(([d, r]) => window.tabsTest.stored(d, r), [fresh.dbName, fresh.ref] as const);
      const after = await post(other, { ...fresh, deadlineMs: 15_000 });
      console.info(`[tabs] after the hang (lookup ${lookup}): record ${JSON.stringify(stored)}; ${fmt(after)}; effects ${effects(fresh.ref)}`);
      expect(effects(done.ref)).toBe(1);
      expect(effects(fresh.ref)).toBeLessThanOrEqual(1);
      await hung.close();
      await other.close();
    });
  }

  it('a third-party frame whose storage Chromium blocks (IndexedDB open: UnknownError "The user denied permission"): a StoreError saying storage is unavailable here and nothing was sent; nothing sent', async () => {
    // Another site (localhost) embeds the site (127.0.0.1): its frame is third-party, and this Chromium
    // denies it storage and Web Locks rather than partitioning them.
    const embed = createServer((_req, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><body><iframe src="${site.url}/"></iframe></body>`));
    const embedAt = await listen(embed);
    const partner = await context.newPage();
    try {
      await partner.goto(`http://localhost:${new URL(embedAt.url).port}/`);
      let frame: Frame | undefined;
      await until(() => (frame = partner.frames().find((f) => f.url().startsWith(site.url))) !== undefined, 5_000, 'the frame');
      await frame!.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
      const c = call();
      const got = await frame!.evaluate((x) => window.tabsTest.post(x), c);
      console.info(`[tabs] third-party frame: ${got.error?.code} ${got.error?.message}`);
      expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
      expect(got.error?.message).toMatch(/storage unavailable here \(sandboxed or third-party frame, private mode, storage disabled\?\); nothing was sent \(UnknownError/);
      expect(effects(c.ref)).toBe(0);
    } finally {
      await partner.close();
      await embedAt.close();
    }
  });

  it("the site's IndexedDB cleared (site data wiped) while a request is on the wire: the call returns the 201 and writes its record back; the next call with the ref replays it", async () => {
    const page = await openPage();
    const c = call();
    site.delayMs.set(c.ref, 800);
    const running = post(page, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    const cdp = await context.newCDPSession(page);
    await cdp.send('Storage.clearDataForOrigin', { origin: site.url, storageTypes: 'indexeddb' });
    const got = await running;
    const again = await post(page, c);
    console.info(`[tabs] IndexedDB cleared mid-request: ${got.status ?? got.error?.message} (${got.ms} ms), then ${again.status ?? again.error?.message}; effects=${effects(c.ref)}`);
    expect(got).toMatchObject({ ok: true, status: 201 });
    expect(got.ms).toBeLessThan(5_000);
    expect(again).toMatchObject({ ok: true, status: 201 });
    expect(effects(c.ref)).toBe(1);
    await page.close();
  });

  for (const storageTypes of ['indexeddb', 'all']) {
    it(`site data cleared mid-request (${storageTypes}; 'all' takes Chromium's Web Locks too), then another tab calls the ref 150 ms later: the owner puts its record back when its connection is closed under it, so the new tab waits for it and replays its 201: one POST`, async () => {
      const owner = await openPage();
      const c = call({ leaseMs: 5_000, inFlightWaitMs: 10_000 });
      site.delayMs.set(c.ref, 1_500);
      const running = post(owner, c);
      await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
      const late = await openPage(); // loaded, but first uses navigator.locks after the clear
      const cdp = await context.newCDPSession(owner);
      await cdp.send('Storage.clearDataForOrigin', { origin: site.url, storageTypes });
      const clearedAt = Date.now();
      await new Promise((r) => setTimeout(r, 150));
      const calledAfterMs = Date.now() - clearedAt;
      const [got, other] = await Promise.all([running, post(late, c)]);
      console.info(`[tabs] site data cleared (${storageTypes}) mid-request, a new tab calling ${calledAfterMs} ms later: owner ${got.status ?? got.error?.message}, new tab ${other.status ?? other.error?.message} (${other.ms} ms); effects=${effects(c.ref)}`);
      expect(got).toMatchObject({ ok: true, status: 201 });
      expect(other).toMatchObject({ ok: true, status: 201 });
      expect(effects(c.ref)).toBe(1);
      await owner.close();
      await late.close();
    });
  }

  it("another tab deletes the database while a request is on the wire, and a tab without Web Locks calls the ref 150 ms later: the owner, told of the deletion, puts its record back, so that tab waits for it and replays its 201: one POST", async () => {
    // With Web Locks the lock alone would make the late tab wait: without them only the record can.
    const [owner, deleter, lockless] = [await openPage(), await openPage(), await openPage({ locks: false })];
    expect(await lockless.evaluate(() => navigator.locks)).toBeUndefined();
    const c = call({ leaseMs: 5_000, inFlightWaitMs: 10_000 });
    site.delayMs.set(c.ref, 1_500);
    const running = post(owner, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    const deleted = await deleter.evaluate(([d]) => window.tabsTest.deleteDatabase(d), [c.dbName] as const);
    const deletedAt = Date.now();
    await new Promise((r) => setTimeout(r, 150));
    const calledAfterMs = Date.now() - deletedAt;
    const [got, other] = await Promise.all([running, post(lockless, c)]);
    console.info(`[tabs] database deleted mid-request (${deleted}), a tab without Web Locks calling ${calledAfterMs} ms later: owner ${got.status ?? got.error?.message}, that tab ${other.status ?? other.error?.message} (${other.ms} ms, events ${other.events.join(',')}); effects=${effects(c.ref)}`);
    expect(deleted).toBe('deleted');
    expect(got).toMatchObject({ ok: true, status: 201 });
    expect(other).toMatchObject({ ok: true, status: 201 });
    expect(effects(c.ref)).toBe(1);
    // it found the owner's record in flight (put back), not a finished one: the owner was still on the wire
    expect(other.events).toEqual(['waiting', 'replay']);
    await Promise.all([owner.close(), deleter.close(), lockless.close()]);
  });

  it('another tab upgrades the database while a request is on the wire (a newer oncefetch whose layout keeps our store and index): the call records its 201 at the new version; the next call replays it', async () => {
    const [a, b] = [await openPage(), await openPage()];
    const c = call();
    site.delayMs.set(c.ref, 800);
    const running = post(a, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    const upgraded = await b.evaluate(([d]) => window.tabsTest.upgrade(d, 3), [c.dbName] as const);
    const got = await running;
    const again = await post(a, c);
    console.info(`[tabs] database upgraded mid-request: ${upgraded}; ${got.status ?? got.error?.message}, then ${again.status ?? again.error?.message}; effects=${effects(c.ref)}`);
    expect(upgraded).toMatch(/^upgraded/);
    expect(got).toMatchObject({ ok: true, status: 201 });
    expect(again).toMatchObject({ ok: true, status: 201 });
    expect(effects(c.ref)).toBe(1);
    await a.close();
    await b.close();
  });

  it('another tab upgrades the database to a layout this oncefetch cannot read while a request is on the wire: no hang, nothing resent; calls again fail before sending', async () => {
    const [a, b] = [await openPage(), await openPage()];
    const c = call();
    site.delayMs.set(c.ref, 800);
    const running = post(a, c);
    await until(() => effects(c.ref) === 1, 5_000, 'the POST to arrive');
    const upgraded = await b.evaluate(([d]) => window.tabsTest.upgrade(d, 3, true), [c.dbName] as const);
    const got = await running;
    console.info(`[tabs] database upgraded to an unreadable layout mid-request: ${upgraded}; ${got.error?.code} ${got.error?.message}`);
    expect(upgraded).toMatch(/^upgraded/);
    expect(got).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
    const again = await post(a, c);
    expect(again).toMatchObject({ ok: false, error: { code: 'STORE_ERROR' } });
    expect(effects(c.ref)).toBe(1);
    await a.close();
    await b.close();
  });
});

describe.runIf(available)('the browser crashing right after the send, in headless Chromium', { timeout: 60_000 }, () => {
  let site: Awaited<ReturnType<typeof startSite>>;
  let profile: string;

  beforeAll(async () => {
    site = await startSite(await bundleForBrowser(fileURLToPath(new URL('./tabs-page.ts', import.meta.url))));
    profile = await mkdtemp(join(tmpdir(), 'oncefetch-crash-'));
  }, 30_000);

  afterAll(async () => {
    await site?.close();
    if (profile !== undefined) await rm(profile, { recursive: true, force: true });
  });

  /** Chromium on the profile kept across launches, and a page of the site in it. */
  async function launch(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 20_000 });
    const page = await context.newPage();
    page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
    await page.goto(`${site.url}/`);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    return { context, page };
  }

  it('the whole browser crashes while the POST is at the provider: relaunched, the record is there, the lookup finds the order, nothing resent', async () => {
    const c: TabCall = { url: `${site.url}/orders`, ref: unique('crash'), dbName: unique('db'), leaseMs: 1_000, lookup: true };
    site.delayMs.set(c.ref, 10_000);
    const first = await launch();
    await first.page.evaluate((x) => window.tabsTest.start(x), c);
    await until(() => (site.effects.get(c.ref) ?? 0) === 1, 5_000, 'the POST to arrive');
    const cdp = await first.context.newCDPSession(first.page);
    const crashed = await cdp.send('Browser.crash').then(() => 'returned', (e: unknown) => String(e).split('\n')[0]); // the browser process dies: no unload, no close
    console.info(`[tabs] Browser.crash: ${crashed}`);
    await first.context.close().catch(() => undefined);
    const second = await launch();
    try {
      const stored = await second.page.evaluate(([d, r]) => window.tabsTest.stored(d, r), [c.dbName, c.ref] as const);
      console.info(`[tabs] after a browser crash: record ${JSON.stringify(stored)}`);
      expect(stored).toEqual({ state: 'in_flight', attempts: [null] });
      const got = await second.page.evaluate((x) => window.tabsTest.post(x), c);
      expect(got).toMatchObject({ ok: true, status: 200 });
      expect(got.events).toEqual(expect.arrayContaining(['takeover', 'lookup']));
      expect(got.events).not.toContain('attempt_started');
      expect(site.effects.get(c.ref)).toBe(1);
    } finally {
      await second.context.close();
    }
  });
});
