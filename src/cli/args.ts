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

/** An integer flag within bounds, or its default. */
export function intFlag(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n)) throw new UsageError(`--${name} must be an integer (got "${value}")`);
  if (n < min || n > max) throw new UsageError(`--${name} must be from ${min} to ${max} (got ${n})`);
  return n;
}

/** A number flag within bounds, or its default. */
export function numberFlag(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number (got "${value}")`);
  if (n < min || n > max) throw new UsageError(`--${name} must be from ${min} to ${max} (got ${n})`);
  return n;
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
