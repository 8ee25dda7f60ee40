/**
 * The CLI's number flags. User trial: `inspect --limit -1` printed node's parseArgs message ("argument
 * is ambiguous … use '--limit=-XYZ'"), and `--limit 0x10`, `--limit 1e3` or `--limit ' 7'` were read
 * as 16, 1000 and 7.
 */
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { UsageError, dashValues, intFlag, numberFlag, parsing } from '../../src/cli/args.js';
import { thrown } from '../helpers/thrown.js';

describe('intFlag', () => {
  it.each([
    ['0', 0],
    ['10', 10],
    ['10000', 10_000],
    ['007', 7],
  ])('--limit %s is %d', (value, n) => {
    expect(intFlag(value, 'limit', 10, 0, 10_000)).toBe(n);
  });

  it('takes a negative number where the range allows it', () => {
    expect(intFlag('-5', 'seed', 1, -(2 ** 31), 2 ** 32 - 1)).toBe(-5);
  });

  it.each(['-1', '1.5', '', ' ', ' 7', '+3', '0x10', '1e3', 'ten', '10001', '99999999999999999999', 'Infinity', 'NaN'])('--limit "%s" is a usage error in the CLI\'s words', (value) => {
    const error = thrown(() => intFlag(value, 'limit', 10, 0, 10_000));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toBe(`--limit must be a whole number from 0 to 10000 (got ${JSON.stringify(value)})`);
  });
});

describe('numberFlag', () => {
  it.each([
    ['0', 0],
    ['0.3', 0.3],
    ['1', 1],
  ])('--rate %s is %d', (value, n) => {
    expect(numberFlag(value, 'rate', 0.3, 0, 1)).toBe(n);
  });

  it.each(['-0.5', '1.5', '', 'abc', 'Infinity', '0x1'])('--rate "%s" is a usage error in the CLI\'s words', (value) => {
    const error = thrown(() => numberFlag(value, 'rate', 0.3, 0, 1));
    expect(error).toBeInstanceOf(UsageError);
    expect(error.message).toBe(`--rate must be a number from 0 to 1 (got ${JSON.stringify(value)})`);
  });
});

describe('dashValues', () => {
  const options = { limit: { type: 'string' }, tenant: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;
  const parse = (args: string[]): { limit?: string | undefined; tenant?: string | undefined } =>
    parsing(() => parseArgs({ args: dashValues(args, options), options, strict: true }).values);

  it('hands a negative number after a number flag to that flag, for the flag to refuse in its own words', () => {
    expect(parse(['--limit', '-1'])).toEqual({ limit: '-1' });
    expect(parse(['--limit', '-0.5', '--tenant', 't'])).toEqual({ limit: '-0.5', tenant: 't' });
    expect(parse(['--limit=-1'])).toEqual({ limit: '-1' });
  });

  it('hands a value with one leading dash to any string flag', () => {
    expect(parse(['--tenant', '-1'])).toEqual({ tenant: '-1' });
    expect(parse(['--tenant', '-x', '--limit', '5'])).toEqual({ tenant: '-x', limit: '5' });
  });

  it('refuses a flag where the value should be, in our words, and leaves what follows -- alone', () => {
    expect(thrown(() => dashValues(['--limit', '--tenant'], options)).message).toBe("--limit needs a value, got the flag '--tenant' (a value that starts with '-' is written --limit=--tenant)");
    expect(thrown(() => dashValues(['--tenant', '-h'], options))).toBeInstanceOf(UsageError);
    expect(dashValues(['--', '--limit', '-1'], options)).toEqual(['--', '--limit', '-1']);
    expect(dashValues(['--help', '-1'], options)).toEqual(['--help', '-1']);
    expect(dashValues(['--tenant', '-'], options)).toEqual(['--tenant', '-']);
  });
});
