/**
 * A page served from a non-secure origin (http on a LAN address) has no `crypto.randomUUID`
 * and no `crypto.subtle`. Regression (browser trial): `createClient` died with
 * "globalThis.crypto.randomUUID is not a function", which does not say why. It now throws a
 * TypeError naming the secure-context requirement, in both entries and in wrapFetch.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as browser from '../../src/browser.js';
import * as node from '../../src/index.js';

const real = globalThis.crypto;
/** What a page on http://192.168.1.20 has: getRandomValues only. */
const insecure = { getRandomValues: real.getRandomValues.bind(real) };

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('createClient outside a secure context', () => {
  it.each([
    ['browser', browser],
    ['node', node],
  ] as const)('%s entry: a TypeError naming the secure-context requirement and isSecureContext', (_entry, entry) => {
    vi.stubGlobal('crypto', insecure);
    vi.stubGlobal('isSecureContext', false);
    const store = entry.memoryStore();
    expect(() => entry.createClient({ store })).toThrow(TypeError);
    expect(() => entry.createClient({ store })).toThrow(/^createClient: crypto\.randomUUID\(\) and crypto\.subtle \(WebCrypto\) missing; .*secure context \(https, or http on localhost\).*isSecureContext is false/);
    expect(() => entry.wrapFetch(fetch, { store })).toThrow(/^wrapFetch: .*secure context/);
  });

  it('names what is missing: crypto.subtle alone, or no crypto at all (isSecureContext not false: no claim about it)', () => {
    vi.stubGlobal('crypto', { randomUUID: real.randomUUID.bind(real) });
    expect(() => browser.createClient({ store: browser.memoryStore() })).toThrow(/^createClient: crypto\.subtle \(WebCrypto\) missing; .*secure context/);
    vi.stubGlobal('crypto', undefined);
    let message = '';
    try {
      node.createClient({ store: node.memoryStore() });
    } catch (error) {
      message = error instanceof TypeError ? error.message : `not a TypeError: ${String(error)}`;
    }
    expect(message).toMatch(/^createClient: crypto\.randomUUID\(\) and crypto\.subtle \(WebCrypto\) missing; .*secure context/);
    expect(message).not.toMatch(/isSecureContext/);
  });

  it('with crypto whole, createClient works (the check rejects nothing it needs not reject)', () => {
    vi.stubGlobal('isSecureContext', true);
    expect(() => browser.createClient({ store: browser.memoryStore() })).not.toThrow();
  });
});
