/**
 * Every error class the README names is exported from the Node and the browser entry, so that
 * `instanceof` works for users. Regression: LateOutcomeNotKeptError was named in the README
 * ("ends the call with a `StoreError`, `LateOutcomeNotKeptError`") but internal to the engine.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as browserEntry from '../../src/browser.js';
import * as nodeEntry from '../../src/index.js';
import { StoreError } from '../../src/index.js';

describe('error classes named in the README', () => {
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  // other libraries' and the platform's classes the README names (a DOMException's TimeoutError, the SDKs' own, BullMQ's UnrecoverableError, the AI SDK's RetryError and APICallError, Firefox's NetworkError message)
  const foreign = new Set(['TypeError', 'RangeError', 'TimeoutError', 'APIConnectionTimeoutError', 'StripeConnectionError', 'UnrecoverableError', 'RetryError', 'APICallError', 'NetworkError']);
  const named = [...new Set(readme.match(/\b[A-Z][A-Za-z]*Error\b/g) ?? [])].filter((n) => !foreign.has(n));

  it('are exported from the Node and the browser entry, each a OnceError', () => {
    expect(named).toContain('StoreError');
    for (const entry of [nodeEntry, browserEntry] as Record<string, unknown>[]) {
      for (const name of named) {
        expect(typeof entry[name], `${name} exported`).toBe('function');
        const ctor = entry[name] as { prototype: unknown };
        if (ctor !== nodeEntry.OnceError) expect(ctor.prototype, name).toBeInstanceOf(nodeEntry.OnceError);
      }
    }
  });

  it('LateOutcomeNotKeptError is a StoreError and says its name', () => {
    const Late = (nodeEntry as Record<string, unknown>)['LateOutcomeNotKeptError'] as new (message: string) => Error;
    const error = new Late('x');
    expect(error).toBeInstanceOf(StoreError);
    expect(error.name).toBe('LateOutcomeNotKeptError');
  });
});
