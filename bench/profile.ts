/**
 * Profiles one client under load and prints where the client's CPU goes:
 * self time by function and by module (node's V8 sampling profiler, in
 * process). What bounds a target shows up here.
 *
 *   npx tsx bench/profile.ts [--variant "oncefetch sqlite"] [--concurrency 16] [--duration 3000] [--top 30] [--callers fn]
 *   npx tsx bench/profile.ts --file x.cpuprofile --requests N   (summarise a `node --cpu-prof` profile)
 *
 * @module
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runLoad, startBenchProvider } from './harness.js';
import { VARIANTS } from './variants.js';

const { values } = parseArgs({
  options: {
    variant: { type: 'string', default: 'oncefetch sqlite' },
    concurrency: { type: 'string', default: '16' },
    duration: { type: 'string', default: '3000' },
    top: { type: 'string', default: '30' },
    save: { type: 'string' },
    callers: { type: 'string' },
    file: { type: 'string' },
    requests: { type: 'string' },
  },
});
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

let profile: Profile;
let requests: number;
let headline: string;
if (values.file !== undefined) {
  // Summarise a profile written by `node --cpu-prof` (e.g. of bench/overhead.ts).
  profile = JSON.parse(readFileSync(values.file, 'utf8')) as Profile;
  requests = Number(values.requests ?? 1);
  headline = `${values.file}`;
} else {
  const variant = VARIANTS.find((v) => v.name === values.variant);
  if (variant === undefined) throw new TypeError(`unknown variant ${values.variant}; one of: ${VARIANTS.map((v) => v.name).join(', ')}`);
  const dir = mkdtempSync(join(tmpdir(), 'oncefetch-profile-'));
  const provider = await startBenchProvider();
  const instance = await variant.setup(provider.url, dir);
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  let result;
  try {
    await runLoad(instance.send, Number(values.concurrency), 500, 0); // warm-up
    await session.post('Profiler.start');
    result = await runLoad(instance.send, Number(values.concurrency), Number(values.duration), 0);
    profile = (await session.post('Profiler.stop')).profile as unknown as Profile;
  } finally {
    await instance.close();
    await provider.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  session.disconnect();
  if (values.save !== undefined) writeFileSync(values.save, JSON.stringify(profile));
  requests = result.requests;
  headline = `${variant.name}, c=${values.concurrency}: ${result.rps.toFixed(0)} req/s, ${result.requests} requests`;
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);
const short = (url: string): string => {
  if (url === '') return '(native)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m !== null) return m[1]!;
  const src = /\/(src|bench)\/(.*)$/.exec(url);
  if (src !== null) return `${src[1]}/${src[2]}`;
  return url.replace(/^node:/, 'node:');
};
const fnSelf = new Map<string, number>();
const modSelf = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  const { functionName, url, lineNumber } = node.callFrame;
  const key = `${functionName || '(anonymous)'} ${short(url)}:${lineNumber + 1}`;
  fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
  const mod = short(url).startsWith('node:') ? 'node: built-ins' : short(url);
  modSelf.set(mod, (modSelf.get(mod) ?? 0) + us);
}
const perRequest = (us: number): string => `${(us / requests).toFixed(1)} µs/req`;
console.log(`${headline}; sampled ${perRequest(totalUs)}`);
const show = (title: string, m: Map<string, number>, n: number): void => {
  console.log(`\n${title}`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n)) {
    console.log(`  ${((100 * us) / totalUs).toFixed(1).padStart(5)} %  ${perRequest(us).padStart(14)}  ${k}`);
  }
};
show('self time by module', modSelf, 15);
if (values.callers !== undefined) {
  // Self time of the named function, by its caller chain (three frames up).
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const chains = new Map<string, number>();
  for (const [id, us] of selfUs) {
    if (byId.get(id)!.callFrame.functionName !== values.callers) continue;
    const names: string[] = [];
    for (let p = parent.get(id), i = 0; p !== undefined && i < 4; p = parent.get(p), i++) {
      const f = byId.get(p)!.callFrame;
      names.push(`${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}`);
    }
    const key = names.join(' < ');
    chains.set(key, (chains.get(key) ?? 0) + us);
  }
  show(`callers of ${values.callers}`, chains, 12);
}
show('self time by function', fnSelf, Number(values.top));
