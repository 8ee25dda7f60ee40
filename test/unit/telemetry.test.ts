/**
 * The OpenTelemetry bridge against the real `@opentelemetry/api`, with a tiny
 * in-memory tracer provider and an AsyncLocalStorage context manager written
 * here against the API's interfaces.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import type { Context, ContextManager, Span, SpanContext, SpanOptions, Tracer, TracerProvider } from '@opentelemetry/api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';
import { createTelemetry } from '../../src/telemetry.js';

interface RecordedSpan {
  name: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  status: { code: number; message?: string | undefined };
  ended: boolean;
}

/** Records every span it starts. */
class MemoryTracerProvider implements TracerProvider {
  readonly spans: RecordedSpan[] = [];
  private next = 1;

  getTracer(): Tracer {
    const startSpan = (name: string, options: SpanOptions = {}, ctx: Context = context.active()): Span => {
      const parent = trace.getSpanContext(ctx);
      const rec: RecordedSpan = {
        name,
        spanId: (this.next++).toString(16).padStart(16, '0'),
        parentSpanId: parent?.spanId,
        attributes: { ...options.attributes },
        events: [],
        status: { code: 0 },
        ended: false,
      };
      this.spans.push(rec);
      const spanContext: SpanContext = { traceId: 'a'.repeat(32), spanId: rec.spanId, traceFlags: 1 };
      const span: Span = {
        spanContext: () => spanContext,
        setAttribute: (k, v) => ((rec.attributes[k] = v), span),
        setAttributes: (a) => (Object.assign(rec.attributes, a), span),
        addEvent: (n, a) => (rec.events.push({ name: n, attributes: { ...(a as Record<string, unknown>) } }), span),
        addLink: () => span,
        addLinks: () => span,
        setStatus: (s) => ((rec.status = s), span),
        updateName: (n) => ((rec.name = n), span),
        end: () => void (rec.ended = true),
        isRecording: () => !rec.ended,
        recordException: (e) => void rec.events.push({ name: 'exception', attributes: { message: typeof e === 'string' ? e : e.message } }),
      };
      return span;
    };
    return {
      startSpan,
      startActiveSpan: (() => {
        throw new Error('not used');
      }) as Tracer['startActiveSpan'],
    };
  }
}

/** Propagates the active context across awaits, like the SDK's AsyncLocalStorageContextManager. */
class AlsContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.als.disable();
    return this;
  }
}

const order = (ref: string) => ({ action: 'create-order', ref, payload: { sku: 'A-17' } });

