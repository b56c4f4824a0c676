/**
 * Reads every source file under `src/` (files.ts) once with the TypeScript parser (no type checking:
 * a syntax tree per file is all the checks need) and collects, per file, what it imports, the string
 * literals that read as SQL (sql.ts), its calls of what only the composition root may build (root.ts),
 * under their own names or another (aliases.ts), the imports whose module no literal names, a centre
 * file's references to I/O globals (scope.ts), and the getters and setters over 80 lines.
 */
import { readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, posix } from 'node:path';
import { AliasResolver, type Candidate, emptyBindings, type FileBindings, type Ref } from './aliases.js';
import { isCentre } from './checks.js';
import { scriptKind, sourceFiles } from './files.js';
import { type RootCall, rootOnly, rootOnlyName } from './root.js';
import { CENTRE_GLOBALS, isGlobalReference } from './scope.js';
import { readsAsSql, startsAsSql } from './sql.js';
import { type TS, ts } from './ts.js';

/** One import of a file: static, re-export, dynamic `import()`, `import('…')` type, or `require`. */
export interface ImportRef {
  /** The importing file, relative to the root (`src/a/b.ts`). */
  from: string;
  /** The specifier as written. */
  specifier: string;
  /** The file a relative specifier names (`.js` mapped to `.ts`), relative to the root; else null. */
  target: string | null;
  /** A package or builtin: `node:fs`, `zod`, `better-sqlite3`; null for a relative specifier. */
  module: string | null;
  /** Nothing of it survives compilation (`import type`, every name `type`, an `import('…')` type). */
  typeOnly: boolean;
  line: number;
}

/** A place in a file, with what is there: the SQL text, the import's source, the global's name. */
export interface Hit {
  file: string;
  line: number;
  text: string;
}

export interface Scan {
  /** Every source file under `src/` (and every file the build compiles), relative to the root, sorted. */
  files: string[];
  imports: ImportRef[];
  /** String or template literals that read as SQL. */
  sql: Hit[];
  /** Calls of root-only factories and constructors (`openDb(`, `new Tmux(`), wherever they are. */
  calls: RootCall[];
  /** `import(…)` / `require(…)` of something other than a literal: the graph cannot see it. */
  dynamicImports: Hit[];
  /** References to an I/O global (`process`, `fetch` …) in centre files; text is the name. */
  globals: Hit[];
  /** Getters and setters over ACCESSOR_MAX_LINES; text is `get name (n lines)`. */
  accessors: Hit[];
  /** Files over FILE_MAX_LINES lines as `wc -l` counts them (Biome's file rule counts fewer). */
  longFiles: Hit[];
}

export const FILE_MAX_LINES = 400;

/** As Biome's function rule counts (78 body lines), plus the signature and closing brace lines. */
export const ACCESSOR_MAX_LINES = 80;

const BUILTINS = new Set(builtinModules);

export function scanSources(root: string): Scan {
  const files = sourceFiles(root);
  const known = new Set(files);
  const scan: Scan = {
    files,
    imports: [],
    sql: [],
    calls: [],
    dynamicImports: [],
    globals: [],
    accessors: [],
    longFiles: [],
  };
  const bindings = new Map<string, FileBindings>();
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
    if (lines > FILE_MAX_LINES) scan.longFiles.push({ file, line: 1, text: `${lines} lines` });
    // JSDoc left unparsed: a comment is never an import nor SQL, and skipping it saves a fifth of the time.
    const source = ts.createSourceFile(
      file,
      text,
      { languageVersion: ts.ScriptTarget.Latest, jsDocParsingMode: ts.JSDocParsingMode.ParseNone },
      false,
      scriptKind(file),
    );
    const own = emptyBindings();
    bindings.set(file, own);
    walk(source, sinks(root, known, file, source, scan, own), isCentre(file));
  }
  const resolver = new AliasResolver(bindings, rootOnlyName);
  for (const [file, own] of bindings) {
    for (const { callee, isNew, line } of own.candidates) {
      const origin = resolver.origin(file, callee);
      const builds = origin ? rootOnly(origin, isNew) : null;
      if (!origin || !builds) continue;
      const name = callee.kind === 'local' ? callee.name : `${callee.ns}.${callee.prop}`;
      scan.calls.push({ file, line, call: `${isNew ? 'new ' : ''}${name}(`, origin, builds });
    }
  }
  scan.calls.sort((a, b) => (a.file === b.file ? a.line - b.line : a.file < b.file ? -1 : 1));
  return scan;
}

