/**
 * Words for validation issues. oncefetch validates with `zod/mini`, which
 * ships no locale (that keeps the browser bundle small), so without this map
 * every issue would read "Invalid input". Messages a schema sets itself win.
 *
 * @internal
 * @module
 */
import type * as z from 'zod/mini';

const LENGTH_ORIGINS: ReadonlySet<string> = new Set(['string', 'array', 'set', 'file']);

/** A short, lower-case phrase for an issue, e.g. `must be >= 100`. Pass it as `safeParse(v, { error: issueText })`. */
export const issueText: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected === 'int' ? 'must be an integer' : `must be of type ${issue.expected}`;
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? issue.minimum : issue.maximum;
      const op = (issue.code === 'too_small' ? '>' : '<') + (issue.inclusive === false ? '' : '=');
      return LENGTH_ORIGINS.has(issue.origin) ? `must have a length ${op} ${bound}` : `must be ${op} ${bound}`;
    }
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_format':
      return issue.pattern === undefined ? `must be a valid ${issue.format}` : `must match ${issue.pattern}`;
    case 'unrecognized_keys':
      return `has unknown keys ${issue.keys.join(', ')}`;
    default:
      return 'is invalid';
  }
};
