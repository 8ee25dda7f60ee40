/**
 * Argument helpers shared by the `oncefetch` commands (`node:util` parseArgs).
 *
 * @module
 */

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
 * `--name -1` as `--name=-1` for the number flags `names`: parseArgs refuses a value that starts
 * with a dash ("argument is ambiguous"), so the flag's own check could not say what it takes.
 */
export function negativeNumbers(args: readonly string[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') return [...out, ...args.slice(i)];
    const next = args[i + 1];
    if (next !== undefined && /^-\.?\d/.test(next) && names.some((n) => arg === `--${n}`)) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
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
