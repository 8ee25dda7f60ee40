/**
 * The provider's business state: orders (the effects being counted) and the
 * idempotency-key table of the IETF httpapi Idempotency-Key draft. Synchronous
 * on purpose: a key is checked and marked in-progress with no await in between.
 *
 * @module
 */

/**
 * An order created by the provider: one business effect. Count these, not
 * HTTP successes, to prove "at most once".
 *
 * @example
 * ```ts
 * const orders: readonly Order[] = provider.orders
 * expect(orders.filter((o) => o.ref === 'A-17')).toHaveLength(1)
 * ```
 */
export interface Order {
  /** `ord_<n>`, 1-based, in commit order. */
  readonly id: string;
  /** The `ref` field of the request body, when it was a string. */
  readonly ref: string | undefined;
  /** The idempotency key the order was created under, if any. */
  readonly key: string | undefined;
  /** The parsed JSON request body. */
  readonly body: unknown;
  /** Commit time, epoch ms. */
  readonly createdAt: number;
}

/** A response stored under a key, replayed byte for byte. */
export interface StoredResponse {
  readonly status: number;
  readonly bodyText: string;
}

type KeyEntry =
  | { state: 'processing'; fingerprint: string }
  | { state: 'completed'; fingerprint: string; response: StoredResponse };

/** What to do with a keyed request. */
export type KeyDecision =
  | { kind: 'execute' }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'in_progress' }
  | { kind: 'mismatch' };

export class Ledger {
  readonly #orders: Order[] = [];
  readonly #keys = new Map<string, KeyEntry>();

  get orders(): readonly Order[] {
    return this.#orders;
  }

  /**
   * Checks a key and, when it is new, marks it in-progress in the same tick.
   * A different fingerprint wins over "in progress": reusing a key for other
   * content is a caller defect whatever the state of the first request.
   */
  begin(key: string, fingerprint: string): KeyDecision {
    const entry = this.#keys.get(key);
    if (entry === undefined) {
      this.#keys.set(key, { state: 'processing', fingerprint });
      return { kind: 'execute' };
    }
    if (entry.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (entry.state === 'processing') return { kind: 'in_progress' };
    return { kind: 'replay', response: entry.response };
  }

  /**
   * Creates the order (the business effect) and, when `storeUnderKey`, stores its
   * 201 response under the key so that later requests replay it.
   */
  commit(input: { ref: string | undefined; key: string | undefined; body: unknown }, storeUnderKey: boolean): {
    order: Order;
    response: StoredResponse;
  } {
    const order: Order = Object.freeze({
      id: `ord_${this.#orders.length + 1}`,
      ref: input.ref,
      key: input.key,
      body: input.body,
      createdAt: Date.now(),
    });
    this.#orders.push(order);
    const response: StoredResponse = { status: 201, bodyText: JSON.stringify(order) };
    const entry = input.key === undefined ? undefined : this.#keys.get(input.key);
    if (storeUnderKey && input.key !== undefined && entry !== undefined) {
      this.#keys.set(input.key, { state: 'completed', fingerprint: entry.fingerprint, response });
    }
    return { order, response };
  }

  /** Forgets one key, as a server that stores only some responses does. */
  release(key: string): void {
    this.#keys.delete(key);
  }

  /**
   * What a server restart does to the key table: keys still `processing` belonged
   * to requests that died with the process and are dropped; completed keys are
   * dropped too when `forgetCompleted` (a key table kept in memory). Orders stay.
   */
  restart(forgetCompleted: boolean): void {
    for (const [key, entry] of this.#keys) {
      if (forgetCompleted || entry.state === 'processing') this.#keys.delete(key);
    }
  }

  /** The first order matching every given criterion. */
  find(by: { id?: string; ref?: string; key?: string }): Order | undefined {
    return this.#orders.find(
      (o) =>
        (by.id === undefined || o.id === by.id) &&
        (by.ref === undefined || o.ref === by.ref) &&
        (by.key === undefined || o.key === by.key),
    );
  }

  effectsFor(ref: string): number {
    let n = 0;
    for (const o of this.#orders) if (o.ref === ref) n++;
    return n;
  }
}
