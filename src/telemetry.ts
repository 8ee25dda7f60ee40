/**
 * The OpenTelemetry bridge. When `@opentelemetry/api` can be imported, every
 * operation call becomes a span `oncefetch <action>` (attributes: tenant,
 * action, ref, state, never the key but as a ref minted or adopted from a key
 * header) with one span event per {@link OnceEvent};
 * the call runs inside that span's context, so instrumented transports nest
 * their HTTP spans under it. When the API is absent, nothing happens: one
 * failed import per client, no error.
 *
 * Node entry only (`PlatformDefaults.telemetry`): a browser resolves the API
 * by name only through an import map, so the browser entry does not ship this.
 *
 * The API is typed structurally here, not imported: oncefetch's published
 * types must not depend on an optional peer.
 *
 * @module
 */
import type { OnceEvent } from './events.js';
import type { OperationState, Scope } from './operation/record.js';
import { recordId } from './operation/record.js';

type AttributeValue = string | number | boolean;
type Attributes = Record<string, AttributeValue>;

/** The part of a span oncefetch uses. */
interface OtelSpan {
  setAttribute(key: string, value: AttributeValue): unknown;
  addEvent(name: string, attributes?: Attributes): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: Error): void;
  isRecording(): boolean;
  end(): void;
}

/** The part of `@opentelemetry/api` oncefetch uses. */
interface OtelApi {
  trace: {
    getTracer(name: string, version?: string): { startSpan(name: string, options: { attributes: Attributes }, context: unknown): OtelSpan };
    setSpan(context: unknown, span: OtelSpan): unknown;
  };
  context: {
    active(): unknown;
    with<T>(context: unknown, fn: () => T): T;
  };
  SpanStatusCode: { ERROR: number };
}

/** What a traced call resolves to (the engine's `ExecuteResult`). */
interface TracedResult {
  record: { state: OperationState };
  replayed: boolean;
}

interface OpenCall {
  scope: Scope;
  span: OtelSpan;
  attempts: number;
}

/** Per-client tracing: a span around each call, span events from the event stream. */
export interface Telemetry {
  /** Runs one operation call inside its span (waits for the API to load on a client's first calls). */
  trace<T extends TracedResult>(scope: Scope, run: () => Promise<T>): Promise<T>;
  /** Adds an event to the span of the call it belongs to. Never throws. */
  event(event: OnceEvent): void;
}

const SPECIFIER = '@opentelemetry/api';
const TRACER = 'oncefetch';

/** Error codes that tell the record's state when a call throws. */
const STATE_BY_CODE: Readonly<Record<string, OperationState>> = {
  AMBIGUOUS_OUTCOME: 'ambiguous',
  OPERATION_CANCELLED: 'cancelled',
  OPERATION_FAILED: 'failed',
};

/** Imports the API if the application has it; a variable specifier keeps bundlers from requiring it. */
function importApi(): Promise<unknown> {
  const specifier = SPECIFIER;
  return import(/* webpackIgnore: true */ /* @vite-ignore */ specifier);
}

function isApi(mod: unknown): mod is OtelApi {
  const m = mod as Partial<OtelApi> | null;
  return typeof m?.trace?.getTracer === 'function' && typeof m.context?.with === 'function';
}

/**
 * Starts loading the API once for this client. `load` is for tests.
 *
 * @internal
 */
