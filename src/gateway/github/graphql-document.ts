import { createRequire } from 'node:module';
import type {
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  OperationDefinitionNode,
  SelectionNode,
} from 'graphql';

let lib: typeof import('graphql') | undefined;
/**
 * graphql-js, loaded on the first GraphQL request the gateway judges: it takes 50–300 ms to load
 * (its index requires every module), and most processes never see one (`the-loop run` of a turn
 * that makes no GitHub GraphQL call, every other command).
 */
export function graphql(): typeof import('graphql') {
  lib ??= createRequire(import.meta.url)('graphql') as typeof import('graphql');
  return lib;
}

/**
 * A GitHub GraphQL request body read the way its judges (`graphql-acts.ts`, `graphql-access.ts`)
 * need it: one operation object or a batch of them, each document parsed into its operations and
 * fragments, its variables as sent. Pure. Strict: a body that is not one operation object or a batch
 * of them, a document that does not parse or holds anything but operations and fragments, a fragment
 * defined twice — refused, never forwarded unchecked.
 */

export const GRAPHQL_LIMITS = {
  /** Operations in one batch. */
  batch: 25,
  /** Characters of one document; gh's largest queries are a few kilobytes. */
  queryChars: 512 * 1024,
  /** Parser tokens of one document (the parser stops past it, before any deep recursion). */
  tokens: 50_000,
  /** Ref updates of one `updateRefs` judged one by one; past it the whole is one uncertain act. */
  refUpdates: 100,
} as const;

export type Input = Record<string, unknown>;

/** One operation object of the body (a batch entry, or the whole body). */
export interface GraphqlEntry {
  /** Its place in a batch; null when the body is one object. */
  index: number | null;
  operations: OperationDefinitionNode[];
  fragments: Map<string, FragmentDefinitionNode>;
  /** The variables as sent (defaults are per operation: `withDefaults`). */
  variables: Input;
}

export type ParsedGraphql = { refused: string } | { entries: GraphqlEntry[]; batch: boolean };

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads a GraphQL request body (the raw text). */
export function parseGraphqlText(text: string): ParsedGraphql {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { refused: 'the GraphQL request body is not JSON' };
  }
  return parseGraphql(body);
}

/** Reads a parsed GraphQL request body: one operation object, or a batch array of them. */
export function parseGraphql(body: unknown): ParsedGraphql {
  const batch = Array.isArray(body);
  const raw: unknown[] = batch ? body : [body];
  if (raw.length === 0) return { refused: 'the GraphQL batch is empty' };
  if (raw.length > GRAPHQL_LIMITS.batch) {
    return { refused: `a GraphQL batch holds at most ${GRAPHQL_LIMITS.batch} operations` };
  }
  const entries: GraphqlEntry[] = [];
  for (const [index, item] of raw.entries()) {
    const entry = parseEntry(item, batch ? index : null);
    if ('refused' in entry) return batch ? { refused: `batch entry ${index}: ${entry.refused}` } : entry;
    entries.push(entry);
  }
  return { entries, batch };
}

/** Variables as sent: absent, null, an object, or (some servers take it) a JSON string of one. */
function variablesOf(v: unknown): Input | string {
  if (v === undefined || v === null) return {};
  if (isObject(v)) return v;
  if (typeof v === 'string') {
    if (v.trim() === '') return {};
    try {
      const parsed: unknown = JSON.parse(v);
      if (isObject(parsed)) return parsed;
    } catch {
      // Refused below.
    }
  }
  return 'variables must be a JSON object';
}

function parseEntry(item: unknown, index: number | null): { refused: string } | GraphqlEntry {
  if (!isObject(item)) return { refused: 'a GraphQL request must be a JSON object' };
  const { query, operationName } = item;
  if (typeof query !== 'string' || query.trim() === '')
    return { refused: 'query must be a non-empty string' };
  if (query.length > GRAPHQL_LIMITS.queryChars) {
    return { refused: `the GraphQL document is over ${GRAPHQL_LIMITS.queryChars} characters` };
  }
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    return { refused: 'operationName must be a string' };
  }
  const variables = variablesOf(item.variables);
  if (typeof variables === 'string') return { refused: variables };
  let doc: DocumentNode;
  try {
    doc = graphql().parse(query, { noLocation: true, maxTokens: GRAPHQL_LIMITS.tokens });
  } catch (error) {
    // Syntax errors, the token limit, and a stack overflow on absurd nesting all end here.
    const message = error instanceof RangeError ? 'nested too deeply' : (error as Error).message;
    return { refused: `the GraphQL document cannot be parsed: ${message}` };
  }
  const operations: OperationDefinitionNode[] = [];
  const fragments = new Map<string, FragmentDefinitionNode>();
  const { Kind } = graphql();
  for (const def of doc.definitions) {
    if (def.kind === Kind.OPERATION_DEFINITION) operations.push(def);
    else if (def.kind === Kind.FRAGMENT_DEFINITION) {
      // Two fragments of one name: which one a server would read is not ours to guess.
      if (fragments.has(def.name.value)) return { refused: `fragment ${def.name.value} is defined twice` };
      fragments.set(def.name.value, def);
    } else return { refused: 'a GraphQL request holds only operations and fragments' };
  }
  if (operations.length === 0) return { refused: 'the GraphQL document has no operation' };
  return { index, operations, fragments, variables };
}

/** The operation's variables: those sent, else their defaults in the document. */
export function withDefaults(op: OperationDefinitionNode, sent: Input): Input | undefined {
  const out: Input = {};
  try {
    for (const def of op.variableDefinitions ?? []) {
      if (def.defaultValue) out[def.variable.name.value] = graphql().valueFromASTUntyped(def.defaultValue);
    }
  } catch {
    return undefined;
  }
  return { ...out, ...sent };
}

/** What `argValue` answers for a value it cannot read (deeper than the stack, say). */
export const UNREADABLE: unique symbol = Symbol('unreadable');

/** An argument's value with variables resolved; `UNREADABLE` when it cannot be read. */
export function argValue(field: FieldNode, name: string, variables: Input): unknown {
  const arg = field.arguments?.find((a) => a.name.value === name);
  if (!arg) return undefined;
  try {
    return graphql().valueFromASTUntyped(arg.value, variables);
  } catch {
    return UNREADABLE;
  }
}

/**
 * The fields at the top level of an operation — the mutations it runs — with fragment spreads and
 * inline fragments opened (iteratively: nesting depth costs no stack), each fragment once.
 */
export function topLevelFields(
  op: OperationDefinitionNode,
  fragments: Map<string, FragmentDefinitionNode>,
): { refused: string } | { fields: FieldNode[] } {
  const fields: FieldNode[] = [];
  const opened = new Set<string>();
  const stack: SelectionNode[] = [...op.selectionSet.selections].reverse();
  const { Kind } = graphql();
  while (stack.length > 0) {
    const sel = stack.pop() as SelectionNode;
    if (sel.kind === Kind.FIELD) fields.push(sel);
    else if (sel.kind === Kind.INLINE_FRAGMENT) stack.push(...[...sel.selectionSet.selections].reverse());
    else {
      const name = sel.name.value;
      const fragment = fragments.get(name);
      if (!fragment) return { refused: `the GraphQL document spreads an undefined fragment ${name}` };
      if (opened.has(name)) continue;
      opened.add(name);
      stack.push(...[...fragment.selectionSet.selections].reverse());
    }
  }
  return { fields };
}
