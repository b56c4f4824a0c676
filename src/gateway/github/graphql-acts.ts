import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  Kind,
  type OperationDefinitionNode,
  parse,
  type SelectionNode,
  valueFromASTUntyped,
} from 'graphql';
import type { ActDetail, ActKind } from '../../acts/types.js';
import { type ApiAct, apiAct, type Lookup, type NodeType, refWrite } from './wire-act.js';

/**
 * The acts a GitHub GraphQL request is: the mutations it would run that are consequential (merges,
 * ref writes, commits, protection changes), read from the parsed document — aliases, fragments and
 * inline fragments at the top level of a mutation, arguments inline or from variables (and their
 * defaults). Pure. Strict: a body that is not one operation object or a batch of them, a document
 * that does not parse, a fragment that is not defined — refused, never forwarded unchecked. When
 * a document holds several operations, all of them are checked, whatever `operationName` says.
 * Mutations not listed here (createPullRequest, addComment, …) are not acts.
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

export type GraphqlClassification = { refused: string } | { acts: ApiAct[]; batch: boolean };

type Input = Record<string, unknown>;
interface Draft {
  kind: ActKind;
  detail: ActDetail;
  lookup?: Lookup;
}
type Builder = (input: Input) => Draft[];

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const node = (id: unknown, type: NodeType): Lookup | undefined => {
  const s = str(id);
  return s === undefined ? undefined : { kind: 'node', id: s, type };
};

const merge =
  (extra: ActDetail): Builder =>
  (i) => [
    {
      kind: 'pr-merge',
      detail: {
        pr: str(i.pullRequestId),
        mergeMethod: str(i.mergeMethod)?.toLowerCase(),
        ...extra,
        protectedUnknown: true,
      },
      lookup: node(i.pullRequestId, 'PullRequest'),
    },
  ];

const protection =
  (idField: string, type: NodeType): Builder =>
  (i) => [{ kind: 'protection-change', detail: {}, lookup: node(i[idField], type) }];

const ZERO_OID = /^0+$/;

/** `updateRefs`: each ref update is its own act (a push, a forced push, a deletion, a tag). */
const updateRefs: Builder = (i) => {
  const lookup = node(i.repositoryId, 'Repository');
  const updates = Array.isArray(i.refUpdates) ? i.refUpdates : undefined;
  if (!updates || updates.length === 0 || updates.length > GRAPHQL_LIMITS.refUpdates) {
    return [{ ...refWrite(undefined, 'update'), lookup }];
  }
  return updates.map((u) => {
    const update = isObject(u) ? u : {};
    const deleted = typeof update.afterOid === 'string' && ZERO_OID.test(update.afterOid);
    const op = deleted ? 'delete' : update.force === true ? 'force' : 'update';
    return { ...refWrite(str(update.name), op), lookup };
  });
};

/** `createCommitOnBranch`: a push onto `branch.branchName` of `branch.repositoryNameWithOwner` (or a ref id). */
const commitOnBranch: Builder = (i) => {
  const branch = isObject(i.branch) ? i.branch : {};
  const name = str(branch.branchName);
  const repo = str(branch.repositoryNameWithOwner);
  const detail: ActDetail = name === undefined ? { protectedUnknown: true } : { branches: [name] };
  // A branch given by its ref id is placed by the lookup; by name, its repository is in the input.
  const lookup = str(branch.id) !== undefined ? node(branch.id, 'Ref') : undefined;
  return [{ kind: 'git-push', detail: { ...detail, repo }, lookup }];
};

/** The mutations that are acts, and how each reads its input. */
const ACT_MUTATIONS: Record<string, Builder> = {
  mergePullRequest: merge({}),
  enablePullRequestAutoMerge: merge({ auto: true }),
  // The merge queue merges what it is given: as much a merge as the button.
  enqueuePullRequest: merge({ reason: 'merge queue' }),
  mergeBranch: (i) => [
    {
      kind: 'gh-api-merge',
      detail: {
        into: str(i.base),
        sources: str(i.head) === undefined ? undefined : [str(i.head) as string],
        protectedUnknown: str(i.base) === undefined || undefined,
      },
      lookup: node(i.repositoryId, 'Repository'),
    },
  ],
  createRef: (i) => [{ ...refWrite(str(i.name), 'update'), lookup: node(i.repositoryId, 'Repository') }],
  // A ref named by node id: its name (and repository) come from the lookup.
  updateRef: (i) => [
    { ...refWrite(undefined, i.force === true ? 'force' : 'update'), lookup: node(i.refId, 'Ref') },
  ],
  deleteRef: (i) => [{ ...refWrite(undefined, 'delete'), lookup: node(i.refId, 'Ref') }],
  updateRefs,
  createCommitOnBranch: commitOnBranch,
  createBranchProtectionRule: protection('repositoryId', 'Repository'),
  updateBranchProtectionRule: protection('branchProtectionRuleId', 'BranchProtectionRule'),
  deleteBranchProtectionRule: protection('branchProtectionRuleId', 'BranchProtectionRule'),
  createRepositoryRuleset: protection('sourceId', 'Repository'),
  updateRepositoryRuleset: protection('repositoryRulesetId', 'RepositoryRuleset'),
  deleteRepositoryRuleset: protection('repositoryRulesetId', 'RepositoryRuleset'),
};

/** The mutation names that are acts (for tests and documentation). */
export const GRAPHQL_ACT_MUTATIONS: readonly string[] = Object.keys(ACT_MUTATIONS);

/** Classifies a GraphQL request body (the raw text): one operation object, or a batch array of them. */
export function classifyGraphqlBody(text: string): GraphqlClassification {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { refused: 'the GraphQL request body is not JSON' };
  }
  return classifyGraphql(body);
}

