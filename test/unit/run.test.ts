/**
 * client.run(spec, effect): the once-only guarantee for any async side effect.
 * Effects are counted as calls of the effect function; delays are zero (random 0).
 */
import { describe, expect, it } from 'vitest';
import {
  AmbiguousOutcomeError,
  IdempotencyConflictError,
  OperationFailedError,
  createClient,
  isOnceError,
  memoryStore,
} from '../../src/index.js';
import type { OnceClientOptions, RunContext } from '../../src/index.js';

const SPEC = { action: 'charge', ref: 'order-17', payload: { amount: 500, currency: 'eur' } };

function makeClient(options: OnceClientOptions = {}) {
  return createClient({
    store: memoryStore(),
    fetch: (async () => {
      throw new Error('client.run must not use fetch');
    }) as typeof globalThis.fetch,
    random: () => 0,
    ...options,
    retry: { budget: false, ...options.retry },
  });
}

/** An effect that plays a script of outcomes and records what it was given. */
function scriptedEffect<T>(steps: Array<{ value: T } | { error: unknown }>) {
  const seen: RunContext[] = [];
  const effect = async (ctx: RunContext): Promise<T> => {
    seen.push(ctx);
    const step = steps.shift();
    if (step === undefined) throw new Error(`unexpected effect call #${seen.length}`);
    if ('error' in step) throw step.error;
    return step.value;
  };
  return { effect, seen };
}

const withStatus = (statusCode: number, message = `provider said ${statusCode}`) => Object.assign(new Error(message), { statusCode });

