/**
 * A loopback fake of OpenAI's `POST /v1/chat/completions`, enough for openai-node.
 * Each completion created is one business effect (it costs tokens). It honours
 * `Idempotency-Key` (same key and body: the stored completion is replayed with
 * `Idempotent-Replayed: true`; another body: 400 idempotency error), lists
 * stored completions by metadata like the real API (`GET /v1/chat/completions?metadata[ref]=…`,
 * the lookup) and injects scripted faults after the commit point: the completion
 * is created, the client never learns it. A request with `stream: true` is answered
 * with server-sent events (the effect commits before the first chunk); `holdStreams()`
 * pauses every stream after its first chunk until released.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What happens to the next `POST /v1/chat/completions`: after it commits (a dropped
 * connection, a 500, a stream cut after its first chunk), or before (a 429 or 503 with
 * `Retry-After: 0`; a 409 lock timeout, which openai-node retries; nothing is created).
 */
export type OpenAIFault = 'drop_after_commit' | 'error_after_commit' | 'drop_mid_stream' | 'rate_limited' | 'unavailable' | 'lock_timeout';

/** One `POST /v1/chat/completions` as received. */
export interface ReceivedRequest {
  /** the `Idempotency-Key` header, if any */
  key: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A running fake. */
export interface FakeOpenAI {
  /** base URL for openai-node's `baseURL`: `http://127.0.0.1:PORT/v1` */
  readonly baseURL: string;
  /** `http://127.0.0.1:PORT` */
  readonly origin: string;
  /** completions created: the business effects */
  readonly effects: number;
  /** every POST received, faulted or not */
  readonly requests: readonly ReceivedRequest[];
  /** lookups served */
  readonly lookups: number;
  /** queues faults for the next POSTs, in order */
  fault(...faults: OpenAIFault[]): void;
  /** pauses streams after their first chunk until the returned function is called */
  holdStreams(): () => void;
  close(): Promise<void>;
}

interface Stored {
  body: string;
  completion: string;
}

interface Created {
  metadata: Record<string, string>;
  completion: unknown;
}

/** Starts the fake on 127.0.0.1; `dedupe: false` ignores `Idempotency-Key` (every POST creates). */
export async function startFakeOpenAI(options: { dedupe?: boolean } = {}): Promise<FakeOpenAI> {
  const dedupe = options.dedupe ?? true;
  const byKey = new Map<string, Stored>();
  const created: Created[] = [];
  const requests: ReceivedRequest[] = [];
  const faults: OpenAIFault[] = [];
  let effects = 0;
  let lookups = 0;
  let held: Promise<void> = Promise.resolve();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method === 'GET' && url.pathname === '/v1/chat/completions') {
      lookups++;
      const wanted = [...url.searchParams].flatMap(([name, value]) => {
        const m = /^metadata\[(.+)\]$/.exec(name);
        return m?.[1] === undefined ? [] : [[m[1], value] as const];
      });
      const data = created.filter((c) => wanted.every(([k, v]) => c.metadata[k] === v)).map((c) => c.completion);
      return reply(res, 200, { object: 'list', data, has_more: false });
    }
    if (req.method !== 'POST' || url.pathname !== '/v1/chat/completions') return reply(res, 404, { error: { message: `no route ${url.pathname}` } });
    const body = await readBody(req);
    const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
    requests.push({ key, headers: { ...req.headers }, body });
    const fault = faults.shift();
    if (fault === 'rate_limited' || fault === 'unavailable') {
      res.setHeader('retry-after', '0');
      return reply(res, fault === 'rate_limited' ? 429 : 503, { error: { type: 'requests', message: 'Rate limit reached' } });
    }
    if (fault === 'lock_timeout') return reply(res, 409, { error: { type: 'conflict', message: 'lock timeout' } });

    let completion: string;
    const seen = dedupe && key !== undefined ? byKey.get(key) : undefined;
    if (seen !== undefined) {
      if (seen.body !== body) return reply(res, 400, { error: { type: 'idempotency_error', message: 'Idempotency-Key reused with a different request body' } });
      completion = seen.completion;
      res.setHeader('idempotent-replayed', 'true');
    } else {
      effects++;
      const request = JSON.parse(body) as { store?: boolean; metadata?: Record<string, string> };
      const value = chatCompletion(effects, body);
      if (request.store === true) created.push({ metadata: request.metadata ?? {}, completion: value });
      completion = JSON.stringify(value);
      if (dedupe && key !== undefined) byKey.set(key, { body, completion });
    }
    if (fault === 'drop_after_commit') return void req.socket.destroy();
    if ((JSON.parse(body) as { stream?: boolean }).stream === true) return stream(res, JSON.parse(completion) as Completion, fault === 'drop_mid_stream', held);
    if (fault === 'error_after_commit') return reply(res, 500, { error: { type: 'server_error', message: 'The server had an error while processing your request.' } });
    raw(res, 200, completion);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fake-openai: no port');
  const origin = `http://127.0.0.1:${address.port}`;
  return {
    baseURL: `${origin}/v1`,
    origin,
    get effects() {
      return effects;
    },
    get requests() {
      return [...requests];
    },
    get lookups() {
      return lookups;
    },
    fault: (...f) => void faults.push(...f),
    holdStreams: () => {
      let release = (): void => undefined;
      held = new Promise((resolve) => (release = resolve));
      return release;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function chatCompletion(n: number, requestBody: string): unknown {
  const { model, messages } = JSON.parse(requestBody) as { model?: string; messages?: { content?: unknown }[] };
  const last = messages?.at(-1)?.content;
  return {
    id: `chatcmpl-${n}`,
    object: 'chat.completion',
    created: 1_700_000_000 + n,
    model: model ?? 'gpt-4o-mini',
    choices: [{ index: 0, message: { role: 'assistant', content: `order noted: ${String(last)}`, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
  };
}

interface Completion {
  id: string;
  created: number;
  model: string;
  choices: { message: { content: string } }[];
}

/** The completion as SSE chunks: the first (role and half the text) at once, the rest after `held`. */
async function stream(res: ServerResponse, c: Completion, dropMidStream: boolean, held: Promise<void>): Promise<void> {
  const text = c.choices[0]?.message.content ?? '';
  const chunk = (delta: Record<string, string>, finish: string | null): string =>
    `data: ${JSON.stringify({ id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  await new Promise((resolve) => res.write(chunk({ role: 'assistant', content: text.slice(0, 5) }, null), resolve));
  await held;
  if (dropMidStream) {
    // after the client has the headers and the first chunk
    await new Promise((resolve) => setTimeout(resolve, 50));
    return void res.socket?.destroy();
  }
  res.write(chunk({ content: text.slice(5) }, 'stop'));
  res.end('data: [DONE]\n\n');
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function reply(res: ServerResponse, status: number, value: unknown): void {
  raw(res, status, JSON.stringify(value));
}

function raw(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
