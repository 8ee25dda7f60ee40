/**
 * IndexedDB refused in this context: a sandboxed or third-party frame (storage partitioned or
 * blocked), private mode, storage disabled. The call fails with a StoreError before anything is
 * sent; before, its message ("IndexedDB cannot be opened here (SecurityError: …)", or "claiming
 * record … failed (InvalidStateError: …)" for a refusal reported by the open's error event) did
 * not say why nor that nothing was sent. Run under fake-indexeddb, open made to refuse.
 */
import 'fake-indexeddb/auto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { StoreError, createClient } from '../../src/index.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { deleteIdb, freshDbName } from '../browser/idb-raw.js';

const HINT = /storage unavailable here \(sandboxed or third-party frame, private mode, storage disabled\?\); nothing was sent/;
const originalOpen = IDBFactory.prototype.open;

/** An open whose request fails with `name`, as a browser reports a refusal through the error event. */
function failingOpen(name: string): IDBFactory['open'] {
  return () => {
    const request = { error: new DOMException(`refused (${name})`, name) } as unknown as IDBOpenDBRequest;
    setTimeout(() => request.onerror?.(new Event('error')), 0);
    return request;
  };
}

afterEach(() => {
  IDBFactory.prototype.open = originalOpen;
  vi.unstubAllGlobals();
});

async function callWith(): Promise<{ error: unknown; sends: number }> {
  let sends = 0;
  const client = createClient({
    store: indexedDbStore({ dbName: freshDbName() }),
    settleMs: 0,
    fetch: () => {
      sends++;
      return Promise.resolve(new Response('{}', { status: 201 }));
    },
  });
  const error = await client
    .fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'o1' } })
    .then(() => undefined, (e: unknown) => e);
  await client.close();
  return { error, sends };
}

