/**
 * The page bundled for test/browser/fingerprint-agreement.test.ts: it computes the fingerprint
 * vectors in the browser, where the digest is WebCrypto's and FormData is serialised by the browser.
 */
import { computeFingerprintVectors } from '../helpers/fingerprint-vectors.js';

declare global {
  interface Window {
    computeFingerprintVectors: typeof computeFingerprintVectors;
  }
}

window.computeFingerprintVectors = computeFingerprintVectors;
document.body.dataset['ready'] = 'true';
