#!/usr/bin/env node
// `npm run check:tsdoc`: every public export carries the TSDoc that STYLE.md asks
// for ("TSDoc on every export, with @default and a short @example").
//
// Public = every symbol exported by an entry point: the typedoc.json
// "entryPoints", plus any other source file the package.json exports map
// builds from (src/browser.ts, the `browser` condition of "."). Re-exports are
// followed to the declaration they name, so a symbol exported by several
// entries is checked once, where it is written.
//
// Rules
// - Every exported function, class, variable (const), enum, interface and type
//   alias has a summary (text before the first block tag) and an `@example`
//   block. For an overloaded function, one signature carrying both is enough.
// - Every optional property of an exported interface or type alias whose name
//   ends in `Options` (RetryOptions, OnceClientOptions, SqliteStoreOptions, …),
//   its inherited properties included, has a `@default` (or `@defaultValue`)
//   tag. `@default` may close a one-line comment: `/** cap of one delay @default 10000 */`.
//
// Convention for an option with no meaningful default value: `@default undefined`,
// optionally followed by what leaving it out means, in parentheses:
//   /** abort the recovery @default undefined */
//   /** … @default undefined (open `path`) */
// Never "(no default)" or an empty tag: the docs then show the same
// "Default Value" heading on every optional option, and a reader sees that
// absence is a state, not an oversight. typedoc renders a plain `@default` body
// as code, and one holding inline code or {@link} as Markdown, so a default
// that is computed rather than literal is written in words with inline code:
//   @default SQLite at `./.oncefetch/oncefetch.db` on Node
//
// Declarations tagged `@internal` are skipped, as typedoc ("excludeInternal") does.
//
// Prints one line per missing item, `file:line symbol: missing @example`, and
// exits 1 when there is any; otherwise prints a one-line tally and exits 0.
//
//   node scripts/check-tsdoc.mjs          check
//   node scripts/check-tsdoc.mjs --list   also list every checked export
/* global process, console, URL */
import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const listAll = process.argv.includes('--list');

/** typedoc.json entry points, then the sources of the exports map's other targets. */
function entryPoints() {
  const typedoc = JSON.parse(readFileSync(resolve(root, 'typedoc.json'), 'utf8'));
  const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8'));
  const entries = new Set(typedoc.entryPoints.map((p) => resolve(root, p)));
  const targets = (value) => (typeof value === 'string' ? [value] : Object.values(value ?? {}).flatMap(targets));
  for (const target of targets(pkg.exports)) {
    if (!/^\.\/dist\/.*\.(js|d\.ts)$/.test(target)) continue;
    entries.add(resolve(root, target.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$|\.js$/, '.ts')));
  }
  return [...entries];
}

function createProgram(rootNames) {
  const config = ts.getParsedCommandLineOfConfigFile(resolve(root, 'tsconfig.build.json'), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  return ts.createProgram({ rootNames, options: { ...config.options, noEmit: true } });
}

/** The JSDoc block that applies to a declaration (the last one written above it). */
function jsDocOf(node) {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  return docs.at(-1);
}

/** Raw comment text without the `/**`, `*\/` and leading asterisks. */
function commentText(doc) {
  return doc
    .getText()
    .replace(/^\/\*\*/, '')
    .replace(/\*\/$/, '')
    .split('\n')
    .map((line) => line.replace(/^\s*\*?\s?/, ''))
    .join('\n');
}

/** A block tag: `@name` at the start of a line or after whitespace, outside `{@link …}`. */
function hasTag(text, names) {
  const pattern = new RegExp(`(^|\\s)@(${names.join('|')})(?![\\w-])`, 'm');
  return pattern.test(text.replace(/\{@[^}]*\}/g, ''));
}

function summaryOf(text) {
  const cut = text.replace(/\{@[^}]*\}/g, 'x').search(/(^|\s)@[a-zA-Z]/m);
  return (cut === -1 ? text : text.slice(0, cut)).trim();
}

function isInternal(doc) {
  return doc !== undefined && hasTag(commentText(doc), ['internal']);
}

