import { createServer } from 'node:http';
import type { RequestListener, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';
import type { OnceClient } from '../../src/index.js';

/**
 * The loopback server and the client of a test file's tests, both closed after each test (the
 * client first, then the server and its open connections). Call it once at the top of the file.
 *
 * @returns `serve(handler)`, which starts the server on 127.0.0.1 and gives its origin, and
 *   `use(client)`, which hands the test's client over and returns it
 */
export function eachTest(): { serve: (handler: RequestListener) => Promise<string>; use: <C extends OnceClient>(client: C) => C } {
  let server: Server | undefined;
  let client: OnceClient | undefined;
  afterEach(async () => {
    await client?.close();
    server?.closeAllConnections();
    server?.close();
    server = client = undefined;
  });
  return {
    serve: async (handler) => {
      const started = createServer(handler);
      server = started;
      await new Promise<void>((resolve) => started.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(started.address() as AddressInfo).port}`;
    },
    use: (c) => (client = c),
  };
}
