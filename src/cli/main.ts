#!/usr/bin/env node
/**
 * The `oncefetch` command: `demo`, and the store tools `inspect`, `show`,
 * `explain`, `purge`.
 *
 * Exit codes: 0 ok; 1 a duplicate (demo), a record not found, an unreadable record, or an error;
 * 2 a bad command line, a missing store file or one that is not an oncefetch database (a
 * PostgreSQL database without oncefetch tables), or a ref that matches several operations.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { EXIT, UsageError } from './args.js';
import { demoCommand } from './demo.js';
import { demoWorkerCommand } from './demo-worker.js';
import { explainCommand } from './explain.js';
import type { CliIo } from './format.js';
import { processIo, terminalSafe } from './format.js';
import { inspectCommand } from './inspect.js';
import { purgeCommand } from './purge.js';
import { showCommand } from './show.js';

const HELP = `Usage: oncefetch <command> [flags]

One logical request, at most one business effect.

Commands:
  demo              naive client vs oncefetch through injected faults and a crash; compares business effects
  inspect           counts of a store's operations by state, and the oldest stuck ones
  show <ref>        one operation record: attempts with their class, evidence, lease
  explain <ref>     diagnosis, plan, verification and hand-off of one operation
  purge             remove terminal records past their retention

Store commands take --store PATH|URL (SQLite file or postgres:// URL, with
?schema=S&table=T for a store not in public.oncefetch_records, and
&statementTimeoutMs=0 behind PgBouncer; default $ONCEFETCH_DB or
./.oncefetch/oncefetch.db) and --json.
Run \`oncefetch <command> --help\` for a command's flags.
`;

type Command = (args: string[], io: CliIo) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  demo: demoCommand,
  inspect: inspectCommand,
  show: showCommand,
  explain: explainCommand,
  purge: purgeCommand,
  // internal: the process the demo kills
  'demo-worker': (args) => demoWorkerCommand(args),
};

function version(): string {
  try {
    // dist/cli/main.js and src/cli/main.ts both sit two levels below package.json.
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Runs the command line `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[], given: CliIo = processIo): Promise<number> {
  // Stored records hold provider-controlled text: no control sequence of it reaches the terminal.
  const io = terminalSafe(given);
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.out(HELP);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    io.out(`${version()}\n`);
    return EXIT.ok;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined; // not `constructor` and the like
  if (command === undefined) {
    io.err(`oncefetch: unknown command "${name}"\n\n${HELP}`);
    return EXIT.usage;
  }
  try {
    return await command(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`oncefetch ${name}: ${error.message}\nRun \`oncefetch ${name} --help\` for usage.\n`);
      return EXIT.usage;
    }
    io.err(`oncefetch ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT.failure;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`oncefetch: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = EXIT.failure;
  },
);