interface Sinks {
  lineOf(node: TS.Node): number;
  addImport(specifier: string, typeOnly: boolean, node: TS.Node): string | null;
  addText(value: string, node: TS.Node, sqlArgument: boolean): void;
  addCall(callee: Ref & { kind: 'local' | 'member' }, isNew: boolean, node: TS.Node): void;
  addHit(list: 'dynamicImports' | 'globals' | 'accessors', text: string, node: TS.Node): void;
  bindings: FileBindings;
}

function sinks(
  root: string,
  known: ReadonlySet<string>,
  file: string,
  source: TS.SourceFile,
  scan: Scan,
  bindings: FileBindings,
): Sinks {
  const lineOf = (node: TS.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const seen = new Set<number>();
  return {
    lineOf,
    bindings,
    addImport: (specifier, typeOnly, node) => {
      const resolved = resolve(root, known, file, specifier);
      scan.imports.push({ from: file, specifier, typeOnly, line: lineOf(node), ...resolved });
      return resolved.target;
    },
    addText: (value, node, sqlArgument) => {
      if (!readsAsSql(value) && !(sqlArgument && startsAsSql(value))) return;
      const line = lineOf(node);
      if (seen.has(line)) return;
      seen.add(line);
      scan.sql.push({ file, line, text: value });
    },
    addCall: (callee, isNew, node) => {
      const name = callee.kind === 'local' ? callee.name : callee.prop;
      const builds = rootOnly(name, isNew);
      const line = lineOf(node);
      if (builds)
        scan.calls.push({ file, line, call: `${isNew ? 'new ' : ''}${name}(`, origin: name, builds });
      else if (!rootOnlyName(name)) bindings.candidates.push({ callee, isNew, line } satisfies Candidate);
    },
    addHit: (list, text, node) => scan[list].push({ file, line: lineOf(node), text }),
  };
}

function walk(source: TS.SourceFile, sink: Sinks, centre: boolean): void {
  const ancestors: TS.Node[] = [];
  const visit = (node: TS.Node): void => {
    if (visitImport(node, sink)) return;
    collectBindings(node, sink, ancestors);
    if (ts.isCallExpression(node) && isImportOrRequire(node)) {
      const [first] = node.arguments;
      if (first && ts.isStringLiteralLike(first)) sink.addImport(first.text, false, node);
      else sink.addHit('dynamicImports', node.getText(source), node);
    } else if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const callee = calleeRef(node.expression);
      if (callee) sink.addCall(callee, ts.isNewExpression(node), node);
    }
    if (ts.isStringLiteralLike(node)) sink.addText(node.text, node, isSqlArgument(node, ancestors));
    else if (ts.isTemplateExpression(node))
      sink.addText(templateText(node), node, isSqlArgument(node, ancestors));
    else if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      const joined = joinedText(node);
      if (joined !== null) sink.addText(joined, node, isSqlArgument(node, ancestors));
    } else if ((ts.isGetAccessor(node) || ts.isSetAccessor(node)) && node.body) {
      const lines = sink.lineOf(node.body.getLastToken(source) ?? node.body) - sink.lineOf(node) + 1;
      const kind = ts.isGetAccessor(node) ? 'get' : 'set';
      if (lines > ACCESSOR_MAX_LINES)
        sink.addHit('accessors', `${kind} ${node.name.getText(source)} (${lines} lines)`, node);
    } else if (centre && ts.isIdentifier(node) && CENTRE_GLOBALS.has(node.text)) {
      if (isGlobalReference(node, ancestors)) sink.addHit('globals', node.text, node);
    }
    ancestors.push(node);
    ts.forEachChild(node, visit);
    ancestors.pop();
  };
  visit(source);
}

