/**
 * `client.wrap()`: `client.fetch` as another SDK's `fetch`, guarded against the SDK's own
 * retries. A Stainless-generated SDK (openai-node among them) retries a failed call by
 * itself and marks each retry `x-stainless-retry-count: N`. Without an Idempotency-Key
 * oncefetch cannot tie that retry to the call it repeats: sent, it would be a new operation
 * under a new key, a second effect whenever the first call took one. It is refused instead
 * (its cause, when an earlier call of this client with that payload left its outcome unknown, that call's error).
 * Other SDKs retry with no marker (ky with 'post' in `retry.methods`, got): a call with no key
 * nor ref whose payload is that of an earlier such call of this client whose outcome stayed
 * unknown (within `retry.deadlineMs` of its end) is refused the same way, and so is one that holds an element of
 * such a call's JSON-array body (a batch, which a batching client resends regrouped). One that comes while
 * such a call is still running (the SDK timed it out, and its abort is still being recorded, or
 * it never aborted it) waits for that call's end, then is refused if its outcome stayed unknown.
 *
 * @module
 */
import { untilAborted } from '../backoff/sleep.js';
import type { Engine } from './execute.js';
import { onceFetch } from './fetch-operation.js';
import type { OnceRequestInit, UnknownOutcomes } from './fetch-operation.js';

/** payloads remembered per client, the oldest forgotten first */
const MAX_UNKNOWN = 1000;
/** elements of JSON-array bodies (batches) remembered per client, apart: a large batch never pushes out a payload */
const MAX_UNKNOWN_ELEMENTS = 10_000;
const unknownOf = new WeakMap<Engine, UnknownOutcomes>();

