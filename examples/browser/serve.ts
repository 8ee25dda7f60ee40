/**
 * Serves the browser example on 127.0.0.1: bundles app.ts with esbuild,
 * serves index.html and app.js, and proxies `/orders` and `/__control/state`
 * to the loopback orders API (src/testing/provider.ts), which answers every
 * order `--delay` ms after creating it, so there is time to reload mid-request.
 *
 *   npm run example:browser                 # http://127.0.0.1:5173/
 *   npm run example:browser -- --port 8080 --delay 6000
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { startProvider, type Provider } from '../../src/testing/provider.js';

/** A running example. */
export interface BrowserExample {
  url: string;
  provider: Provider;
  close(): Promise<void>;
}

const here = fileURLToPath(new URL('.', import.meta.url));

/** Builds the page and starts the API and the server. */
export async function startBrowserExample(options: { port?: number; delayMs?: number } = {}): Promise<BrowserExample> {
  const delayMs = options.delayMs ?? 4_000;
  const bundle = await build({
    entryPoints: [`${here}app.ts`],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    sourcemap: 'inline',
    logLevel: 'warning',
  });
  const appJs = bundle.outputFiles[0]!.contents;
  const html = readFileSync(`${here}index.html`);
  // Every order is answered `delayMs` after it was created (the commit happens first).
  const provider = await startProvider({
    randomFaults: { seed: 1, rate: 1, kinds: [{ kind: 'delay_after_commit', delayMs }] },
  });

  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    if (path === '/orders' || path.startsWith('/orders/') || path === '/__control/state') {
      // Same origin as the page: no CORS needed.
      const upstream = request(new URL(req.url ?? '/', provider.url), { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.once('error', () => res.destroy());
      req.pipe(upstream);
      return;
    }
    const file = path === '/' ? { type: 'text/html; charset=utf-8', body: html } : path === '/app.js' ? { type: 'text/javascript', body: appJs } : undefined;
    if (file === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    provider,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await provider.close();
    },
  };
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '5173' }, delay: { type: 'string', default: '4000' } } });
  const example = await startBrowserExample({ port: Number(values.port), delayMs: Number(values.delay) });
  console.log(`oncefetch browser example: open ${example.url}`);
  console.log(`orders are answered ${values.delay} ms late: click "Place order", then reload while it says "sending…".`);
  console.log('Ctrl-C to stop.');
  process.once('SIGINT', () => void example.close().then(() => process.exit(0)));
}