describe('IndexedDB refused in this context', () => {
  it('open throwing a SecurityError (an opaque origin, a sandboxed frame): the StoreError says why and that nothing was sent', async () => {
    IDBFactory.prototype.open = () => {
      throw new DOMException('access to the Indexed Database API is denied in this context', 'SecurityError');
    };
    const { error, sends } = await callWith();
    expect(sends).toBe(0);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(HINT);
    expect((error as Error).message).toMatch(/\(SecurityError: access to the Indexed Database API is denied/);
  });

  it.each(['SecurityError', 'InvalidStateError'])('the open request failing with %s (a third-party frame, private mode) says the same', async (name) => {
    IDBFactory.prototype.open = failingOpen(name);
    const { error, sends } = await callWith();
    expect(sends).toBe(0);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(HINT);
    expect((error as Error).message).toContain(`(${name}: refused (${name}))`);
  });

  it('no indexedDB at all (null, storage disabled) says the same', async () => {
    vi.stubGlobal('indexedDB', null);
    const { error, sends } = await callWith();
    expect(sends).toBe(0);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(HINT);
  });

  it('no indexedDB defined at all (Node, or a test DOM: jsdom, happy-dom) says so and what to use instead', async () => {
    // jsdom and happy-dom define no indexedDB: a React app's unit tests that load the browser entry
    // (vitest with resolve.conditions ['browser'], jest's jsdom environment) get here with the default store.
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB');
    delete (globalThis as { indexedDB?: unknown }).indexedDB;
    try {
      expect(typeof indexedDB).toBe('undefined');
      const { error, sends } = await callWith();
      expect(sends).toBe(0);
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/no IndexedDB in this JavaScript environment \(Node, an edge runtime, or a test DOM such as jsdom or happy-dom\); nothing was sent/);
      expect((error as Error).message).toMatch(/store: memoryStore\(\)/);
      expect((error as Error).message).toMatch(/fake-indexeddb\/auto/);
      expect((error as Error).message).not.toMatch(/sandboxed/);
    } finally {
      if (descriptor !== undefined) Object.defineProperty(globalThis, 'indexedDB', descriptor);
    }
  });

  it('an edge runtime (Next.js: no indexedDB, setImmediate a stub that throws) says there is no IndexedDB', async () => {
    // Regression (a Next.js 16.4.6 trial, `export const runtime = 'edge'`): the claim failed with
    // "claiming record … failed (Error: A Node.js API is used (setImmediate) …)", which hid why.
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB');
    delete (globalThis as { indexedDB?: unknown }).indexedDB;
    vi.stubGlobal('setImmediate', () => {
      throw new Error('A Node.js API is used (setImmediate) which is not supported in the Edge Runtime.');
    });
    try {
      const { error, sends } = await callWith();
      expect(sends).toBe(0);
      expect(error).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/no IndexedDB in this JavaScript environment \(Node, an edge runtime, or a test DOM[^)]*\); nothing was sent/);
      expect((error as Error).message).toMatch(/store: memoryStore\(\)/);
      expect((error as Error).message).not.toMatch(/setImmediate/);
    } finally {
      vi.unstubAllGlobals();
      if (descriptor !== undefined) Object.defineProperty(globalThis, 'indexedDB', descriptor);
    }
  });

  it('Cloudflare Workers (workerd: no indexedDB): the message says memoryStore() keeps records in one isolate only, and what lasts', async () => {
    // A Workers trial (workerd 2026-04-26): the message offered `store: memoryStore()` as the fix; in a
    // Worker its records die with the isolate, and a restarted isolate placed a second order (2 per ref).
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB');
    delete (globalThis as { indexedDB?: unknown }).indexedDB;
    try {
      const { error, sends } = await callWith();
      expect(sends).toBe(0);
      expect(error).toBeInstanceOf(StoreError);
      const message = (error as Error).message;
      expect(message).toMatch(/memoryStore\(\) keeps records only in this process or isolate/);
      expect(message).toMatch(/Cloudflare Workers/);
      expect(message).toMatch(/D1 or a Durable Object/);
      expect(message).toMatch(/describeStoreContract/);
    } finally {
      if (descriptor !== undefined) Object.defineProperty(globalThis, 'indexedDB', descriptor);
    }
  });

  it('an indexedDB defined after the store was made (fake-indexeddb loaded later) is used by claim, get and list alike', async () => {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB')!;
    delete (globalThis as { indexedDB?: unknown }).indexedDB;
    const store = indexedDbStore({ dbName: freshDbName() });
    try {
      const early = await store.get('none').then(() => undefined, (e: unknown) => e);
      expect((early as Error).message).toMatch(/no IndexedDB in this JavaScript environment/);
    } finally {
      Object.defineProperty(globalThis, 'indexedDB', descriptor);
    }
    const client = createClient({ store, settleMs: 0, fetch: () => Promise.resolve(new Response('{}', { status: 201 })) });
    const res = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'late' } });
    expect(res.status).toBe(201);
    const [record] = await store.list({ limit: 10 });
    expect(record?.state).toBe('succeeded');
    expect((await store.get(record!.id))?.state).toBe('succeeded');
    await client.close();
  });

  it('indexedDB gone after the store connected: a write still goes through the open connection, never answers with the connection as a row', async () => {
    const store = indexedDbStore({ dbName: freshDbName() });
    expect(await store.get('none')).toBeUndefined(); // connected
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'indexedDB')!;
    delete (globalThis as { indexedDB?: unknown }).indexedDB;
    let sends = 0;
    const client = createClient({
      store,
      settleMs: 0,
      fetch: () => {
        sends++;
        return Promise.resolve(new Response('{}', { status: 201 }));
      },
    });
    try {
      const result = await client
        .fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'gone' } })
        .then((r) => r.status, (e: unknown) => e);
      expect(result).toBe(201);
      expect(sends).toBe(1);
    } finally {
      Object.defineProperty(globalThis, 'indexedDB', descriptor);
      await client.close();
    }
  });

  it('a refusal after the store has opened once does not claim that nothing was sent', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    expect(await store.get('none')).toBeUndefined();
    // Another tab deletes the database: this store lets its connection go and reopens on the next call.
    await deleteIdb(dbName);
    IDBFactory.prototype.open = () => {
      throw new DOMException('denied', 'SecurityError');
    };
    const error = await store.get('none').then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(/storage unavailable here/);
    expect((error as Error).message).not.toMatch(/nothing was sent/);
    IDBFactory.prototype.open = originalOpen;
    await store.close();
  });

  // Regression (adversarial run in Chromium, tabs.test.ts): a third-party frame whose storage Chromium
  // blocks is refused with an UnknownError, not a SecurityError: the call's StoreError named neither.
  it("Chromium's refusal of a frame's storage (UnknownError: The user denied permission…) gets the hint, and says nothing was sent", async () => {
    IDBFactory.prototype.open = () => {
      const request = { error: new DOMException('The user denied permission to access the database.', 'UnknownError') } as unknown as IDBOpenDBRequest;
      setTimeout(() => request.onerror?.(new Event('error')), 0);
      return request;
    };
    const { error, sends } = await callWith();
    expect(sends).toBe(0);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toMatch(/storage unavailable here \(sandboxed or third-party frame, private mode, storage disabled\?\); nothing was sent \(UnknownError: The user denied permission/);
  });

  it('another open failure (not a refusal of storage) gets no such hint', async () => {
    IDBFactory.prototype.open = failingOpen('UnknownError');
    const { error, sends } = await callWith();
    expect(sends).toBe(0);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).not.toMatch(/storage unavailable/);
  });
});