/** This client's calls with a minted ref whose outcome stayed unknown, by tenant and fingerprint: when each ended, and its error. */
function unknownOutcomes(engine: Engine): UnknownOutcomes {
  const known = unknownOf.get(engine);
  if (known !== undefined) return known;
  const ended = new Map<string, { at: number; error: unknown }>();
  /** the same for each element of such a call's JSON-array body (a batch), as if sent alone */
  const endedElements = new Map<string, { at: number; error: unknown }>();
  /** payloads of this client's calls with a minted ref still running: each settles once its call has ended */
  const running = new Map<string, Promise<void>>();
  /** the element ids of each running call's body (JSON-array elements), computed only when a call comes meanwhile */
  const runningElements = new Map<string, () => Promise<string[]>>();
  /** Whether the window of a call that ended at `at` has passed: its payload is no longer refused. */
  const passed = (at: number): boolean => engine.opts.now() - at > engine.opts.retry.deadlineMs;
  /** Refuses a call whose payload, or an element of its JSON-array body (a batch), is that of an earlier call whose outcome is unknown. */
  const refuse = async (id: string, method: string, elements: (() => Promise<string[]>) | undefined): Promise<void> => {
    check(id, method);
    if (elements === undefined || ended.size + endedElements.size === 0) return;
    for (const element of await elements()) check(element, method);
  };
  const check = (id: string, method: string): void => {
    const earlier = [ended.get(id), endedElements.get(id)].find((e) => e !== undefined && !passed(e.at));
    if (earlier === undefined) return;
    const { keyHeader } = engine.opts;
    throw new TypeError(
      `client.wrap(): a ${method} without an ${keyHeader} header, with the payload of an earlier call of this client whose outcome is unknown (or an element of it, of a JSON array: a batch) (it may have taken effect): ` +
        "the SDK's own retry (the AI SDK's maxRetries, ky's or got's retry of a POST, say) or a resend by hand. oncefetch cannot tie it to that call, and would send it as a new operation under a new key " +
        "(a second effect if that call took one). Not sent. Turn the SDK's retries off (AI SDK generateText/streamText: maxRetries: 0; ky: no 'post' in retry.methods; oncefetch retries with one key), " +
        `or pass an ${keyHeader} header per call.`,
      { cause: earlier.error },
    );
  };
  /**
   * Forgets the payloads whose window has passed: oldest first (`remember` re-inserts), so it stops at the
   * first still in it. Else each kept its error (a 5xx `Response`, body and all) until the same payload
   * came again or 1,000 newer ones pushed it out: for as long as the process ran.
   */
  const forgetPassed = (): void => {
    for (const map of [ended, endedElements]) {
      for (const [id, { at }] of map) {
        if (!passed(at)) break;
        map.delete(id);
      }
    }
  };
  const made: UnknownOutcomes = {
    async enter(id, method, signal, retryCount, elements) {
      forgetPassed();
      if (retryCount !== undefined) {
        // (its cause, when the earlier call of this payload left its outcome unknown: that call's error)
        const earlier = ended.get(id);
        const unknownBefore = earlier !== undefined && !passed(earlier.at);
        const { keyHeader } = engine.opts;
        throw new TypeError(
          `client.wrap(): the SDK is retrying a ${method} on its own (x-stainless-retry-count: ${retryCount}) without an ${keyHeader} header` +
            (unknownBefore ? ', after a call of the same payload whose outcome is unknown (it may have taken effect; its error is the cause)' : '') +
            '; oncefetch cannot tie it to the call it repeats, and would send it as a new operation under a new key (a second effect if that call took one). ' +
            `Not sent. Set the SDK's maxRetries: 0 (oncefetch retries with one key), or pass an ${keyHeader} header per call.`,
          unknownBefore ? { cause: earlier.error } : undefined,
        );
      }
      await refuse(id, method, elements);
      for (let held = running.get(id); held !== undefined; held = running.get(id)) {
        await (signal === undefined ? held : untilAborted(held, signal));
        await refuse(id, method, elements);
      }
      let done = (): void => undefined;
      running.set(id, new Promise<void>((resolve) => (done = resolve)));
      // The calls already running, this one now among them (so a later one waits for it in turn): each that shares an
      // operation with it, by an element of either's JSON-array body (a batch still out, resent regrouped by an SDK
      // that raced it with a timer), is waited for as the same payload is, then this call refused if its outcome stayed unknown.
      // (each with the promise it holds now: one of the same payload entering later may wait for this call)
      const before = elements === undefined ? [] : [...runningElements].map(([other, theirs]) => [other, theirs, running.get(other)] as const);
      if (elements !== undefined) runningElements.set(id, elements);
      const leave = (): void => {
        running.delete(id);
        runningElements.delete(id);
        done();
      };
      try {
        const mine = before.length === 0 || elements === undefined ? undefined : new Set([id, ...(await elements())]);
        for (const [other, theirs, held] of before) {
          if (mine === undefined || held === undefined || !(mine.has(other) || (await theirs()).some((each) => mine.has(each)))) continue;
          await (signal === undefined ? held : untilAborted(held, signal));
          await refuse(id, method, elements);
        }
      } catch (error) {
        leave();
        throw error;
      }
      return leave;
    },
    remember(id, error, elements = []) {
      forgetPassed();
      const at = engine.opts.now();
      for (const [map, each, max] of [[ended, [id], MAX_UNKNOWN], [endedElements, elements, MAX_UNKNOWN_ELEMENTS]] as const) {
        for (const one of each) {
          map.delete(one);
          map.set(one, { at, error });
          if (map.size > max) map.delete(map.keys().next().value as string);
        }
      }
    },
  };
  unknownOf.set(engine, made);
  return made;
}

/** The fetch `client.wrap()` returns. */
export async function wrappedFetch(engine: Engine, input: string | URL | Request, init?: OnceRequestInit): Promise<Response> {
  const request = input instanceof Request ? input : undefined;
  const headers = new Headers(init?.headers ?? request?.headers);
  const count = headers.get('x-stainless-retry-count');
  const unknown = unknownOutcomes(engine);
  const { keyHeader, onceMethods } = engine.opts;
  const once = init?.once;
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
  const isOnce = once !== false && (once !== undefined || headers.has(keyHeader) || onceMethods.has(method));
  const tied = headers.has(keyHeader) || (typeof once === 'object' && once.ref !== undefined);
  // A Stainless SDK's own retry without a key is refused (by `unknown.enter`, which knows the earlier call's outcome)
  const retrying = count !== null && isOnce && !tied && Number(count) >= 1 ? count : undefined;
  const res = await onceFetch(engine, input, init, unknown, retrying);
  // oncefetch returns a non-2xx only as final (terminal, or settled); the SDK would resend a 409 or a 5xx
  // as a new operation, now refused (or, keyed as stripe-node keys it, replayed after its backoff): tell it
  // not to, so its caller gets the response's own error. stripe-node reads only its own header.
  if (isOnce && !res.ok) {
    res.headers.set('x-should-retry', 'false');
    res.headers.set('stripe-should-retry', 'false');
  }
  return res;
}
