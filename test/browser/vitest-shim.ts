/**
 * Just enough of vitest's API (describe / it / hooks / expect) to run
 * `describeStoreContract` inside a real browser page: the test bundle aliases
 * `vitest` to this file. `expect` is vitest's own (`@vitest/expect` on chai),
 * so assertions mean exactly what they mean under vitest.
 */
import { chai, JestAsymmetricMatchers, JestChaiExpect, JestExtend } from '@vitest/expect';

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(JestAsymmetricMatchers);

type Fn = () => unknown;

interface Suite {
  name: string;
  beforeEach: Fn[];
  afterEach: Fn[];
  parent: Suite | undefined;
}

interface Case {
  name: string;
  suite: Suite;
  fn: Fn | undefined;
}

/** The outcome of one case. */
export interface CaseResult {
  name: string;
  status: 'passed' | 'failed' | 'skipped';
  error?: string;
  ms: number;
}

const root: Suite = { name: '', beforeEach: [], afterEach: [], parent: undefined };
let current = root;
const cases: Case[] = [];

export function describe(name: string, body: () => void): void {
  const suite: Suite = { name, beforeEach: [], afterEach: [], parent: current };
  current = suite;
  try {
    body();
  } finally {
    current = suite.parent ?? root;
  }
}

function test(name: string, a?: unknown, b?: unknown): void {
  const fn = (typeof a === 'function' ? a : b) as Fn | undefined;
  cases.push({ name, suite: current, fn });
}
test.skipIf =
  (condition: unknown) =>
  (name: string, a?: unknown, b?: unknown): void => {
    if (condition) cases.push({ name, suite: current, fn: undefined });
    else test(name, a, b);
  };
export const it = test;

export function beforeEach(fn: Fn): void {
  current.beforeEach.push(fn);
}
export function afterEach(fn: Fn): void {
  current.afterEach.push(fn);
}

export const expect = (value: unknown, message?: string): Chai.Assertion => chai.expect(value, message);

function chain(suite: Suite): Suite[] {
  const out: Suite[] = [];
  for (let s: Suite | undefined = suite; s !== undefined && s !== root; s = s.parent) out.unshift(s);
  return out;
}

/** Runs every registered case in order; a failing hook fails its case. */
export async function runRegistered(filter?: (name: string) => boolean): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const c of cases) {
    const suites = chain(c.suite);
    const name = [...suites.map((s) => s.name), c.name].join(' > ');
    if (filter !== undefined && !filter(name)) continue;
    if (c.fn === undefined) {
      results.push({ name, status: 'skipped', ms: 0 });
      continue;
    }
    const started = performance.now();
    let error: unknown;
    try {
      for (const s of suites) for (const hook of s.beforeEach) await hook();
      await c.fn();
    } catch (e) {
      error = e;
    }
    for (const s of [...suites].reverse()) {
      for (const hook of s.afterEach) {
        try {
          await hook();
        } catch (e) {
          error ??= e;
        }
      }
    }
    const ms = Math.round(performance.now() - started);
    results.push(
      error === undefined
        ? { name, status: 'passed', ms }
        : { name, status: 'failed', ms, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) },
    );
  }
  return results;
}
