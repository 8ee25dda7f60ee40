/**
 * A provider's answer is data the operator never chose: `oncefetch show` and `explain` print it
 * (the stored body, attempt reasons, error messages), so a terminal control sequence in it must
 * reach the operator's terminal as visible text, never as a command (an OSC title or hyperlink, a
 * screen clear that hides the lines above it, a cursor move that rewrites them).
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqliteClient, tempDir } from '../helpers/setup.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env['ONCEFETCH_DB'];
    execFile(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, env, timeout: 30_000 }, (error, stdout, stderr) => {
      done({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

// OSC 0 (window title), ED 2 (clear screen), CUU (cursor up), SGR, BEL, and the C1 CSI as one code point
const HOSTILE = 'ok\u001b]0;pwned\u0007\u001b[2J\u001b[1A\u001b[31mred\u009b2Jend\r';
// What a terminal acts on: C0 controls but newline and tab, DEL, C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('CLI output of provider-controlled data', () => {
  let server: Server;
  let url: string;
  const tmp = tempDir();
  const path = join(tmp.dir, 'escapes.db');
  let effects = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        effects += 1;
        // a terminal answer (recorded failed): its body is stored and shown; a hostile ref-like error text too
        res.writeHead(req.url === '/fail' ? 422 : 200, { 'content-type': 'text/plain' });
        res.end(HOSTILE);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const { client } = sqliteClient(path, { tenant: 't1' });
    await (await client.fetch(`${url}/ok`, { method: 'POST', body: 'a', once: { action: 'create', ref: 'r-ok' } })).text();
    await (await client.fetch(`${url}/fail`, { method: 'POST', body: 'b', once: { action: 'create', ref: 'r-fail' } })).text();
    // the caller's own strings (a ref taken from an inbound webhook) are printed too
    await (await client.fetch(`${url}/ok`, { method: 'POST', body: 'c', once: { action: 'create', ref: 'r\u001b[2Jx' } })).text();
    await client.close();
    expect(effects).toBe(3);
  });

  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    tmp.cleanup();
  });

  it('show prints the stored body with its control characters escaped, not raw', async () => {
    const run = await cli(['show', 'r-ok', '--store', path]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('result body');
    expect(run.stdout).not.toMatch(CONTROL);
    // visible, so the operator sees that the provider sent them
    expect(run.stdout).toContain('\\u001b]0;pwned\\u0007');
  });

  it('show --json and explain (human and --json) carry no raw control character either', async () => {
    for (const args of [
      ['show', 'r-ok', '--store', path, '--json'],
      ['show', 'r-fail', '--store', path],
      ['explain', 'r-fail', '--store', path],
      ['explain', 'r-fail', '--store', path, '--json'],
      ['inspect', '--store', path],
      ['show', 'r\u001b[2Jx', '--store', path],
    ]) {
      const run = await cli(args);
      expect(run.stdout + run.stderr, args.join(' ')).not.toMatch(CONTROL);
    }
    const json = await cli(['show', 'r-ok', '--store', path, '--json']);
    // still valid JSON, the body unchanged once parsed
    const record = JSON.parse(json.stdout) as { result: { body: string } };
    expect(Buffer.from(record.result.body, 'base64').toString('utf8')).toBe(HOSTILE);
  });

  it('a ref that is not found is echoed escaped on stderr', async () => {
    const run = await cli(['show', 'nope\u001b]0;x\u0007', '--store', path]);
    expect(run.code).toBe(1);
    expect(run.stderr).not.toMatch(CONTROL);
  });
}, 60_000);
