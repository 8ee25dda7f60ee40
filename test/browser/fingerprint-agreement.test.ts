/**
 * Node and Chromium give every request and payload the same fingerprint (node:crypto there,
 * WebCrypto here; each platform's FormData serialisation), and the values of
 * test/helpers/fingerprint-vectors.ts. Skipped without Chromium, failed with CI=true (as
 * chromium.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { computeFingerprintVectors, EXPECTED_FINGERPRINTS } from '../helpers/fingerprint-vectors.js';
import { bundleForBrowser, chromiumAvailable, launchChromium, pageHtml } from './chromium.js';
import { startStaticServer, type Loopback, type StaticFile } from './servers.js';

const available = chromiumAvailable();

describe.runIf(available || process.env['CI'] === 'true')('fingerprints in headless Chromium', { timeout: 30_000 }, () => {
  let browser: Browser;
  let site: Loopback;

  beforeAll(async () => {
    const files = new Map<string, StaticFile>();
    const bundle = await bundleForBrowser(fileURLToPath(new URL('./fingerprint-page.ts', import.meta.url)));
    files.set('/', { type: 'text/html; charset=utf-8', body: pageHtml('oncefetch fingerprints', '/page.js') });
    for (const [path, body] of bundle) files.set(path, { type: 'text/javascript; charset=utf-8', body });
    site = await startStaticServer(files);
    browser = await launchChromium();
  }, 30_000);

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    await site?.close();
  });

  it('are the vectors, the same as in Node', async () => {
    const page = await browser.newPage();
    // 127.0.0.1 is a secure context, so crypto.subtle is there
    await page.goto(`${site.url}/`);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 10_000 });
    const inChromium = await page.evaluate(() => window.computeFingerprintVectors());
    expect(inChromium).toEqual(EXPECTED_FINGERPRINTS);
    expect(await computeFingerprintVectors()).toEqual(inChromium);
  });
});