/** Classifies a parsed GraphQL request body. */
export function classifyGraphql(body: unknown): GraphqlClassification {
  const batch = Array.isArray(body);
  const entries: unknown[] = batch ? body : [body];
  if (entries.length === 0) return { refused: 'the GraphQL batch is empty' };
  if (entries.length > GRAPHQL_LIMITS.batch) {
    return { refused: `a GraphQL batch holds at most ${GRAPHQL_LIMITS.batch} operations` };
  }
  const acts: ApiAct[] = [];
  for (const [index, entry] of entries.entries()) {
    const found = operationActs(entry, batch ? index : null);
    if ('refused' in found) return batch ? { refused: `batch entry ${index}: ${found.refused}` } : found;
    acts.push(...found.acts);
  }
  return { acts, batch };
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

function operationActs(entry: unknown, index: number | null): { refused: string } | { acts: ApiAct[] } {
  if (!isObject(entry)) return { refused: 'a GraphQL request must be a JSON object' };
  const { query, operationName } = entry;
  if (typeof query !== 'string' || query.trim() === '')
    return { refused: 'query must be a non-empty string' };
  if (query.length > GRAPHQL_LIMITS.queryChars) {
    return { refused: `the GraphQL document is over ${GRAPHQL_LIMITS.queryChars} characters` };
  }
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    return { refused: 'operationName must be a string' };
  }
  const variables = variablesOf(entry.variables);
  if (typeof variables === 'string') return { refused: variables };
  let doc: DocumentNode;
  try {
    doc = parse(query, { noLocation: true, maxTokens: GRAPHQL_LIMITS.tokens });
  } catch (error) {
    // Syntax errors, the token limit, and a stack overflow on absurd nesting all end here.
    const message = error instanceof RangeError ? 'nested too deeply' : (error as Error).message;
    return { refused: `the GraphQL document cannot be parsed: ${message}` };
  }
  const operations: OperationDefinitionNode[] = [];
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of doc.definitions) {
    if (def.kind === Kind.OPERATION_DEFINITION) operations.push(def);
    else if (def.kind === Kind.FRAGMENT_DEFINITION) {
      // Two fragments of one name: which one a server would read is not ours to guess.
      if (fragments.has(def.name.value)) return { refused: `fragment ${def.name.value} is defined twice` };
      fragments.set(def.name.value, def);
    } else return { refused: 'a GraphQL request holds only operations and fragments' };
  }
  if (operations.length === 0) return { refused: 'the GraphQL document has no operation' };
  const acts: ApiAct[] = [];
  // Every operation is checked, not only the one operationName picks: what runs upstream is the
  // server's reading of the document, and an act hidden beside a harmless query is still judged.
  for (const op of operations) {
    if (op.operation !== 'mutation') continue;
    const fields = topLevelFields(op, fragments);
    if ('refused' in fields) return fields;
    const vars = withDefaults(op, variables);
    if (!vars) return { refused: 'a variable default cannot be read' };
    for (const field of fields.fields) {
      const found = fieldActs(field, vars, index);
      if ('refused' in found) return found;
      acts.push(...found.acts);
    }
  }
  return { acts };
}

/** The operation's variables: those sent, else their defaults in the document. */
function withDefaults(op: OperationDefinitionNode, sent: Input): Input | undefined {
  const out: Input = {};
  try {
    for (const def of op.variableDefinitions ?? []) {
      if (def.defaultValue) out[def.variable.name.value] = valueFromASTUntyped(def.defaultValue);
    }
  } catch {
    return undefined;
  }
  return { ...out, ...sent };
}

/**
 * The fields at the top level of an operation — the mutations it runs — with fragment spreads and
 * inline fragments opened (iteratively: nesting depth costs no stack), each fragment once.
 */
function topLevelFields(
  op: OperationDefinitionNode,
  fragments: Map<string, FragmentDefinitionNode>,
): { refused: string } | { fields: FieldNode[] } {
  const fields: FieldNode[] = [];
  const opened = new Set<string>();
  const stack: SelectionNode[] = [...op.selectionSet.selections].reverse();
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

function fieldActs(
  field: FieldNode,
  variables: Input,
  index: number | null,
): { refused: string } | { acts: ApiAct[] } {
  const mutation = field.name.value;
  const build = Object.hasOwn(ACT_MUTATIONS, mutation) ? ACT_MUTATIONS[mutation] : undefined;
  if (!build) return { acts: [] };
  const key = field.alias?.value ?? mutation;
  const arg = field.arguments?.find((a) => a.name.value === 'input');
  let input: unknown;
  try {
    input = arg ? valueFromASTUntyped(arg.value, variables) : undefined;
  } catch {
    return { refused: `the input of ${mutation} cannot be read` };
  }
  const command = `POST /graphql ${key === mutation ? mutation : `${key}: ${mutation}`}`;
  const acts: ApiAct[] = [];
  for (const draft of build(isObject(input) ? input : {})) {
    // Another repository named in the input is refused when the act is judged (recorded, 403).
    const repo = draft.detail.repo;
    const detail: ActDetail = {
      via: 'GraphQL',
      httpMethod: 'POST',
      endpoint: 'graphql',
      mutation,
      ...draft.detail,
    };
    acts.push(
      apiAct(draft.kind, command, detail, {
        lookup: draft.lookup,
        // The repository is known only when the input names it (createCommitOnBranch).
        repoUnverified: repo === undefined || draft.lookup !== undefined || undefined,
        result: { index, key },
      }),
    );
  }
  return { acts };
}
