/**
 * The page script of web-faults.test.ts, bundled by esbuild for Chromium: one
 * once-only POST with the browser entry (IndexedDB, Web Locks, the page's
 * fetch) against the test's own provider, with the fetch options a web app may
 * give (`redirect`, `keepalive`), and what came of it: the answer or error, the
 * events, and the stored record. Every function returns plain JSON.
 */
import { createClient, isOnceError } from '../../src/browser.js';
import type { OnceClient } from '../../src/browser.js';
import { createClientWith } from '../../src/client.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';

/** What the Node side asks for. */
export interface WebCall {
  /** the provider's endpoint (absolute) */
  url: string;
  ref: string;
  dbName: string;
  /** `${provider}/lookup`: registers a lookup by ref when given */
  lookupUrl?: string;
  maxAttempts?: number;
  providerDedupes?: boolean;
  attemptTimeoutMs?: number;
  leaseMs?: number;
  /** false: a client without Web Locks (as an older SDK in another tab) @default true */
  locks?: boolean;
  redirect?: RequestRedirect;
  keepalive?: boolean;
  /** the client's settleMs (how long an "absent" lookup answer needs after a send) */
  settleMs?: number;
  /** body size in bytes (padding), @default small */
  bodyBytes?: number;
}

/** One stored attempt, as the record keeps it. */
export interface StoredAttempt {
  class: string | null;
  reason: string | null;
}

/** What a call reports back. */
export interface WebOutcome {
  ok: boolean;
  status?: number;
  body?: string;
  error?: { name: string; code: string | undefined; message: string };
  events: string[];
  record: { state: string; key: string; attempts: StoredAttempt[] } | null;
  ms: number;
}

function client(call: WebCall, events: string[]): OnceClient {
  const lookupUrl = call.lookupUrl;
  const options = {
    tenant: 'web',
    leaseMs: call.leaseMs ?? 30_000,
    providerDedupes: call.providerDedupes ?? false,
    ...(call.settleMs === undefined ? {} : { settleMs: call.settleMs }),
    retry: { maxAttempts: call.maxAttempts ?? 3, baseDelayMs: 20, maxDelayMs: 50, attemptTimeoutMs: call.attemptTimeoutMs ?? 10_000, deadlineMs: 25_000 },
    lookups:
      lookupUrl === undefined
        ? {}
        : {
            order: async ({ scope }: { scope: { ref: string } }): Promise<Response | null> => {
              const res = await fetch(`${lookupUrl}?ref=${encodeURIComponent(scope.ref)}`);
              if (res.status === 404) return null;
              if (!res.ok) throw new Error(`lookup failed with ${res.status}`);
              return res;
            },
          },
    onEvent: (e: { type: string }) => events.push(e.type),
    store: indexedDbStore({ dbName: call.dbName }),
  };
  if (call.locks === false) return createClientWith(options, { store: () => options.store, fetch: () => (i, init) => fetch(i, init) });
  return createClient(options);
}

/** The stored record of a ref. */
async function record(dbName: string, ref: string): Promise<WebOutcome['record']> {
  const store = indexedDbStore({ dbName });
  try {
    const found = (await store.list({ limit: 1000 })).find((r) => r.ref === ref);
    if (found === undefined) return null;
    return { state: found.state, key: found.key, attempts: found.attempts.map((a) => ({ class: a.class ?? null, reason: a.reason ?? null })) };
  } finally {
    await store.close();
  }
}

/** One once-only POST; `before` runs just before it (to arrange the page's state). */
async function post(call: WebCall): Promise<WebOutcome> {
  const events: string[] = [];
  const started = performance.now();
  const c = client(call, events);
  try {
    sessionStorage.setItem('pending', JSON.stringify(call));
  } catch {
    // a sandboxed frame (opaque origin) has no sessionStorage: only start()'s reload needs it
  }
  let outcome: Omit<WebOutcome, 'record' | 'ms'>;
  try {
    const init: RequestInit & { once: { action: string; ref: string } } = {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: call.ref, pad: 'x'.repeat(call.bodyBytes ?? 0) }),
      once: { action: 'order', ref: call.ref },
    };
    if (call.redirect !== undefined) init.redirect = call.redirect;
    if (call.keepalive !== undefined) init.keepalive = call.keepalive;
    const res = await c.fetch(call.url, init);
    outcome = { ok: true, status: res.status, body: await res.text(), events };
  } catch (error) {
    const e = error as Error;
    outcome = { ok: false, error: { name: e.name, code: isOnceError(error) ? error.code : undefined, message: e.message }, events };
  } finally {
    await c.close();
  }
  const stored = await record(call.dbName, call.ref).catch(() => null);
  return { ...outcome, record: stored, ms: Math.round(performance.now() - started) };
}

/** Starts a POST and leaves it running (the test then navigates away or goes offline). */
function start(call: WebCall): void {
  void post(call);
}

/** The call a previous page load was making, if any. */
function pending(): WebCall | null {
  const raw = sessionStorage.getItem('pending');
  return raw === null ? null : (JSON.parse(raw) as WebCall);
}

const api = { post, start, pending, record, online: () => navigator.onLine };
declare global {
  interface Window {
    webTest: typeof api;
  }
}
window.webTest = api;
document.body.dataset['ready'] = 'true';
