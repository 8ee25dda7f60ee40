/**
 * The stored forms of client.run() results under maxStoredBodyBytes (pure): a value is kept whole
 * or not at all; a failed run's message is cut so that its JSON stays valid and within the cap.
 */
import { describe, expect, it } from 'vitest';
import { errorSnapshot, unstoredBytes, valueSnapshot } from '../../src/operation/snapshot.js';

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

describe('valueSnapshot', () => {
  it.each([
    ['ASCII at the cap', JSON.stringify('a'.repeat(14)), 16, true],
    ['ASCII one over', JSON.stringify('a'.repeat(15)), 16, false],
    ['2-byte characters at the cap', JSON.stringify('é'.repeat(7)), 16, true],
    ['3-byte characters one over (11 characters)', JSON.stringify('€'.repeat(5)), 16, false],
    ['a surrogate pair is 4 bytes, at the cap', JSON.stringify('😀'.repeat(3) + 'ab'), 16, true],
    ['a surrogate pair one over', JSON.stringify('😀'.repeat(3) + 'abc'), 16, false],
    ['a cap of 0 keeps no value', 'null', 0, false],
  ])('%s', (_label, json, cap, kept) => {
    const snapshot = valueSnapshot(json, 200, 'attempt', cap);
    expect(snapshot.bodyTruncated).toBe(!kept);
    if (kept) {
      expect(snapshot.body).toBe(json);
      expect(unstoredBytes(snapshot)).toBeUndefined();
    } else {
      expect(() => JSON.parse(snapshot.body)).toThrow(SyntaxError);
      expect(unstoredBytes(snapshot)).toBe(bytes(json));
    }
  });
});

describe('errorSnapshot', () => {
  it.each([
    ['a short message, whole', 'declined', 64],
    ['ASCII, cut', 'x'.repeat(500), 64],
    ['2-byte characters, cut', 'é'.repeat(500), 64],
    ['quotes and backslashes (escaped: 2 bytes each), cut', '"\\'.repeat(200), 64],
    ['control characters (\\u0001: 6 bytes each), cut', '\u0001'.repeat(200), 64],
    ['surrogate pairs, cut between two of them', '😀'.repeat(200), 64],
    ['surrogate pairs, a cap where half a pair would fit', '😀'.repeat(200), 41],
    ['a message exactly at the cap', 'x'.repeat(52), 64],
    ['a message one byte over the cap', 'x'.repeat(53), 64],
    ['a large cap, a larger message', 'ab€'.repeat(100_000), 65_536],
  ])('%s: valid JSON within the cap, the longest prefix that fits', (_label, message, cap) => {
    const snapshot = errorSnapshot(message, 402, cap);
    expect(snapshot).toMatchObject({ kind: 'value', source: 'attempt', status: 402 });
    expect(bytes(snapshot.body)).toBeLessThanOrEqual(cap);
    const stored = (JSON.parse(snapshot.body) as { error: string }).error;
    if (!snapshot.bodyTruncated) {
      expect(stored).toBe(message);
      return;
    }
    expect(stored.endsWith('…')).toBe(true);
    const kept = stored.slice(0, -1);
    expect(message.startsWith(kept)).toBe(true);
    expect(kept).not.toMatch(/[\uD800-\uDBFF]$/); // no half pair
    // one more character (a whole pair) would not have fit
    const next = message.slice(0, kept.length + (/[\uD800-\uDBFF]/.test(message.charAt(kept.length)) ? 2 : 1));
    expect(bytes(JSON.stringify({ error: `${next}…` }))).toBeGreaterThan(cap);
  });

  it('a cap too small for any message keeps an empty body', () => {
    const snapshot = errorSnapshot('declined', 402, 8);
    expect(snapshot).toMatchObject({ body: '', bodyTruncated: true });
  });

  it('a message exactly at the cap is whole; one byte more is cut to 49 characters and the ellipsis (10 + 49 + 3 + 2 bytes)', () => {
    expect(errorSnapshot('x'.repeat(52), 0, 64)).toMatchObject({ body: JSON.stringify({ error: 'x'.repeat(52) }), bodyTruncated: false });
    expect(errorSnapshot('x'.repeat(53), 0, 64)).toMatchObject({ body: JSON.stringify({ error: `${'x'.repeat(49)}…` }), bodyTruncated: true });
  });
});
