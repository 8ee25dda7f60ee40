/**
 * The benchmark provider: a minimal `node:http` "orders" API, run in its own
 * child process so its CPU is not the client's. It honours `Idempotency-Key`
 * minimally (a key seen before replays the stored response) so that
 * oncefetch's requests do what they do against a real provider, and nothing
 * else: no fault injection, no ledger, no per-request bookkeeping beyond a
 * `Map`. (The fault-injecting test provider's bookkeeping would dominate.)
 *
 * Started by `bench/run.ts`: prints `{"port":N}` on stdout, serves until its
 * stdin closes, then prints `{"requests":N,"effects":N,"replays":N}` and exits.
 *
 * @module
 */
import { createServer } from 'node:http';

const MAX_KEYS = 200_000;
const stored = new Map<string, string>();
let requests = 0;
let effects = 0;
let replays = 0;

const server = createServer((req, res) => {
  requests++;
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const raw = req.headers['idempotency-key'];
    const key = typeof raw === 'string' ? raw : undefined;
    if (req.method === 'POST') {
      const seen = key === undefined ? undefined : stored.get(key);
      if (seen !== undefined) {
        replays++;
        res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(seen), 'idempotent-replayed': 'true' });
        res.end(seen);
        return;
      }
      effects++;
      const body = `{"id":"o-${effects}","status":"created","bytes":${Buffer.concat(chunks).length}}`;
      if (key !== undefined) {
        // Bounded: the oldest keys go first (a Map iterates in insertion order).
        if (stored.size >= MAX_KEYS) {
          const oldest = stored.keys().next();
          if (oldest.done !== true) stored.delete(oldest.value);
        }
        stored.set(key, body);
      }
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const body = '{"ok":true}';
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});

// The parent closes our stdin when it is done (or dies): report and exit.
process.stdin.resume();
process.stdin.on('end', () => {
  process.stdout.write(`${JSON.stringify({ requests, effects, replays })}\n`);
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
