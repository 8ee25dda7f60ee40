/**
 * Type-checking the emitted declarations as a consumer project sees them (test/package/*-types).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** Runs this repository's tsc; its exit code and its output. */
export function tsc(args: string[], cwd: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [TSC, ...args], { cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, out: `${stdout}${stderr}` });
    });
  });
}

/** Emits the declarations of src/ (as `npm run build` does) into `<project>/node_modules/oncefetch`, with its package.json. */
export function emitAsPackage(project: string): Promise<{ code: number; out: string }> {
  const pkg = join(project, 'node_modules', 'oncefetch');
  mkdirSync(pkg, { recursive: true });
  copyFileSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  return tsc(['-p', join(ROOT, 'tsconfig.build.json'), '--emitDeclarationOnly', '--declarationMap', 'false', '--sourceMap', 'false', '--outDir', join(pkg, 'dist')], ROOT);
}

/** Writes `source` as `<project>/<file>` with a tsconfig of `compilerOptions` for it alone, and type-checks it. */
export function typecheck(project: string, file: string, source: string, compilerOptions: Record<string, unknown>): Promise<{ code: number; out: string }> {
  writeFileSync(join(project, file), source);
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: [file] }));
  return tsc(['-p', 'tsconfig.json'], project);
}
