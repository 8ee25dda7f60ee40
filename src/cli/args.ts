/**
 * Argument helpers shared by the `oncefetch` commands (`node:util` parseArgs).
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** A bad command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Exit codes of the `oncefetch` command. */
export const EXIT = {
  ok: 0,
  /** a duplicate (demo), a record not found, or an operational error */
  failure: 1,
  usage: 2,
} as const;

/** An integer flag within bounds, or its default: decimal digits only (not `0x10`, `1e3`, ` 7`, `1.5`). */
export function intFlag(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || n < min || n > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max} (got ${JSON.stringify(value)})`);
  return n;
}

/** A number flag within bounds, or its default: a decimal number (not `0x1`, `Infinity`). */
export function numberFlag(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^-?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i.test(value) || n < min || n > max) throw new UsageError(`--${name} must be a number from ${min} to ${max} (got ${JSON.stringify(value)})`);
  return n;
}

/**
 * A string flag's value that starts with a dash: parseArgs refuses `--tenant -1` and `--limit -1`
 * alike ("argument is ambiguous"), yet a tenant, an action or a store may be named `-1`, and a
 * number flag's own check says what it takes. A value with one leading dash that is not one of
 * `options`' short flags becomes `--name=VALUE`; a long flag, `--` or a short flag where the value
 * should be (`--tenant --limit 5`: a value forgotten) is a {@link UsageError} naming the
 * `--name=VALUE` form, never taken as the value. Arguments after `--` are left as they are.
 */
export function dashValues(args: readonly string[], options: OptionsConfig): string[] {
  const shorts = new Set(Object.values(options).flatMap((o) => (o.short === undefined ? [] : [`-${o.short}`])));
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') return [...out, ...args.slice(i)];
    const next = args[i + 1];
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    const takesValue = name !== undefined && Object.hasOwn(options, name) && options[name]?.type === 'string';
    if (takesValue && next !== undefined && next.length > 1 && next.startsWith('-')) {
      if (next.startsWith('--') || shorts.has(next)) throw new UsageError(`${arg} needs a value, got the flag '${next}' (a value that starts with '-' is written ${arg}=${next})`);
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** parseArgs on `config`, its values that start with a dash read by {@link dashValues}, its errors by {@link parsing}. */
export function parseFlags<T extends ParseArgsConfig & { args: string[]; options: OptionsConfig }>(config: T): ReturnType<typeof parseArgs<T>> {
  return parsing(() => parseArgs<T>({ ...config, args: dashValues(config.args, config.options) }));
}

/** Turns parseArgs' own errors (unknown flag, missing value) into a {@link UsageError}. */
export function parsing<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) throw new UsageError((error as Error).message);
    throw error;
  }
}
