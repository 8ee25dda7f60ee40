/**
 * client.run with errors shaped as AWS SDK v3 (smithy) throws them: no `status`/`statusCode`; the HTTP
 * status is in `$metadata.httpStatusCode`, the error code in `name`, the response (with its headers) in a
 * non-enumerable `$response`. The shapes below are copied from what @aws-sdk/client-sqs 3.1175 and
 * @aws-sdk/client-dynamodb 3.1169 (maxAttempts: 1) threw against a loopback fake in a user trial.
 * Before the fix every one of them was classified as a transport error without a code: ambiguous.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, IdempotencyConflictError, createClient, memoryStore } from '../../src/index.js';
import type { OnceEvent, RunContext } from '../../src/index.js';

const SPEC = { action: 'enqueue', ref: 'job-1', payload: { to: 'a@example.com' } };

function awsError(name: string, httpStatusCode: number, headers: Record<string, string> = {}, attempts = 1): Error {
  const error = Object.assign(new Error(`${name} message`), {
    $fault: httpStatusCode >= 500 ? 'server' : 'client',
    $retryable: undefined,
    $metadata: { httpStatusCode, requestId: 'r-1', attempts, totalRetryDelay: 0 },
    __type: `com.amazonaws.sqs#${name}`,
  });
  error.name = name;
  Object.defineProperty(error, '$response', {
    enumerable: false,
    value: { statusCode: httpStatusCode, headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': name, ...headers } },
  });
  return error;
}

function makeClient(events: OnceEvent[] = []) {
  return createClient({
    store: memoryStore(),
    random: () => 0,
    retry: { budget: false, baseDelayMs: 1, maxDelayMs: 1 },
    onEvent: (e) => events.push(e),
  });
}

function scripted(steps: ({ error: unknown } | { value: string })[]) {
  const seen: RunContext[] = [];
  const effect = async (ctx: RunContext): Promise<string> => {
    seen.push(ctx);
    const step = steps.shift();
    if (step === undefined) throw new Error('unexpected effect call');
    if ('error' in step) throw step.error;
    return step.value;
  };
  return { effect, seen };
}

describe('client.run with AWS SDK v3 errors', () => {
  it('a 400 validation error ($metadata.httpStatusCode) is terminal: thrown as is, record failed, effect called once', async () => {
    const client = makeClient();
    const original = awsError('InvalidParameterValue', 400);
    const { effect, seen } = scripted([{ error: original }, { value: 'never' }]);
    await expect(client.run(SPEC, effect)).rejects.toBe(original);
    expect(seen).toHaveLength(1);
    const record = await client.get(SPEC);
    expect(record?.state).toBe('failed');
    expect(record?.attempts.map((a) => a.class)).toEqual(['terminal']);
  });

  it.each(['ThrottlingException', 'ProvisionedThroughputExceededException', 'RequestLimitExceeded', 'TooManyRequestsException'])(
    'a 400 %s (throttled: not processed) is retried with the same key',
    async (name) => {
      const client = makeClient();
      const { effect, seen } = scripted([{ error: awsError(name, 400) }, { value: 'm-1' }]);
      await expect(client.run(SPEC, effect)).resolves.toBe('m-1');
      expect(seen).toHaveLength(2);
      expect(seen[1]!.key).toBe(seen[0]!.key);
      expect((await client.get(SPEC))?.attempts.map((a) => a.class)).toEqual(['retryable', 'success']);
    },
  );

  it('a 400 TransactionInProgressException (a request with this token still running) is never recorded as failed', async () => {
    const client = makeClient();
    const { effect, seen } = scripted([{ error: awsError('TransactionInProgressException', 400) }, { value: 'done' }]);
    await expect(client.run(SPEC, effect)).resolves.toBe('done');
    expect(seen).toHaveLength(2);
    expect((await client.get(SPEC))?.attempts[0]?.class).toBe('retryable');
  });

  it("a 503 with Retry-After in the error's $response headers is retried after that wait", async () => {
    const events: OnceEvent[] = [];
    const client = makeClient(events);
    const { effect, seen } = scripted([{ error: awsError('ServiceUnavailable', 503, { 'retry-after': '1' }) }, { value: 'm-1' }]);
    await expect(client.run(SPEC, effect)).resolves.toBe('m-1');
    expect(seen).toHaveLength(2);
    const scheduled = events.find((e) => e.type === 'retry_scheduled');
    expect(scheduled).toMatchObject({ source: 'retry-after', delayMs: 1000 });
  });

  it('a 500 InternalError stays ambiguous: not resent without a lookup', async () => {
    const client = makeClient();
    const { effect, seen } = scripted([{ error: awsError('InternalError', 500) }, { value: 'never' }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.state).toBe('ambiguous');
  });

  it('a 400 IdempotentParameterMismatchException (DynamoDB: token reused with other parameters) is a key conflict', async () => {
    const client = makeClient();
    const { effect, seen } = scripted([{ error: awsError('IdempotentParameterMismatchException', 400) }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.attempts.map((a) => a.class)).toEqual(['conflict']);
  });

  // Measured with @aws-sdk/client-dynamodb's default maxAttempts 3: a PutItem committed, its answer a 500
  // (or a dropped connection); the SDK's own retry got ConditionalCheckFailedException (400), $metadata.attempts 2.
  it.each([
    ['ConditionalCheckFailedException', 400],
    ['ValidationException', 400],
    ['ThrottlingException', 400],
    ['ServiceUnavailable', 503],
  ])('a %s after the SDK retried by itself ($metadata.attempts 2) is ambiguous: an earlier request may have acted', async (name, status) => {
    const client = makeClient();
    const { effect, seen } = scripted([{ error: awsError(name, status, {}, 2) }, { value: 'never' }]);
    await expect(client.run(SPEC, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(seen).toHaveLength(1);
    const record = await client.get(SPEC);
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts[0]?.reason).toContain('2 requests');
  });

  it('after the SDK retried by itself, a lookup that finds the effect makes it a success', async () => {
    const client = makeClient();
    const { effect, seen } = scripted([{ error: awsError('ConditionalCheckFailedException', 400, {}, 2) }]);
    const value = await client.run({ ...SPEC, lookup: async () => ({ value: 'found' }) }, effect);
    expect(value).toBe('found');
    expect(seen).toHaveLength(1);
    expect((await client.get(SPEC))?.state).toBe('succeeded');
  });
});
