/**
 * Headless Chromium for the browser tests: Debian's `chromium` package driven
 * by playwright-core (no browser download). Also builds the test page with
 * esbuild.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';

/** Where Chromium is: `$CHROMIUM_PATH`, else Debian's `/usr/bin/chromium`. */
export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** True when the Chromium executable exists. */
export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM_PATH);
}

/** Launch flags for a quiet, isolated headless Chromium (playwright adds a fresh --user-data-dir). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--disable-dev-shm-usage',
];

/** Launches headless Chromium. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 20_000 });
}

const here = fileURLToPath(new URL('.', import.meta.url));

/**
 * Bundles `entry` for the browser (ESM, ES2022) as bundlers ship an app:
 * code-split, so that dynamic imports (`client.explain()`) become chunks the
 * page fetches on first use; `vitest` is aliased to the page's shim so that
 * the contract suite runs in the page. Fails when a Node module would end up
 * in the bundle. Returns every output file by its URL path (`/page.js` for
 * the entry).
 */
export async function bundleForBrowser(entry: string): Promise<Map<string, string>> {
  const result = await build({
    entryPoints: { page: entry },
    bundle: true,
    write: false,
    splitting: true,
    outdir: `${here}.split-out`,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    sourcemap: 'inline',
    alias: { vitest: `${here}vitest-shim.ts` },
    logLevel: 'silent',
  });
  return new Map(result.outputFiles.map((f) => [`/${f.path.split('/').pop() ?? ''}`, f.text]));
}

/** The test page: its bundle as a module script. */
export function pageHtml(title: string, script: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head>` +
    `<body><script type="module" src="${script}"></script></body></html>`;
}

let uniqueCount = 0;
/** A name no earlier test of this process used: `${prefix}-<time>-<n>`. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${++uniqueCount}`;
}

/** Polls `check` every 20 ms (real time) until it is true, for at most `ms`. */
export async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
