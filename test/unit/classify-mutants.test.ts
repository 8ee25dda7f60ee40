/**
 * Tests written to kill hand-made mutants of src/classify/ that the other suites let survive:
 * status-range boundaries, body-signal alternatives and limits, and the reason naming the hint.
 */
import { describe, expect, it } from 'vitest';

import { classifyResponse, type OutcomeClass } from '../../src/classify/classify.js';

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);

function classOf(status: number, bodyText?: string, headers: Record<string, string> = {}): OutcomeClass {
  return classifyResponse({ status, headers: new Headers(headers), bodyText }, NOW).class;
}

describe('status range boundaries', () => {
  it('299 is a success (last 2xx)', () => {
    expect(classOf(299)).toBe('success');
  });

  it('399 is a redirect, terminal (last 3xx), not an unknown code', () => {
    expect(classOf(399)).toBe('terminal');
  });

  it('499 is a client error, terminal (last 4xx): not a server error', () => {
    expect(classOf(499)).toBe('terminal');
  });

  it('400 without a signal is terminal (first 4xx)', () => {
    expect(classOf(400)).toBe('terminal');
  });

  it('500 and 599 are ambiguous, 600 is ambiguous as an unknown code', () => {
    expect(classOf(500)).toBe('ambiguous');
    expect(classOf(599)).toBe('ambiguous');
    expect(classOf(600)).toBe('ambiguous');
  });
});

describe('409 "in progress" signal alternatives', () => {
  it.each([
    ['outstanding', '{"title":"A request is outstanding for this key"}'],
    ['concurrent', '{"error":"concurrent request with this key"}'],
    ['being processed', '{"error":"the previous call is being processed"}'],
    ['idempotency_key_in_use', '{"error":{"code":"idempotency_key_in_use"}}'],
  ])('409 with %s is retryable', (_, body) => {
    expect(classOf(409, body)).toBe('retryable');
  });
});

describe('422 "request … in progress" window', () => {
  it('matches with exactly 40 characters between "request" and "in progress"', () => {
    const gap = `${'a'.repeat(39)} `;
    expect(gap).toHaveLength(40);
    expect(classOf(422, `{"message":"request${gap}in progress"}`)).toBe('retryable');
  });

  it('does not match with 41 characters between them', () => {
    const gap = `${'a'.repeat(40)} `;
    expect(classOf(422, `{"message":"request${gap}in progress"}`)).toBe('terminal');
  });
});

describe('key-mismatch signal alternatives', () => {
  it('DynamoDB IdempotentParameterMismatchException on 400 is a conflict', () => {
    const body = '{"__type":"com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException","message":"Token was used with other parameters"}';
    expect(classOf(400, body)).toBe('conflict');
  });
});

describe('body signal limit (first 4096 characters)', () => {
  it('a signal ending exactly at character 4096 is read', () => {
    const body = `${' '.repeat(4096 - 'in progress'.length)}in progress`;
    expect(body).toHaveLength(4096);
    expect(classOf(409, body)).toBe('retryable');
  });

  it('a signal ending at character 4097 is not read', () => {
    const body = `${' '.repeat(4097 - 'in progress'.length)}in progress`;
    expect(classOf(409, body)).toBe('terminal');
  });
});

describe('should-retry hint reasons', () => {
  it('both hints true: the reason names the first header read (x-should-retry)', () => {
    const result = classifyResponse({ status: 500, headers: new Headers({ 'x-should-retry': 'true', 'stripe-should-retry': 'true' }) }, NOW);
    expect(result).toEqual({ class: 'retryable', reason: 'x-should-retry: true' });
  });

  it('both hints false: the reason names x-should-retry', () => {
    const result = classifyResponse({ status: 503, headers: new Headers({ 'x-should-retry': 'false', 'stripe-should-retry': 'false' }) }, NOW);
    expect(result).toEqual({ class: 'terminal', reason: 'x-should-retry: false' });
  });
});