describe('OpenTelemetry bridge', () => {
  let provider: MemoryTracerProvider;
  beforeEach(() => {
    provider = new MemoryTracerProvider();
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AlsContextManager());
  });
  afterEach(() => {
    trace.disable();
    context.disable();
  });

  const client = (options: OnceClientOptions = {}) =>
    createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 2 }, providerDedupes: true, ...options });

  it('records a span per call, with an event per OnceEvent and no key anywhere', async () => {
    const c = client();
    let calls = 0;
    let key = '';
    const value = await c.run(order('A-17'), async (ctx) => {
      key = ctx.key;
      if (++calls === 1) throw Object.assign(new Error('upstream 502'), { status: 502 });
      return { id: 'ord_1' };
    });
    expect(value).toEqual({ id: 'ord_1' });
    expect(provider.spans).toHaveLength(1);
    const [span] = provider.spans;
    expect(span).toMatchObject({
      name: 'oncefetch create-order',
      ended: true,
      attributes: {
        'oncefetch.tenant': 'default',
        'oncefetch.action': 'create-order',
        'oncefetch.ref': 'A-17',
        'oncefetch.state': 'succeeded',
        'oncefetch.replayed': false,
        'oncefetch.attempts': 2,
      },
    });
    expect(span?.events.map((e) => e.name)).toEqual([
      'oncefetch.operation_created',
      'oncefetch.attempt_started',
      'oncefetch.attempt_finished',
      'oncefetch.retry_scheduled',
      'oncefetch.lookup',
      'oncefetch.attempt_started',
      'oncefetch.attempt_finished',
    ]);
    expect(span?.events[2]?.attributes).toMatchObject({ 'oncefetch.attempt': 1, 'oncefetch.class': 'ambiguous', 'oncefetch.status': 502 });
    expect(JSON.stringify(provider.spans)).not.toContain(key);
    await c.close();
  });

  it('a replay is its own span, marked replayed, with a replay event', async () => {
    const c = client();
    await c.run(order('A-18'), async () => 'done');
    await c.run(order('A-18'), async () => 'again');
    expect(provider.spans).toHaveLength(2);
    expect(provider.spans[1]?.attributes).toMatchObject({ 'oncefetch.replayed': true, 'oncefetch.state': 'succeeded', 'oncefetch.attempts': 0 });
    expect(provider.spans[1]?.events.map((e) => e.name)).toEqual(['oncefetch.replay']);
    await c.close();
  });

  it('a joined concurrent call gets its own span with its replay; the executing one keeps the attempts', async () => {
    const c = client();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = c.run(order('A-19'), async () => (await gate, 'one'));
    const second = c.run(order('A-19'), async () => 'two');
    await new Promise((r) => setTimeout(r, 20));
    release();
    expect(await Promise.all([first, second])).toEqual(['one', 'one']);
    const [executing, joined] = provider.spans;
    expect(executing?.events.map((e) => e.name)).toEqual(['oncefetch.operation_created', 'oncefetch.attempt_started', 'oncefetch.attempt_finished']);
    expect(joined?.events.map((e) => e.name)).toEqual(['oncefetch.replay']);
    expect(joined?.attributes['oncefetch.replayed']).toBe(true);
    await c.close();
  });

  it('a failed call sets the error status, its code and the state the code implies', async () => {
    const c = client({ providerDedupes: false });
    await expect(c.run(order('A-20'), async () => Promise.reject(Object.assign(new Error('gateway'), { status: 504 })))).rejects.toBeInstanceOf(
      AmbiguousOutcomeError,
    );
    expect(provider.spans[0]).toMatchObject({
      status: { code: 2 },
      attributes: { 'oncefetch.error.code': 'AMBIGUOUS_OUTCOME', 'oncefetch.state': 'ambiguous', 'oncefetch.attempts': 1 },
    });
    expect(provider.spans[0]?.events.at(-1)?.name).toBe('exception');
    await c.close();
  });

  it.each(['code', 'message'])("a caller's abort reason whose %s getter throws: the call still rejects with it, its span gets the error status", async (key) => {
    const c = client();
    const reason = Object.defineProperty(new Error('stop'), key, {
      get: (): never => {
        throw new Error('hostile getter');
      },
    });
    await expect(c.run({ ...order('A-21'), signal: AbortSignal.abort(reason) }, async () => 'never')).rejects.toBe(reason);
    expect(provider.spans[0]?.status.code).toBe(2);
    expect(provider.spans[0]?.ended).toBe(true);
    await c.close();
  });

  it("a caller's abort reason whose code is 'constructor' (or 'toString') names no state", async () => {
    const c = client();
    for (const code of ['constructor', 'toString']) {
      const reason = Object.assign(new Error('stop'), { code });
      await expect(c.run({ ...order(`A-${code}`), signal: AbortSignal.abort(reason) }, async () => 'never')).rejects.toBe(reason);
    }
    expect(provider.spans.map((span) => span.attributes['oncefetch.error.code'])).toEqual(['constructor', 'toString']);
    for (const span of provider.spans) expect(span.attributes).not.toHaveProperty('oncefetch.state');
    await c.close();
  });

  it('the call runs inside its span: the transport’s spans nest under it', async () => {
    let parentOfTransport: string | undefined;
    const c = client({
      fetch: async () => {
        const s = trace.getTracer('http').startSpan('POST');
        parentOfTransport = provider.spans.find((r) => r.spanId === s.spanContext().spanId)?.parentSpanId;
        s.end();
        return new Response('{"id":1}', { status: 201, headers: { 'content-type': 'application/json' } });
      },
    });
    const res = await c.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-21' } });
    expect(res.status).toBe(201);
    const ours = provider.spans.find((s) => s.name === 'oncefetch create-order');
    expect(parentOfTransport).toBe(ours?.spanId);
    await c.close();
  });

  it('telemetry: false records nothing', async () => {
    const c = client({ telemetry: false });
    await c.run(order('A-22'), async () => 1);
    expect(provider.spans).toEqual([]);
    await c.close();
  });

  it('events outside a call (recover) become a span of their own', () => {
    const t = createTelemetry(async () => import('@opentelemetry/api'));
    return t.trace({ tenant: 't', action: 'warm', ref: 'up' }, async () => ({ record: { state: 'succeeded' as const }, replayed: false })).then(() => {
      t.event({ type: 'lookup', scope: { tenant: 't', action: 'create-order', ref: 'A-23' }, at: 0, outcome: 'found' });
      const span = provider.spans.at(-1);
      expect(span).toMatchObject({ name: 'oncefetch create-order', ended: true, attributes: { 'oncefetch.ref': 'A-23' } });
      expect(span?.events).toEqual([{ name: 'oncefetch.lookup', attributes: { 'oncefetch.outcome': 'found' } }]);
    });
  });
});

