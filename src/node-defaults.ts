/**
 * Node defaults: the embedded SQLite store and undici's fetch.
 *
 * @module
 */
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import type { PlatformDefaults } from './client.js';
import { sqliteStore } from './stores/sqlite.js';

/** Where the default SQLite store lives: `$ONCEFETCH_DB`, else `./.oncefetch/oncefetch.db`. */
export function defaultStorePath(): string {
  return process.env['ONCEFETCH_DB'] ?? join(process.cwd(), '.oncefetch', 'oncefetch.db');
}

let agent: Agent | undefined;

/**
 * undici's fetch on a shared keep-alive agent with a 10 s connect timeout: its
 * error codes tell "never sent" (UND_ERR_CONNECT_TIMEOUT, ECONNREFUSED) from
 * "maybe sent" (UND_ERR_HEADERS_TIMEOUT, UND_ERR_SOCKET).
 */
export function defaultFetch(): typeof globalThis.fetch {
  agent ??= new Agent({ connect: { timeout: 10_000 } });
  const dispatcher = agent;
  return ((input: RequestInfo | URL, init?: RequestInit) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], { dispatcher, ...(init as Parameters<typeof undiciFetch>[1]) })) as unknown as typeof globalThis.fetch;
}

/** The Node platform defaults. */
export const nodeDefaults: PlatformDefaults = {
  store: () => sqliteStore({ path: defaultStorePath() }),
  fetch: defaultFetch,
};
