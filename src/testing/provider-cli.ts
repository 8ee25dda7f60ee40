#!/usr/bin/env node
/**
 * Runs the loopback provider as a standalone process, so that tests in other
 * processes (crash and chaos tests) can count effects and script faults over
 * `/__control/*`.
 *
 * ```
 * node dist/testing/provider-cli.js --port 0 [--ignore-keys] [--require-key]
 *   [--raw-body-compare] [--key-header NAME] [--processing-ms N]
 *   [--seed N [--rate R] [--kinds kind[:param],…]]
 * ```
 *
 * Prints one JSON line `{"url":"http://127.0.0.1:PORT"}` on stdout once listening;
 * exits 0 on SIGTERM/SIGINT after closing the server. With `--seed`, random
 * faults are drawn at `--rate` (default 0.2) from `--kinds`; a kind's param is
 * the status for `status_before_commit`/`error_after_commit` or the delay (ms)
 * for the delay kinds.
 *
 * @module
 */

import { parseArgs } from 'node:util';
import { FAULT_KINDS, parseFault, type Fault } from './provider-faults.js';
import { startProvider } from './provider.js';
import type { ProviderOptions } from './provider-options.js';

/** Random-fault kinds used when `--seed` is given without `--kinds`: the ones that cost no wall time. */
const DEFAULT_KINDS =
  'reset_before_commit,status_before_commit:503,drop_after_commit,error_after_commit,truncate_after_commit';

function parseKind(spec: string): Fault {
  const [kind = '', param] = spec.trim().split(':');
  const value = param === undefined ? undefined : Number(param);
  const where = `--kinds "${spec}"`;
  if (!(FAULT_KINDS as readonly string[]).includes(kind)) {
    throw new TypeError(`${where}: unknown fault kind (one of ${FAULT_KINDS.join(', ')})`);
  }
  switch (kind) {
    case 'status_before_commit':
      return parseFault({ kind, status: value ?? 503, retryAfter: '0' }, where);
    case 'error_after_commit':
      return parseFault(value === undefined ? { kind } : { kind, status: value }, where);
    case 'delay_after_commit':
    case 'delay_before_commit':
      return parseFault({ kind, delayMs: value ?? 100 }, where);
    default:
      return parseFault({ kind }, where);
  }
}

function numberArg(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new TypeError(`--${name} must be a number`);
  return n;
}

function optionsFromArgs(args: string[]): ProviderOptions {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: 'string', default: '0' },
      'ignore-keys': { type: 'boolean', default: false },
      'require-key': { type: 'boolean', default: false },
      'raw-body-compare': { type: 'boolean', default: false },
      'key-header': { type: 'string' },
      'processing-ms': { type: 'string' },
      seed: { type: 'string' },
      rate: { type: 'string' },
      kinds: { type: 'string' },
    },
    strict: true,
  });
  const options: ProviderOptions = {
    port: numberArg(values.port, 'port') ?? 0,
    ignoreKeys: values['ignore-keys'],
    requireKey: values['require-key'],
    rawBodyCompare: values['raw-body-compare'],
  };
  if (values['key-header'] !== undefined) options.keyHeader = values['key-header'];
  const processingMs = numberArg(values['processing-ms'], 'processing-ms');
  if (processingMs !== undefined) options.processingMs = processingMs;
  const seed = numberArg(values.seed, 'seed');
  if (seed !== undefined) {
    const kinds = (values.kinds ?? DEFAULT_KINDS).split(',').filter((s) => s.trim() !== '').map(parseKind);
    options.randomFaults = { seed, rate: numberArg(values.rate, 'rate') ?? 0.2, kinds };
  }
  return options;
}

async function main(): Promise<void> {
  const provider = await startProvider(optionsFromArgs(process.argv.slice(2)));
  const stop = (): void => {
    provider.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdout.write(`${JSON.stringify({ url: provider.url })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`provider-cli: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
