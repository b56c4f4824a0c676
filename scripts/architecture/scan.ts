/**
 * Reads every TypeScript file under `src/` once with the TypeScript parser (no type checking: a
 * syntax tree per file is all the checks need) and collects, per file, what it imports, the string
 * literals that read as SQL, and its calls of what only the composition root may build (root.ts).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, join, posix } from 'node:path';
import type * as TS from 'typescript';
import { type RootCall, rootOnly } from './root.js';

// Required, not imported: tsx sends an `import` of the compiler's one 9 MB file through its
// transform (1.3 s here); a plain require loads it in a third of that.
const ts = createRequire(import.meta.url)('typescript') as typeof TS;

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

/** A string or template literal outside the store that reads as SQL. */
export interface SqlHit {
  file: string;
  line: number;
  text: string;
}

export interface Scan {
  /** Every `.ts` file under `src/`, relative to the root, sorted. */
  files: string[];
  imports: ImportRef[];
  sql: SqlHit[];
  /** Calls of root-only factories and constructors (`openDb(`, `new Tmux(`), wherever they are. */
  calls: RootCall[];
}

/**
 * SQL as this codebase writes it: keywords in upper case, in the shape of a statement. Prose ("select
 * a file from the list", "delete from the queue") is lower case, and an HTTP method name alone
 * ('DELETE', 'UPDATE') is not a statement, so neither trips it.
 */
export const SQL =
  /\b(?:SELECT\b[\s\S]*?\bFROM|INSERT\s+(?:OR\s+[A-Z]+\s+)?INTO|REPLACE\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|(?:CREATE|DROP)\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)|ALTER\s+TABLE|PRAGMA\s+\w+|BEGIN\s+(?:IMMEDIATE|EXCLUSIVE|DEFERRED))\b/;

const BUILTINS = new Set(builtinModules);

export function scanSources(root: string): Scan {
  const files = listTs(root, 'src');
  const known = new Set(files);
  const imports: ImportRef[] = [];
  const sql: SqlHit[] = [];
  const calls: RootCall[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    // JSDoc left unparsed: a comment is never an import nor SQL, and skipping it saves a fifth of the time.
    const source = ts.createSourceFile(
      file,
      text,
      { languageVersion: ts.ScriptTarget.Latest, jsDocParsingMode: ts.JSDocParsingMode.ParseNone },
      false,
      ts.ScriptKind.TS,
    );
    const lineOf = (node: TS.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    const addImport = (specifier: string, typeOnly: boolean, node: TS.Node) =>
      imports.push({
        from: file,
        specifier,
        typeOnly,
        line: lineOf(node),
        ...resolve(root, known, file, specifier),
      });
    const seen = new Set<number>();
    const addText = (value: string, node: TS.Node) => {
      if (!SQL.test(value)) return;
      const line = lineOf(node);
      if (seen.has(line)) return;
      seen.add(line);
      sql.push({ file, line, text: value });
    };
    const addCall: CallSink = (name, isNew, node) => {
      const builds = rootOnly(name, isNew);
      if (builds) calls.push({ file, line: lineOf(node), call: `${isNew ? 'new ' : ''}${name}(`, builds });
    };
    walk(source, { addImport, addText, addCall });
  }
  return { files, imports, sql, calls };
}

function listTs(root: string, dir: string): string[] {
  if (!existsSync(join(root, dir))) return [];
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...listTs(root, path));
    else if (entry.isFile() && /\.(?:ts|mts|cts)$/.test(entry.name) && !entry.name.endsWith('.d.ts'))
      out.push(path);
  }
  return out.sort();
}

type ImportSink = (specifier: string, typeOnly: boolean, node: TS.Node) => void;
type TextSink = (value: string, node: TS.Node) => void;
type CallSink = (name: string, isNew: boolean, node: TS.Node) => void;

function walk(
  source: TS.SourceFile,
  { addImport, addText, addCall }: { addImport: ImportSink; addText: TextSink; addCall: CallSink },
): void {
  const visit = (node: TS.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      addImport(node.moduleSpecifier.text, importIsTypeOnly(node), node);
      return;
    }
    if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      addImport(node.moduleSpecifier.text, exportIsTypeOnly(node), node);
      return;
    }
    if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      addImport(node.moduleReference.expression.text, node.isTypeOnly, node);
      return;
    }
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal)) addImport(literal.text, true, node);
    }
    if (ts.isCallExpression(node) && isImportOrRequire(node)) {
      const [first] = node.arguments;
      if (first && ts.isStringLiteralLike(first)) addImport(first.text, false, node);
    } else if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
      const name = calleeName(node.expression);
      if (name) addCall(name, ts.isNewExpression(node), node);
    }
    if (ts.isStringLiteralLike(node)) addText(node.text, node);
    else if (ts.isTemplateExpression(node))
      addText(node.head.text + node.templateSpans.map((s) => `?${s.literal.text}`).join(''), node);
    else if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      const joined = joinedText(node);
      if (joined !== null) addText(joined, node);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

/** `f` of `f(…)`, `ns.f(…)`, `new C(…)`, `new ns.C(…)`; null for any other callee. */
function calleeName(callee: TS.Expression): string | null {
  if (ts.isIdentifier(callee)) return callee.text;
  if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.name)) return callee.name.text;
  return null;
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
      parts.push(n.head.text + n.templateSpans.map((s) => `?${s.literal.text}`).join(''));
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
