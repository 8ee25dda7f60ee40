/**
 * client.run: an effect that throws after a 303 See Other (an SDK that throws on any non-2xx, such as
 * axios with maxRedirects: 0) acted ("done, look here") and its value is lost, as after a thrown 2xx:
 * ambiguous, never a success whose "value" is the error's message object, nor a terminal failure.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';

const SPEC = { action: 'charge', ref: 'order-303', payload: { amount: 500 } };
const seeOther = () => Object.assign(new Error('Request failed with status code 303'), { status: 303, headers: { location: '/charges/ch_1' } });

function makeClient() {
  return createClient({
    store: memoryStore(),
    fetch: (async () => {
      throw new Error('client.run must not use fetch');
    }) as typeof globalThis.fetch,
    random: () => 0,
    retry: { budget: false },
  });
}

describe('client.run: an effect error with status 303', () => {
  it('without a lookup: AmbiguousOutcomeError (cause the SDK error), the record ambiguous, and no later call returns the error as a value or runs the effect again', async () => {
    const client = makeClient();
    let runs = 0;
    const thrown = seeOther();
    const first = await client
      .run(SPEC, async () => {
        runs++;
        throw thrown;
      })
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
    expect(first).not.toHaveProperty('value');
    expect((first as { error: unknown }).error).toBeInstanceOf(AmbiguousOutcomeError);
    expect(((first as { error: Error }).error).cause).toBe(thrown);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');
    const second = await client
      .run(SPEC, async () => {
        runs++;
        return { id: 'ch_2' };
      })
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
    expect((second as { error: unknown }).error).toBeInstanceOf(AmbiguousOutcomeError);
    expect(runs).toBe(1);
    await client.close();
  });

  it("with a lookup: the value its lookup finds is returned, the effect run once", async () => {
    const client = makeClient();
    let runs = 0;
    const value = await client.run({ ...SPEC, lookup: async () => ({ value: { id: 'ch_1' } }) }, async () => {
      runs++;
      throw seeOther();
    });
    expect(value).toEqual({ id: 'ch_1' });
    expect(runs).toBe(1);
    const record = await client.get(SPEC);
    expect(record?.state).toBe('succeeded');
    expect(record?.attempts.map((a) => a.class)).toEqual(['ambiguous']);
    await client.close();
  });
});