describe('OpenTelemetry bridge without a tracer provider or without the API', () => {
  it('no provider registered: calls work, nothing throws', async () => {
    const c = createClient({ store: memoryStore() });
    await expect(c.run(order('B-1'), async () => 'ok')).resolves.toBe('ok');
    await c.close();
  });

  it('API not installed: the import fails once, calls and events go on untraced', async () => {
    let imports = 0;
    const t = createTelemetry(() => {
      imports++;
      return Promise.reject(Object.assign(new Error("Cannot find package '@opentelemetry/api'"), { code: 'ERR_MODULE_NOT_FOUND' }));
    });
    const scope = { tenant: 't', action: 'a', ref: 'r' };
    const result = { record: { state: 'succeeded' as const }, replayed: false };
    await expect(t.trace(scope, async () => result)).resolves.toBe(result);
    await expect(t.trace(scope, async () => result)).resolves.toBe(result);
    expect(() => t.event({ type: 'operation_created', scope, at: 0 })).not.toThrow();
    expect(imports).toBe(1);
  });

  it('a broken tracer does not change the outcome', async () => {
    const broken = { trace: { getTracer: () => ({ startSpan: () => { throw new Error('boom'); } }), setSpan: () => ({}) }, context: { active: () => ({}), with: (_c: unknown, fn: () => unknown) => fn() }, SpanStatusCode: { ERROR: 2 } };
    const t = createTelemetry(async () => broken);
    const scope = { tenant: 't', action: 'a', ref: 'r' };
    const result = { record: { state: 'succeeded' as const }, replayed: false };
    await expect(t.trace(scope, async () => result)).resolves.toBe(result);
    expect(() => t.event({ type: 'operation_created', scope, at: 0 })).not.toThrow();
  });
});

describe('OpenTelemetry bridge with a broken context manager', () => {
  const throwsBefore = (): never => {
    throw new Error('context manager broke');
  };
  const throwsAfter = (_c: unknown, fn: () => unknown): never => {
    void fn();
    throw new Error('context manager broke on the way out');
  };
  it.each([
    ['before running the call', throwsBefore],
    ['after running the call', throwsAfter],
  ])('a context.with() that throws %s neither fails the call nor runs it twice', async (_when, withFn) => {
    const span = { setAttribute: () => span, addEvent: () => span, setStatus: () => span, recordException: () => undefined, isRecording: () => true, end: () => undefined };
    const broken = {
      trace: { getTracer: () => ({ startSpan: () => span }), setSpan: () => ({}) },
      context: { active: () => ({}), with: withFn },
      SpanStatusCode: { ERROR: 2 },
    };
    const t = createTelemetry(async () => broken);
    let effects = 0;
    const scope = { tenant: 't', action: 'a', ref: 'r' };
    const result = { record: { state: 'succeeded' as const }, replayed: false };
    await expect(t.trace(scope, async () => (effects++, result))).resolves.toBe(result);
    expect(effects).toBe(1);
  });
});
