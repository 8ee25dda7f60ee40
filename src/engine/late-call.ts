/**
 * Calls still out after their attempt ended. A call that ignores its abort signal (a custom `fetch`
 * that drops it, an SDK that takes none: stripe-node) goes on after the attempt timeout, the deadline
 * or the caller's abort ended its attempt: its request may leave, or commit, after the attempt
 * "ended" and after a lookup's "absent". In this process that is known: the next attempt of the
 * operation (in this call, or a later call of it in this client) takes that call's outcome instead of
 * calling again. Shared by `client.run` (its effect) and `client.fetch` (its transport).
 *
 * @module
 */
import type { Scope } from '../operation/record.js';
import { recordId } from '../operation/record.js';
import type { AttemptContext, Engine } from './execute.js';

/** How a call settled; `at`: the engine's clock then. */
export type Settled<T> = ({ value: T } | { error: unknown }) & { at: number };

/** A call kept for a later attempt: `at`, when it settled (Infinity while out). */
interface Kept {
  /** its record id: its operation may still run in this client */
  id: string;
  call: Promise<Settled<unknown>>;
  at: number;
  /** frees what its value holds once nobody will take it (a Response's body) */
  discard: ((value: never) => void) | undefined;
  /** the abort reason of the attempt that gave it up: a call that rejects with exactly it honoured its signal */
  reason: unknown;
  /** the attempts (numbers) whose call it is: the one that started it, then those that only waited for it */
  attempts: () => number[];
}

/**
 * By engine, then by record id, key and fingerprint (of the payload or request: a new operation of
 * the scope after a purge, a new key or the caller's key reused for another payload, is not the one
 * still out). Fingerprints of `run` payloads and of requests never coincide (see fingerprint.ts).
 */
const unsettled = new WeakMap<Engine, Map<string, Kept>>();

/** The attempts' calls of one operation (see {@link lateCalls}). */
export interface LateCalls {
  /**
   * One attempt's call: an earlier attempt's still out, if any (then marked `late`), else `start()`'s (a
   * synchronous throw is its outcome too). Call it before the send's first await. If the engine gives
   * the attempt up before it settles (`ctx.abandoned`), the engine never sees its outcome: it is kept
   * for the next attempt, unless it throws within the
   * abort's turn of the event loop, or throws that attempt's abort reason itself, however late (it
   * honoured its signal, as fetch does: it ended with the attempt, whose end the engine's settle
   * window counts from, and waiting for it would only spend the next attempt; a next attempt already
   * waiting for it then sends).
   */
  call<T>(ctx: AttemptContext, start: () => Promise<T>): Promise<Settled<T> & { late?: true; answers?: number[] }>;
  /** The operation ended with `key`: nothing is sent for it again, so no earlier call of it is waited for. */
  ended(key: string): void;
}

/**
 * The calls of the operation of `scope` and `fingerprint` in `engine`'s client. `discard` frees what a
 * kept call's value holds once it is let go untaken (a Response's body: its connection).
 */
export function lateCalls<V>(engine: Engine, scope: Scope, fingerprint: string, discard?: (value: V) => void): LateCalls {
  let outstanding = unsettled.get(engine);
  if (outstanding === undefined) unsettled.set(engine, (outstanding = new Map()));
  const out = outstanding;
  const { now, settleMs } = engine.opts;
  // Let go of an outcome that settled over settleMs ago while its operation runs nowhere in this client: a lookup asked
  // from now on sees what it did, as after any attempt (else every operation that ended with one out would keep it).
  if (out.size > 0) for (const [slot, kept] of out) if (kept.at + settleMs < now() && !engine.running(kept.id)) letGo(out, slot, kept);
  let id: string | undefined;
  const slotOf = (key: string): string => `${(id ??= recordId(scope))}\n${key}\n${fingerprint}`;
  return {
    call<T>(ctx: AttemptContext, start: () => Promise<T>): Promise<Settled<T> & { late?: true; answers?: number[] }> {
      const found = out.size === 0 ? undefined : out.get(slotOf(ctx.key));
      if (found !== undefined) out.delete(slotOf(ctx.key));
      let late = found !== undefined;
      // the attempts whose call this is (this one last): a late outcome answers the first one's request
      let chain = found === undefined ? [ctx.attempt] : [...found.attempts(), ctx.attempt];
      // An earlier call that rejects with its own attempt's abort reason honoured its signal (as fetch, undici's
      // request and the default transport do, however late their rejection comes: one cut while reading a body, or
      // queued for a connection, rejects when undici gets to it): nothing of it is still out, so this attempt sends.
      const call: Promise<Settled<T>> =
        found === undefined
          ? settle(start, now)
          : (found.call as Promise<Settled<T>>).then((s) => {
              if (!('error' in s) || s.error !== found.reason) return s;
              late = false;
              chain = [ctx.attempt];
              // (given up meanwhile itself: nothing is started for an attempt that has ended)
              return ctx.signal.aborted ? { error: ctx.signal.reason, at: now() } : settle(start, now);
            });
      let done = false;
      let kept = false;
      const keep = (): void => {
        if (done) return;
        kept = true;
        const slot = slotOf(ctx.key);
        const reason: unknown = ctx.signal.reason;
        const entry: Kept = { id: (id ??= recordId(scope)), call, at: Infinity, discard, reason, attempts: () => chain };
        out.set(slot, entry);
        // (a turn, not a clock reading: a rejection by the abort's time may be read a millisecond later)
        let aborting = true;
        setTimeout(() => (aborting = false), 0);
        void call.then((s) => {
          entry.at = s.at;
          if ('error' in s && (aborting || s.error === reason) && out.get(slot) === entry) out.delete(slot);
        });
      };
      // (the engine's own abort listener calls it: no listener of ours, ~3 µs an attempt)
      ctx.abandoned = keep;
      return call.then((settled) => {
        done = true;
        // Its attempt ended before it: the engine has moved on, and the outcome is the next attempt's to read
        // (a Response's body reads once; the caller's classify is not asked twice).
        if (kept) throw ctx.signal.reason;
        return late ? { ...settled, late: true, answers: chain.slice(0, -1) } : settled;
      });
    },
    ended: (key) => {
      const kept = out.size === 0 ? undefined : out.get(slotOf(key));
      if (kept !== undefined) letGo(out, slotOf(key), kept);
    },
  };
}

/** Drops `kept`, untaken: its value, once it has one, is discarded. */
function letGo(out: Map<string, Kept>, slot: string, kept: Kept): void {
  out.delete(slot);
  const discard = kept.discard as ((value: unknown) => void) | undefined;
  // (a discard that throws frees nothing more: never an unhandled rejection)
  if (discard !== undefined) kept.call.then((s) => 'value' in s && discard(s.value)).catch(() => undefined);
}

function settle<T>(start: () => Promise<T>, now: () => number): Promise<Settled<T>> {
  let started: Promise<T>;
  try {
    started = Promise.resolve(start());
  } catch (error) {
    started = Promise.reject(error);
  }
  return started.then(
    (value): Settled<T> => ({ value, at: now() }),
    (error: unknown): Settled<T> => ({ error, at: now() }),
  );
}
