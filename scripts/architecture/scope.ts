/**
 * The centre reaches no I/O through globals: in a centre file, a value reference to `process`,
 * `fetch`, `require`, `globalThis`, `XMLHttpRequest` or `WebSocket` that no enclosing scope declares
 * (a parameter named `fetch` is the port it was handed; `typeof fetch` in a type is no call) is the
 * global, and a finding. `process.platform` included: the centre is handed what it needs.
 */
import { type TS, ts } from './ts.js';

export const CENTRE_GLOBALS: ReadonlySet<string> = new Set([
  'process',
  'fetch',
  'require',
  'globalThis',
  'XMLHttpRequest',
  'WebSocket',
]);

/** Whether `node` (one of CENTRE_GLOBALS), under `ancestors` (outermost first), is the global. */
export function isGlobalReference(node: TS.Identifier, ancestors: readonly TS.Node[]): boolean {
  const parent = ancestors.at(-1);
  if (!parent || !isValuePosition(node, parent, ancestors.at(-3))) return false;
  for (let i = ancestors.length - 1; i >= 0; i--) {
    const scope = ancestors[i] as TS.Node;
    if (isTypePosition(scope, ancestors[i - 1], ancestors[i - 2])) return false;
    if (declares(scope, node.text)) return false;
  }
  return true;
}

function isValuePosition(node: TS.Identifier, parent: TS.Node, declaration: TS.Node | undefined): boolean {
  if (ts.isShorthandPropertyAssignment(parent)) return true;
  if (ts.isPropertyAccessExpression(parent)) return parent.name !== node;
  if (ts.isQualifiedName(parent)) return parent.right !== node;
  if (ts.isExportSpecifier(parent)) {
    const reexport = !!declaration && ts.isExportDeclaration(declaration) && !!declaration.moduleSpecifier;
    return !reexport && (parent.propertyName ?? parent.name) === node;
  }
  if (ts.isImportSpecifier(parent) || ts.isImportClause(parent) || ts.isNamespaceImport(parent)) return false;
  if (ts.isBindingElement(parent)) return parent.initializer === node;
  if (
    ts.isLabeledStatement(parent) ||
    ts.isBreakOrContinueStatement(parent) ||
    ts.isPropertyAssignment(parent)
  )
    return (parent as { initializer?: TS.Node }).initializer === node;
  const named = parent as { name?: TS.Node };
  return named.name !== node;
}

/** A type (`typeof fetch`, `: WebSocket`), but not a class's `extends` expression. */
function isTypePosition(
  node: TS.Node,
  parent: TS.Node | undefined,
  grandparent: TS.Node | undefined,
): boolean {
  if (!ts.isTypeNode(node)) return false;
  if (!ts.isExpressionWithTypeArguments(node)) return true;
  return !(
    parent &&
    ts.isHeritageClause(parent) &&
    parent.token === ts.SyntaxKind.ExtendsKeyword &&
    !!grandparent &&
    ts.isClassLike(grandparent)
  );
}

function declares(scope: TS.Node, name: string): boolean {
  if (ts.isFunctionLike(scope)) {
    if (scope.parameters.some((p) => bindingNames(p.name).includes(name))) return true;
    const own = (scope as { name?: TS.Node }).name;
    return !!own && ts.isFunctionExpression(scope) && ts.isIdentifier(own) && own.text === name;
  }
  if (ts.isClassExpression(scope)) return scope.name?.text === name;
  if (ts.isCatchClause(scope)) {
    const v = scope.variableDeclaration;
    return !!v && bindingNames(v.name).includes(name);
  }
  if (ts.isForStatement(scope) || ts.isForInStatement(scope) || ts.isForOfStatement(scope)) {
    const init = scope.initializer;
    return (
      !!init &&
      ts.isVariableDeclarationList(init) &&
      init.declarations.some((d) => bindingNames(d.name).includes(name))
    );
  }
  if (
    ts.isBlock(scope) ||
    ts.isSourceFile(scope) ||
    ts.isModuleBlock(scope) ||
    ts.isCaseClause(scope) ||
    ts.isDefaultClause(scope)
  )
    return scope.statements.some((s) => statementDeclares(s, name));
  return false;
}

function statementDeclares(statement: TS.Statement, name: string): boolean {
  if (ts.isVariableStatement(statement))
    return statement.declarationList.declarations.some((d) => bindingNames(d.name).includes(name));
  if (
    ts.isFunctionDeclaration(statement) ||
    ts.isClassDeclaration(statement) ||
    ts.isEnumDeclaration(statement) ||
    ts.isModuleDeclaration(statement)
  )
    return !!statement.name && ts.isIdentifier(statement.name) && statement.name.text === name;
  if (ts.isImportDeclaration(statement)) {
    const clause = statement.importClause;
    if (!clause || clause.isTypeOnly) return false;
    if (clause.name?.text === name) return true;
    const bindings = clause.namedBindings;
    if (!bindings) return false;
    if (ts.isNamespaceImport(bindings)) return bindings.name.text === name;
    return bindings.elements.some((e) => !e.isTypeOnly && e.name.text === name);
  }
  if (ts.isImportEqualsDeclaration(statement)) return statement.name.text === name;
  return false;
}

export function bindingNames(name: TS.BindingName): string[] {
  if (ts.isIdentifier(name)) return [name.text];
  return name.elements.flatMap((e) => (ts.isOmittedExpression(e) ? [] : bindingNames(e.name)));
}