export function createTelemetry(load: () => Promise<unknown> = importApi): Telemetry {
  let api: OtelApi | null | undefined;
  const loading = load().then(
    (mod) => {
      const m = (mod as { default?: unknown } | null)?.default ?? mod;
      api = isApi(mod) ? mod : isApi(m) ? m : null;
    },
    () => {
      api = null;
    },
  );
  const open = new Map<string, OpenCall[]>();

  /**
   * The call an event belongs to: the one whose scope object the event carries (a joined
   * call's replay or conflict), else the oldest open call with that id (the one executing).
   */
  const callOf = (event: OnceEvent): OpenCall | undefined => {
    const calls = open.get(recordId(event.scope));
    return calls?.find((c) => c.scope === event.scope) ?? calls?.[0];
  };

  const event = (e: OnceEvent): void => {
    if (api == null) return;
    try {
      const call = callOf(e);
      if (call !== undefined) {
        if (e.type === 'attempt_started') call.attempts++;
        if (call.span.isRecording()) call.span.addEvent(`oncefetch.${e.type}`, eventAttributes(e));
        return;
      }
      // Outside any call (recover()): a span of its own.
      const span = api.trace.getTracer(TRACER).startSpan(`oncefetch ${e.scope.action}`, { attributes: scopeAttributes(e.scope) }, api.context.active());
      span.addEvent(`oncefetch.${e.type}`, eventAttributes(e));
      span.end();
    } catch {
      // tracing must never change an operation's outcome
    }
  };

  const trace = async <T extends TracedResult>(scope: Scope, run: () => Promise<T>): Promise<T> => {
    if (api === undefined) await loading;
    const otel = api;
    if (otel == null) return run();
    let span: OtelSpan;
    let context: unknown;
    try {
      const parent = otel.context.active();
      span = otel.trace.getTracer(TRACER).startSpan(`oncefetch ${scope.action}`, { attributes: scopeAttributes(scope) }, parent);
      context = otel.trace.setSpan(parent, span);
    } catch {
      return run(); // a broken tracer provider must not stop the call
    }
    const call: OpenCall = { scope, span, attempts: 0 };
    const id = recordId(scope);
    open.set(id, [...(open.get(id) ?? []), call]);
    try {
      // The call runs exactly once, in its span's context if the context manager lets it: one that
      // throws (before or after starting the call) must neither fail it nor run it a second time.
      let running: Promise<T> | undefined;
      safely(() => void otel.context.with(context, () => (running = run())));
      const result = await (running ?? run());
      safely(() => {
        span.setAttribute('oncefetch.state', result.record.state);
        span.setAttribute('oncefetch.replayed', result.replayed);
      });
      return result;
    } catch (error) {
      safely(() => failed(otel, span, error));
      throw error;
    } finally {
      const rest = (open.get(id) ?? []).filter((c) => c !== call);
      if (rest.length === 0) open.delete(id);
      else open.set(id, rest);
      safely(() => {
        span.setAttribute('oncefetch.attempts', call.attempts);
        span.end();
      });
    }
  };

  return { trace, event };
}

/**
 * Marks a span failed with the error's code and, when the code tells it, the record's state. The
 * status is set first, alone: reading the error (a caller's, rethrown as thrown) may throw.
 */
function failed(otel: OtelApi, span: OtelSpan, error: unknown): void {
  span.setStatus({ code: otel.SpanStatusCode.ERROR });
  safely(() => {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string') {
      span.setAttribute('oncefetch.error.code', code);
      const state = Object.hasOwn(STATE_BY_CODE, code) ? STATE_BY_CODE[code] : undefined; // a caller's code may be 'constructor'
      if (state !== undefined) span.setAttribute('oncefetch.state', state);
    }
  });
  safely(() => span.setStatus({ code: otel.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) }));
  safely(() => {
    if (error instanceof Error) span.recordException(error);
  });
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // tracing must never change an operation's outcome
  }
}

function scopeAttributes(scope: Scope): Attributes {
  return { 'oncefetch.tenant': scope.tenant, 'oncefetch.action': scope.action, 'oncefetch.ref': scope.ref };
}

/** An event's own fields as span-event attributes (`scope` and `at` are the span's already). */
function eventAttributes(event: OnceEvent): Attributes {
  const attributes: Attributes = {};
  for (const [name, value] of Object.entries(event)) {
    if (name === 'type' || name === 'scope' || name === 'at') continue;
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') attributes[`oncefetch.${name}`] = value;
  }
  return attributes;
}