/** Static imports and re-exports (recorded with their bindings); true when the node is one. */
function visitImport(node: TS.Node, sink: Sinks): boolean {
  if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
    const target = sink.addImport(node.moduleSpecifier.text, importIsTypeOnly(node), node);
    const clause = node.importClause;
    if (clause?.name) sink.bindings.locals.set(clause.name.text, { kind: 'import', target, name: 'default' });
    const named = clause?.namedBindings;
    if (named && ts.isNamespaceImport(named)) sink.bindings.namespaces.set(named.name.text, target);
    else if (named)
      for (const e of named.elements)
        sink.bindings.locals.set(e.name.text, {
          kind: 'import',
          target,
          name: (e.propertyName ?? e.name).text,
        });
    return true;
  }
  if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
    const target = sink.addImport(node.moduleSpecifier.text, exportIsTypeOnly(node), node);
    const clause = node.exportClause;
    if (!clause) sink.bindings.stars.push(target);
    else if (ts.isNamespaceExport(clause)) sink.bindings.namespaces.set(`\0${clause.name.text}`, target);
    else
      for (const e of clause.elements)
        sink.bindings.exports.set(e.name.text, {
          kind: 'import',
          target,
          name: (e.propertyName ?? e.name).text,
        });
    return true;
  }
  if (
    ts.isImportEqualsDeclaration(node) &&
    ts.isExternalModuleReference(node.moduleReference) &&
    ts.isStringLiteral(node.moduleReference.expression)
  ) {
    const target = sink.addImport(node.moduleReference.expression.text, node.isTypeOnly, node);
    sink.bindings.namespaces.set(node.name.text, target);
    return true;
  }
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
    const literal = node.argument.literal;
    if (ts.isStringLiteral(literal)) sink.addImport(literal.text, true, node);
  }
  return false;
}

/** Local exports and `const` aliases: what each name stands for (aliases.ts). */
function collectBindings(node: TS.Node, { bindings }: Sinks, ancestors: readonly TS.Node[]): void {
  if (
    ts.isExportDeclaration(node) &&
    !node.moduleSpecifier &&
    node.exportClause &&
    ts.isNamedExports(node.exportClause)
  ) {
    for (const e of node.exportClause.elements)
      bindings.exports.set(e.name.text, { kind: 'local', name: (e.propertyName ?? e.name).text });
  } else if (ts.isExportAssignment(node) && ts.isIdentifier(node.expression)) {
    bindings.exports.set('default', { kind: 'local', name: node.expression.text });
  } else if ((ts.isClassDeclaration(node) || ts.isFunctionDeclaration(node)) && node.name) {
    const modifiers = ts.canHaveModifiers(node) ? (ts.getModifiers(node) ?? []) : [];
    const exported = modifiers.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const isDefault = modifiers.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword);
    if (exported)
      bindings.exports.set(isDefault ? 'default' : node.name.text, { kind: 'local', name: node.name.text });
  } else if (ts.isVariableDeclaration(node) && node.initializer) {
    const init = unwrap(node.initializer);
    if (ts.isIdentifier(node.name)) {
      const ref = valueRef(init);
      if (ref) bindings.locals.set(node.name.text, ref);
      if (isExportedVariable(ancestors))
        bindings.exports.set(node.name.text, { kind: 'local', name: node.name.text });
    } else if (ts.isObjectBindingPattern(node.name)) {
      for (const e of node.name.elements) {
        if (!ts.isIdentifier(e.name)) continue;
        const prop = e.propertyName && ts.isIdentifier(e.propertyName) ? e.propertyName.text : e.name.text;
        // From a namespace (`const { open } = db`), or anything else: then only a root-only name counts.
        bindings.locals.set(e.name.text, {
          kind: 'member',
          ns: ts.isIdentifier(init) ? init.text : '',
          prop,
        });
      }
    }
  }
}

