/**
 * `oncefetch demo-worker` (internal): the process the demo kills. It places
 * one order and waits for the answer, which the provider holds back after
 * committing the order, until the demo SIGKILLs it: no `finally`, no flush.
 *
 * @module
 */
import { EXIT, UsageError, intFlag, parseFlags } from './args.js';
import { naiveOrder, onceClient, onceOrder } from './demo-clients.js';

/** Long enough that the demo kills the worker while its attempt is still waiting. */
const WORKER_ATTEMPT_TIMEOUT_MS = 60_000;

/** Runs the worker; resolves only if the demo did not kill it. */
export async function demoWorkerCommand(args: string[]): Promise<number> {
  const { values } = parseFlags({
    args,
    options: {
      client: { type: 'string' },
      url: { type: 'string' },
      index: { type: 'string' },
      db: { type: 'string' },
      tenant: { type: 'string' },
      'lease-ms': { type: 'string' },
    },
    strict: true,
  });
  const url = values.url;
  if (url === undefined) throw new UsageError('demo-worker: --url is required');
  const index = intFlag(values.index, 'index', 1, 1, Number.MAX_SAFE_INTEGER);
  if (values.client === 'naive') {
    await naiveOrder(url, index, WORKER_ATTEMPT_TIMEOUT_MS);
    return EXIT.ok;
  }
  if (values.client !== 'once' || values.db === undefined || values.tenant === undefined) {
    throw new UsageError('demo-worker: --client naive, or --client once --db PATH --tenant NAME');
  }
  const client = onceClient(url, values.db, values.tenant, intFlag(values['lease-ms'], 'lease-ms', 400, 100, 60_000), undefined, WORKER_ATTEMPT_TIMEOUT_MS);
  try {
    await onceOrder(client, url, index);
  } finally {
    await client.close();
  }
  return EXIT.ok;
}
