/**
 * Fingerprints do not move: a record is matched by its fingerprint alone, so a changed vector is an
 * operation that conflicts when resumed after an upgrade. test/browser/fingerprint-agreement.test.ts
 * holds Chromium (WebCrypto) to the same values.
 */
import { describe, expect, it } from 'vitest';
import { FINGERPRINT_VECTORS } from '../helpers/fingerprint-vectors.js';

describe('fingerprint vectors', () => {
  it.each(FINGERPRINT_VECTORS.map(([name, compute, expected]) => ({ name, compute, expected })))('$name', async ({ compute, expected }) => {
    expect(await compute()).toBe(expected);
    expect(await compute()).toBe(expected); // a FormData serialised again, under a new boundary
  });
});
