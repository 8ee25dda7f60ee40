/**
 * `differentPart`: what a conflicting call changed, as far as the record's `request` (method, URL origin
 * and path, a query string only as `?…`) tells; the body is only in the fingerprint.
 */
import { expect, it } from 'vitest';
import { differentPart } from '../../src/engine/acquire.js';

const r = (method: string, url: string) => ({ method, url });
const A = 'https://api.example.com/orders';

it.each<[string, ReturnType<typeof r> | null, ReturnType<typeof r> | null, string]>([
  ['client.run (no request)', null, null, 'a different payload'],
  ['a run record, a fetch call', null, r('POST', A), 'a different payload'],
  ['method', r('POST', A), r('PUT', A), 'a different method'],
  ['method case only (fetch keeps "patch" as given; the fingerprint upper-cases it)', r('patch', A), r('PATCH', `${A}/2`), 'a different URL'],
  ['path', r('POST', A), r('POST', `${A}/2`), 'a different URL'],
  ['origin', r('POST', A), r('POST', 'https://eu.example.com/orders'), 'a different URL'],
  ['method and URL', r('POST', A), r('PUT', `${A}/2`), 'a different method and URL'],
  ['same method and URL, no query: the body', r('POST', A), r('POST', A), 'a different body or Content-Type'],
  ['a query on one side', r('POST', A), r('POST', `${A}?…`), 'a different body, Content-Type or query string'],
  ['a query on both sides', r('POST', `${A}?…`), r('POST', `${A}?…`), 'a different body, Content-Type or query string'],
  ['path differs, queries too: the URL', r('POST', `${A}?…`), r('POST', `${A}/2`), 'a different URL'],
])('%s', (_label, earlier, now, part) => {
  expect(differentPart(earlier, now)).toBe(part);
});