function kindOf(node) {
  if (ts.isFunctionDeclaration(node)) return 'function';
  if (ts.isClassDeclaration(node)) return 'class';
  if (ts.isVariableDeclaration(node)) return 'const';
  if (ts.isInterfaceDeclaration(node)) return 'interface';
  if (ts.isTypeAliasDeclaration(node)) return 'type';
  if (ts.isEnumDeclaration(node)) return 'enum';
  return undefined;
}

const program = createProgram(entryPoints());
const checker = program.getTypeChecker();
const problems = [];
const checked = [];
const seen = new Set();

function where(node) {
  const sf = node.getSourceFile();
  const { line } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
  return `${relative(root, sf.fileName)}:${line + 1}`;
}

function inProject(node) {
  const file = node.getSourceFile().fileName;
  return !file.includes('/node_modules/') && file.startsWith(resolve(root, 'src'));
}

/** Optional properties of an `…Options` type lack `@default`. */
function checkOptions(name, decl) {
  const type = checker.getDeclaredTypeOfSymbol(checker.getSymbolAtLocation(decl.name));
  for (const prop of checker.getPropertiesOfType(type)) {
    if ((prop.flags & ts.SymbolFlags.Optional) === 0) continue;
    for (const pd of prop.declarations ?? []) {
      if (!inProject(pd) || seen.has(pd)) continue;
      seen.add(pd);
      const doc = jsDocOf(pd);
      if (isInternal(doc)) continue;
      const owner = pd.parent && ts.isInterfaceDeclaration(pd.parent) ? pd.parent.name.text : name;
      const text = doc === undefined ? '' : commentText(doc);
      if (summaryOf(text) === '') problems.push(`${where(pd)} ${owner}.${prop.name}: missing summary`);
      if (!hasTag(text, ['default', 'defaultValue'])) problems.push(`${where(pd)} ${owner}.${prop.name}: missing @default`);
    }
  }
}

function checkSymbol(exportName, symbol) {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const decls = (target.declarations ?? []).filter((d) => kindOf(d) !== undefined && inProject(d));
  // Function overloads are one export; anything else is checked per declaration
  // (a const and a type sharing a name are two entries in the docs).
  const groups = new Map();
  for (const d of decls) {
    if (seen.has(d)) continue;
    seen.add(d);
    const key = kindOf(d) === 'function' ? 'function' : d;
    groups.set(key, [...(groups.get(key) ?? []), d]);
  }
  for (const group of groups.values()) {
    const docs = group.map(jsDocOf).filter((d) => d !== undefined);
    if (docs.some(isInternal)) continue;
    const texts = docs.map(commentText);
    const first = group[0];
    const kind = kindOf(first);
    const name = target.name === 'default' ? exportName : target.name;
    checked.push(`${where(first)} ${kind} ${name}`);
    if (!texts.some((t) => summaryOf(t) !== '')) problems.push(`${where(first)} ${name}: missing summary`);
    if (!texts.some((t) => hasTag(t, ['example']))) problems.push(`${where(first)} ${name}: missing @example`);
    if ((kind === 'interface' || kind === 'type') && name.endsWith('Options')) checkOptions(name, first);
  }
}

for (const file of entryPoints()) {
  const sf = program.getSourceFile(file);
  if (sf === undefined) {
    problems.push(`${relative(root, file)}:1 (entry point): not found`);
    continue;
  }
  const moduleSymbol = checker.getSymbolAtLocation(sf);
  if (moduleSymbol === undefined) continue;
  for (const symbol of checker.getExportsOfModule(moduleSymbol)) checkSymbol(symbol.name, symbol);
}

if (listAll) for (const line of checked.sort()) console.log(line);
for (const line of problems.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))) console.log(line);
if (problems.length > 0) {
  console.log(`check-tsdoc: ${problems.length} missing across ${checked.length} exports`);
  process.exit(1);
}
console.log(`check-tsdoc: ${checked.length} exports documented, each with a summary and @example; every optional option has @default`);
