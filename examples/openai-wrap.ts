/**
 * openai-node with oncefetch as its `fetch`. Every POST the SDK makes becomes
 * one operation: its key is stored before the first attempt and reused on every
 * retry, and after a lost response oncefetch looks the completion up before it
 * sends anything again.
 *
 * Run: npx tsx examples/openai-wrap.ts
 * Without OPENAI_BASE_URL it starts a loopback fake of the API that creates the
 * completion and then drops the connection, once.
 */
import OpenAI from 'openai';
import { createClient, memoryStore } from '../src/index.js';
import { startFakeOpenAI } from '../test/helpers/fake-openai.js';

const fake = process.env.OPENAI_BASE_URL === undefined ? await startFakeOpenAI() : undefined;
fake?.fault('drop_after_commit');
const baseURL = process.env.OPENAI_BASE_URL ?? fake?.baseURL;

// Calls oncefetch cannot settle are looked up: stored completions are listed by metadata.
const lookupCompletion = async ({ scope }: { scope: { ref: string } }): Promise<Response | null> => {
  const page = await openai.chat.completions.list({ metadata: { ref: scope.ref } });
  const found = page.data[0];
  return found === undefined ? null : Response.json(found);
};

const once = createClient({
  tenant: 'agent-7',
  store: memoryStore(), // the default SQLite store keeps operations across restarts
  retry: { baseDelayMs: 50 },
  // the action of a wrapped call is `${METHOD} ${origin}${path}`
  lookups: { [`POST ${new URL(`${baseURL}/`).origin}/v1/chat/completions`]: lookupCompletion },
});

const openai = new OpenAI({
  apiKey: process.env.OPENAI_API_KEY ?? 'sk-loopback',
  baseURL: baseURL ?? null,
  fetch: once.wrap(),
  maxRetries: 0, // oncefetch retries with one key; the SDK's own would be new operations (wrap() refuses them)
});

const ref = 'task-42'; // your stable id: sent as the key, so a restart resumes the same operation
const completion = await openai.chat.completions.create(
  { model: 'gpt-4o-mini', store: true, metadata: { ref }, messages: [{ role: 'user', content: 'Order 2 copies of A-17' }] },
  { headers: { 'Idempotency-Key': ref } },
);

console.log(`completion ${completion.id}: ${completion.choices[0]?.message.content ?? ''}`);
const { attempts, lookups, replays } = once.stats();
console.log(`oncefetch: attempts=${attempts} lookups=${lookups} replays=${replays}`);
if (fake !== undefined) {
  console.log(`completions created at the provider: ${fake.effects}`);
  await fake.close();
}
await once.close();
