/**
 * Purge at scale on PostgreSQL: 100,000 expired terminal records are purged
 * in bounded batches while claims keep completing, including claims of the
 * very ids being deleted. The elapsed time is printed, not asserted.
 */
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { applyEvent, newRecord, recordId, type OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';

const ROWS = 100_000;
const BATCH = 5_000;
const ACTION = 'create-order';

function record(ref: string, now: number, retentionMs: number): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: ACTION, ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'bulk-loader',
    now,
    leaseMs: 100,
    retentionMs,
  });
}

/** A succeeded record with a 201 result, created at 1000 and expired at 2000. */
function expiredTemplate(): OperationRecord {
  const fresh = record('template', 1_000, 1_000);
  const started = applyEvent(fresh, { type: 'attempt_started', attemptId: 'att-template' }, 1_000, 'bulk-loader');
  return applyEvent(
    started,
    {
      type: 'attempt_finished',
      class: 'success',
      status: 201,
      reason: 'created',
      result: {
        kind: 'response',
        source: 'attempt',
        status: 201,
        statusText: 'Created',
        headers: [['content-type', 'application/json']],
        body: Buffer.from(JSON.stringify({ id: 'ord_1', ref: 'template', sku: 'A-17', qty: 1 })).toString('base64'),
        bodyTruncated: false,
      },
    },
    1_000,
    'bulk-loader',
  );
}

describeWithPostgres('postgresStore purge at scale', (url) => {
  const schema = freshSchemaName();
  const table = 'bulk';
  let admin: pg.Pool;
  let purger: OnceStore;
  let claimer: OnceStore;

  beforeAll(async () => {
    admin = adminPool(url);
    purger = postgresStore({ connectionString: url, schema, table, purgeBatchSize: BATCH });
    claimer = postgresStore({ connectionString: url, schema, table, poolMax: 4 });
    await purger.get('create the tables');
  });
  afterAll(async () => {
    await purger.close();
    await claimer.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it(`purges ${ROWS.toLocaleString('en')} expired terminal rows in batches of ${BATCH} while claims keep completing`, { timeout: 120_000 }, async () => {
    const template = expiredTemplate();
    // One INSERT … SELECT: each row is the template with its own id and ref, so every row is a valid record.
    const loadStarted = performance.now();
    await admin.query(
      `INSERT INTO "${schema}"."${table}" (id, generation, state, tenant, lease_expires_at, expires_at, updated_at, data)
       SELECT x.id, $2, 'succeeded', 't1', NULL, $3, $4,
              jsonb_set(jsonb_set($1::jsonb, '{id}', to_jsonb(x.id)), '{ref}', to_jsonb(x.ref))::text
       FROM generate_series(1, $5) AS g,
            LATERAL (SELECT 'bulk-' || g AS ref, '["t1","${ACTION}","bulk-' || g || '"]' AS id) AS x`,
      [JSON.stringify(template), template.generation, template.expiresAt, template.updatedAt, ROWS],
    );
    const loadMs = performance.now() - loadStarted;
    const sampleRef = `bulk-${ROWS}`;
    const sampleRow = await purger.get(recordId({ tenant: 't1', action: ACTION, ref: sampleRef }));
    expect(sampleRow).toEqual({ ...template, id: recordId({ tenant: 't1', action: ACTION, ref: sampleRef }), ref: sampleRef });

    // Claims run on their own pool for as long as the purge does: half new operations, half
    // re-claims of bulk ids (which must wait for the batch deleting them, never for the whole purge).
    let purging = true;
    const latencies: number[] = [];
    const finishedAt: number[] = [];
    let created = 0;
    let n = 0;
    const claimLoop = async (): Promise<void> => {
      while (purging) {
        const i = n++;
        const ref = i % 2 === 0 ? `live-${i}` : `bulk-${1 + ((i * 7919) % ROWS)}`;
        const started = performance.now();
        const result = await claimer.claim(record(ref, Date.now(), 3_600_000));
        finishedAt.push(performance.now());
        latencies.push(finishedAt.at(-1)! - started);
        if (result.created) created++;
      }
    };

    const purgeStarted = performance.now();
    const claimers = Array.from({ length: 4 }, claimLoop);
    const purged = await purger.purge(1_000_000).finally(() => {
      purging = false;
    });
    const purgeEnded = performance.now();
    const purgeMs = purgeEnded - purgeStarted;
    await Promise.all(claimers);
    const duringPurge = finishedAt.filter((t) => t <= purgeEnded).length;

    const slowest = Math.max(...latencies);
    console.log(
      `[purge at scale] loaded ${ROWS} rows in ${Math.round(loadMs)} ms; purged ${purged} in ${Math.round(purgeMs)} ms ` +
        `(${Math.ceil(ROWS / BATCH)} batches of ${BATCH}); ${duringPurge} claims completed meanwhile, ` +
        `slowest ${Math.round(slowest)} ms`,
    );

    expect(purged).toBe(ROWS);
    expect(duringPurge, 'claims that completed while the purge ran').toBeGreaterThan(0);
    const { rows } = await admin.query(`SELECT state, count(*)::int AS n FROM "${schema}"."${table}" GROUP BY state`);
    // Every terminal row is gone; what is left is exactly what the claims created (pending, fresh).
    expect(rows).toEqual(created === 0 ? [] : [{ state: 'pending', n: created }]);
    expect(await purger.purge(1_000_000)).toBe(0);
  });
});