/** The declaration's statement (its list's parent) is `export const …`. */
function isExportedVariable(ancestors: readonly TS.Node[]): boolean {
  const statement = ancestors.at(-2);
  return (
    !!statement &&
    ts.isVariableStatement(statement) &&
    (ts.getModifiers(statement) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
  );
}

/** `X`, `ns.X` (through parentheses, `await`, `as`, `!`): what a `const` is set to. */
const valueRef = (init: TS.Expression): Ref | null => calleeRef(init);

function unwrap(node: TS.Expression): TS.Expression {
  let n = node;
  while (
    ts.isParenthesizedExpression(n) ||
    ts.isAwaitExpression(n) ||
    ts.isAsExpression(n) ||
    ts.isNonNullExpression(n) ||
    ts.isSatisfiesExpression(n)
  )
    n = n.expression;
  return n;
}

/** `f` of `f(…)`, `ns.f(…)`, `new C(…)`, `new ns.C(…)` (through parentheses); null for any other. */
function calleeRef(expression: TS.Expression): (Ref & { kind: 'local' | 'member' }) | null {
  const callee = unwrap(expression);
  if (ts.isIdentifier(callee)) return { kind: 'local', name: callee.text };
  if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.name)) {
    const left = unwrap(callee.expression);
    return { kind: 'member', ns: ts.isIdentifier(left) ? left.text : '', prop: callee.name.text };
  }
  return null;
}

/** The first argument of `x.prepare(…)` / `x.exec(…)`. */
function isSqlArgument(node: TS.Node, ancestors: readonly TS.Node[]): boolean {
  const parent = ancestors.at(-1);
  if (!parent || !ts.isCallExpression(parent) || parent.arguments[0] !== node) return false;
  const callee = parent.expression;
  return ts.isPropertyAccessExpression(callee) && /^(?:prepare|exec)$/.test(callee.name.text);
}

function templateText(node: TS.TemplateExpression): string {
  return node.head.text + node.templateSpans.map((s) => `?${s.literal.text}`).join('');
}

function importIsTypeOnly(node: TS.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false; // a side-effect import runs the module
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  if (clause.name || !bindings || !ts.isNamedImports(bindings)) return false;
  return bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function exportIsTypeOnly(node: TS.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return (
    !!clause &&
    ts.isNamedExports(clause) &&
    clause.elements.length > 0 &&
    clause.elements.every((e) => e.isTypeOnly)
  );
}

function isImportOrRequire(node: TS.CallExpression): boolean {
  if (node.expression.kind === ts.SyntaxKind.ImportKeyword) return true;
  return ts.isIdentifier(node.expression) && node.expression.text === 'require';
}

/** `'SELECT a ' + 'FROM t'`: the literal parts of a `+` chain joined (`?` for the rest), or null. */
function joinedText(node: TS.BinaryExpression): string | null {
  const parts: string[] = [];
  let literals = 0;
  const flatten = (n: TS.Expression): void => {
    if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      flatten(n.left);
      flatten(n.right);
    } else if (ts.isParenthesizedExpression(n)) flatten(n.expression);
    else if (ts.isStringLiteralLike(n)) {
      literals++;
      parts.push(n.text);
    } else if (ts.isTemplateExpression(n)) {
      literals++;
      parts.push(templateText(n));
    } else parts.push('?');
  };
  flatten(node);
  return literals >= 2 ? parts.join('') : null;
}

function resolve(
  root: string,
  known: ReadonlySet<string>,
  from: string,
  specifier: string,
): { target: string | null; module: string | null } {
  if (specifier.startsWith('.')) return { target: resolveFile(root, known, from, specifier), module: null };
  if (specifier.startsWith('node:')) return { target: null, module: specifier };
  if (BUILTINS.has(specifier)) return { target: null, module: `node:${specifier}` };
  return { target: null, module: specifier };
}

/** The file a relative specifier names: `./x.js` is `./x.ts` (NodeNext), `./dir` is `./dir/index.ts`. */
function resolveFile(root: string, known: ReadonlySet<string>, from: string, specifier: string): string {
  const base = posix.normalize(posix.join(dirname(from), specifier));
  const mapped = base
    .replace(/\.js$/, '.ts')
    .replace(/\.mjs$/, '.mts')
    .replace(/\.cjs$/, '.cts');
  const candidates = [mapped, base, `${base}.ts`, `${base}/index.ts`];
  return candidates.find((c) => known.has(c) || isFile(join(root, c))) ?? mapped;
}

function isFile(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isFile() ?? false;
}