describe('client.run', () => {
  it('gives the effect the same key on every attempt, numbered from 1, and retries statusCode 503', async () => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ error: withStatus(503) }, { error: withStatus(503) }, { value: { id: 'ch_1' } }]);
    const value = await client.run(SPEC, effect);
    expect(value).toEqual({ id: 'ch_1' });
    expect(seen).toHaveLength(3);
    expect(seen.map((c) => c.attempt)).toEqual([1, 2, 3]);
    const key = seen[0]!.key;
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.every((c) => c.key === key)).toBe(true);
    expect(seen[0]!.signal).toBeInstanceOf(AbortSignal);
    expect(seen[0]!.scope).toEqual({ tenant: 'default', action: 'charge', ref: 'order-17' });
    const record = await client.get(SPEC);
    expect(record?.key).toBe(key);
    expect(record?.attempts.map((a) => a.class)).toEqual(['retryable', 'retryable', 'success']);
  });

  it('a statusCode 400 is thrown as the original error once, and replayed later as OperationFailedError without calling the effect', async () => {
    const client = makeClient();
    const original = withStatus(400, 'amount must be positive');
    const { effect, seen } = scriptedEffect<string>([{ error: original }, { value: 'never' }]);
    await expect(client.run(SPEC, effect)).rejects.toBe(original);
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.state).toBe('failed');
    const err = await client.run(SPEC, effect).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationFailedError);
    expect(isOnceError(err) && err.code).toBe('OPERATION_FAILED');
    expect(err).toMatchObject({ status: 400 });
    expect((err as Error).message).toContain('amount must be positive');
    expect(seen).toHaveLength(1);
  });

  // Regression: a thrown plain object was stored as "[object Object]", and one String() cannot convert
  // (no prototype) made the attempt's bookkeeping throw: a 400 became ambiguous.
  it.each([
    ['plain object with a message', { status: 400, message: 'amount must be positive' }, 'amount must be positive'],
    ['object without a prototype', Object.assign(Object.create(null) as object, { status: 400 }), 'status 400'],
  ])('a thrown %s with statusCode 400 is terminal, and its replay says what it said', async (_label, thrown, said) => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect<string>([{ error: thrown }, { value: 'never' }]);
    await expect(client.run(SPEC, effect)).rejects.toBe(thrown);
    expect((await client.get(SPEC))?.state).toBe('failed');
    const err = await client.run(SPEC, effect).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OperationFailedError);
    expect((err as Error).message).toContain(said);
    expect(seen).toHaveLength(1);
  });

  it('replays a success value from the store on the second call without calling the effect', async () => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: { id: 'ch_1', amount: 500 } }, { value: { id: 'ch_2', amount: 500 } }]);
    const first = await client.run(SPEC, effect);
    const second = await client.run(SPEC, effect);
    expect(second).toEqual({ id: 'ch_1', amount: 500 });
    expect(second).not.toBe(first); // read back from the store, not a shared reference
    expect(seen).toHaveLength(1);
    expect(client.stats().replays).toBe(1);
  });

  it('the live caller gets the value itself; replays get its JSON form', async () => {
    const client = makeClient();
    const at = new Date('2030-01-01T00:00:00Z');
    const { effect } = scriptedEffect([{ value: { id: 'ch_1', at } }]);
    const live = await client.run(SPEC, effect);
    expect(live.at).toBe(at);
    const replayed = await client.run(SPEC, effect);
    expect(replayed).toEqual({ id: 'ch_1', at: '2030-01-01T00:00:00.000Z' });
  });

  // Regression: JSON.stringify gives undefined (not text) for these, and the record write after the
  // effect failed: the caller got a TypeError for an effect that had happened, and the record stayed in flight.
  it.each([
    ['a function', () => 'f'],
    ['a symbol', Symbol('s')],
    ['an object whose toJSON returns undefined', { toJSON: () => undefined }],
    ['a BigInt', 10n],
  ])('an effect that returns %s succeeds once: the live caller gets it, replays get null', async (_label, returned) => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect<unknown>([{ value: returned }, { value: 'again' }]);
    expect(await client.run(SPEC, effect)).toBe(returned);
    expect((await client.get(SPEC))?.state).toBe('succeeded');
    expect(await client.run(SPEC, effect)).toBeNull();
    expect(seen).toHaveLength(1);
  });

  // Regression: an error carrying a 2xx status (an SDK that failed to parse the provider's answer)
  // was a success whose value was `{ error: message }`, returned and replayed as if the effect had said so.
  it('a thrown error with a 2xx status is ambiguous (it took effect; its value is unknown), never a success valued { error }', async () => {
    const client = makeClient();
    const unreadable = withStatus(200, 'Invalid JSON received from the API');
    const { effect, seen } = scriptedEffect<unknown>([{ error: unreadable }, { value: 'again' }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');
    expect(await client.run({ ...SPEC, lookup: async () => ({ value: { id: 'ch_1' } }) }, effect)).toEqual({ id: 'ch_1' });
    expect(seen).toHaveLength(1);
  });

  it('an ambiguous throw with no lookup: AmbiguousOutcomeError whose cause is the thrown value itself, even a non-Error', async () => {
    const client = makeClient();
    const thrown = { code: 'ETIMEDOUT', detail: 'gateway gave up' };
    const { effect, seen } = scriptedEffect<unknown>([{ error: thrown }]);
    const error = await client.run(SPEC, effect).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).cause).toBe(thrown);
    expect(seen).toHaveLength(1);
  });

  it('the same ref with a different payload is an IdempotencyConflictError, and the effect is not called', async () => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: 'ok' }, { value: 'again' }]);
    await client.run(SPEC, effect);
    await expect(client.run({ ...SPEC, payload: { amount: 900, currency: 'eur' } }, effect)).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(seen).toHaveLength(1);
  });

  it('the payload is compared canonically: the same JSON in another key order is the same operation', async () => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: 'ok' }, { value: 'again' }]);
    await client.run(SPEC, effect);
    expect(await client.run({ ...SPEC, payload: { currency: 'eur', amount: 500 } }, effect)).toBe('ok');
    expect(seen).toHaveLength(1);
  });

  it('a lookup { value } settles an ambiguous outcome (ECONNRESET) without calling the effect again', async () => {
    const client = makeClient();
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { effect, seen } = scriptedEffect([{ error: reset }, { value: { id: 'ch_dup' } }]);
    const lookupKeys: string[] = [];
    const value = await client.run(
      {
        ...SPEC,
        lookup: async ({ key }) => {
          lookupKeys.push(key);
          return { value: { id: 'ch_found' } };
        },
      },
      effect,
    );
    expect(value).toEqual({ id: 'ch_found' });
    expect(seen).toHaveLength(1);
    expect(lookupKeys).toEqual([seen[0]!.key]);
    const record = await client.get(SPEC);
    expect(record?.state).toBe('succeeded');
    expect(record?.attempts[0]?.class).toBe('ambiguous');
    expect(record?.result?.source).toBe('lookup');
    // and it is replayed from then on
    expect(await client.run(SPEC, effect)).toEqual({ id: 'ch_found' });
    expect(seen).toHaveLength(1);
  });

  it('a lookup returning null after an ambiguous outcome runs the effect again with the same key', async () => {
    const client = makeClient();
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { effect, seen } = scriptedEffect([{ error: reset }, { value: 'charged' }]);
    const value = await client.run({ ...SPEC, lookup: async () => null }, effect);
    expect(value).toBe('charged');
    expect(seen).toHaveLength(2);
    expect(seen[1]!.key).toBe(seen[0]!.key);
  });

  it('an ambiguous outcome without a lookup is reported, never re-run', async () => {
    const client = makeClient();
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { effect, seen } = scriptedEffect([{ error: reset }, { value: 'charged twice' }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');
  });

  // Regression: recover() once settled a run() operation with the Response of the action's
  // registered lookup, and the next run() replayed that base64 body through JSON.parse: SyntaxError.
  it("recover() leaves a run() operation to its own call's lookup; the registry's Response lookups are for fetch", async () => {
    let registryCalls = 0;
    const registry = async (): Promise<Response> => {
      registryCalls++;
      return new Response('{"id":"ch_from_registry"}', { status: 200 });
    };
    let clock = 1_900_000_000_000;
    const client = makeClient({ lookups: { [SPEC.action]: registry }, now: () => clock });
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { effect, seen } = scriptedEffect<unknown>([{ error: reset }, { value: 'charged twice' }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(registryCalls).toBe(0);

    clock += 60_000; // past the lease
    const report = await client.recover();
    expect(report).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [{ action: SPEC.action, ref: SPEC.ref }], errors: [] });
    expect(registryCalls).toBe(0);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');

    const value = await client.run({ ...SPEC, lookup: async () => ({ value: { id: 'ch_found' } }) }, effect);
    expect(value).toEqual({ id: 'ch_found' });
    expect(await client.run(SPEC, effect)).toEqual({ id: 'ch_found' }); // replayed, as a value
    expect(seen).toHaveLength(1);
    expect(registryCalls).toBe(0);
  });

  // Regressions (adversarial run): a lookup resolving to anything but { value } or null settled the
  // operation as succeeded with value null; a classify returning no class was stored as is.
  it.each<[string, unknown]>([
    ['false', false],
    ['0', 0],
    ['an empty string', ''],
    ['undefined', undefined],
    ['{}', {}],
    ["'absent'", 'absent'],
  ])('a lookup resolving to %s is no answer: the ambiguity stays, nothing is re-run', async (_name, junk) => {
    const client = makeClient();
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { effect, seen } = scriptedEffect<unknown>([{ error: reset }, { value: 'charged twice' }]);
    const error = await client.run({ ...SPEC, lookup: async () => junk as never }, effect).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).message).toMatch(/spec\.lookup must resolve to \{ value \} \(found\) or null \(absent\)/);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');
    expect(seen).toHaveLength(1);
  });

  it('spec.classify returning no class: the TypeError reaches the caller; the attempt stands by its default', async () => {
    const client = makeClient();
    const odd = new Error('odd');
    const { effect, seen } = scriptedEffect<string>([{ error: odd }]);
    const error = await client.run({ ...SPEC, classify: () => 'bogus' as never }, effect).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/spec\.classify returned "bogus"/);
    expect(await client.get(SPEC)).toMatchObject({ state: 'ambiguous', lease: null, attempts: [{ class: 'ambiguous' }] });
    expect(seen).toHaveLength(1);
  });

  it("adopts spec.key as the effect's key", async () => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: 1 }]);
    await client.run({ ...SPEC, key: 'caller-key-9' }, effect);
    expect(seen[0]!.key).toBe('caller-key-9');
    expect((await client.get(SPEC))?.keySource).toBe('caller');
  });

  it("spec.classify can make an unknown error terminal: thrown once, not retried", async () => {
    const client = makeClient();
    const odd = new Error('card declined');
    const { effect, seen } = scriptedEffect<string>([{ error: odd }, { value: 'never' }]);
    await expect(client.run({ ...SPEC, classify: (e) => (e === odd ? 'terminal' : undefined) }, effect)).rejects.toBe(odd);
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.state).toBe('failed');
  });

  it.each([
    ['an empty ref', { action: 'charge', ref: '' }, /spec\.ref/],
    ['an empty action', { action: '', ref: 'r-1' }, /spec\.action/],
    ['a missing ref', { action: 'charge' }, /spec\.ref/],
  ])('rejects %s with a TypeError before running anything', async (_label, spec, name) => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: 'x' }]);
    const err = await client.run(spec as unknown as typeof SPEC, effect).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toMatch(name);
    expect(seen).toHaveLength(0);
    expect(await client.store.list()).toHaveLength(0);
  });

  it.each([
    ['an empty key', ''],
    ['a key that is not a string', 17],
  ])('rejects %s with a TypeError naming spec.key before the store is touched', async (_label, key) => {
    const client = makeClient();
    const { effect, seen } = scriptedEffect([{ value: 'x' }]);
    const err = await client.run({ ...SPEC, key } as unknown as typeof SPEC, effect).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toBe('client.run: spec.key must be a non-empty string (or left out: oncefetch mints one)');
    expect(seen).toHaveLength(0);
    expect(await client.store.list()).toHaveLength(0);
  });

  it('rejects an effect that is not a function with a TypeError', async () => {
    const client = makeClient();
    await expect(client.run(SPEC, 'not a function' as never)).rejects.toThrow(TypeError);
    expect(await client.store.list()).toHaveLength(0);
  });
});
