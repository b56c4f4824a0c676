import type { FieldNode } from 'graphql';
import type { ActDetail, ActKind } from '../../acts/types.js';
import {
  argValue,
  GRAPHQL_LIMITS,
  type GraphqlEntry,
  type Input,
  isObject,
  type ParsedGraphql,
  parseGraphql,
  parseGraphqlText,
  topLevelFields,
  UNREADABLE,
  withDefaults,
} from './graphql-document.js';
import { type ApiAct, apiAct, type Lookup, type NodeType, refWrite } from './wire-act.js';

export { GRAPHQL_LIMITS };

/**
 * The acts a GitHub GraphQL request is: the mutations it would run that are consequential (merges,
 * ref writes, commits, protection changes), read from the parsed document — aliases, fragments and
 * inline fragments at the top level of a mutation, arguments inline or from variables (and their
 * defaults). Pure. Strict: a body `graphql-document.ts` cannot read, or a fragment that is not
 * defined — refused, never forwarded unchecked. When a document holds several operations, all of
 * them are checked, whatever `operationName` says. Mutations not listed here (createPullRequest,
 * addComment, …) are not acts; whether they may run at all is `graphql-access.ts`'s answer.
 */

export type GraphqlClassification = { refused: string } | { acts: ApiAct[]; batch: boolean };

interface Draft {
  kind: ActKind;
  detail: ActDetail;
  lookup?: Lookup;
}
type Builder = (input: Input) => Draft[];

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
  return actsOfParsed(parseGraphqlText(text));
}

/** Classifies a parsed GraphQL request body. */
export function classifyGraphql(body: unknown): GraphqlClassification {
  return actsOfParsed(parseGraphql(body));
}

/** The acts of a body already read (`graphql-document.ts`). */
export function actsOfParsed(parsed: ParsedGraphql): GraphqlClassification {
  if ('refused' in parsed) return parsed;
  const acts: ApiAct[] = [];
  for (const entry of parsed.entries) {
    const found = entryActs(entry);
    if ('refused' in found) {
      return entry.index === null ? found : { refused: `batch entry ${entry.index}: ${found.refused}` };
    }
    acts.push(...found.acts);
  }
  return { acts, batch: parsed.batch };
}

function entryActs(entry: GraphqlEntry): { refused: string } | { acts: ApiAct[] } {
  const acts: ApiAct[] = [];
  // Every operation is checked, not only the one operationName picks: what runs upstream is the
  // server's reading of the document, and an act hidden beside a harmless query is still judged.
  for (const op of entry.operations) {
    if (op.operation !== 'mutation') continue;
    const fields = topLevelFields(op, entry.fragments);
    if ('refused' in fields) return fields;
    const vars = withDefaults(op, entry.variables);
    if (!vars) return { refused: 'a variable default cannot be read' };
    for (const field of fields.fields) {
      const found = fieldActs(field, vars, entry.index);
      if ('refused' in found) return found;
      acts.push(...found.acts);
    }
  }
  return { acts };
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
  const input = argValue(field, 'input', variables);
  if (input === UNREADABLE) return { refused: `the input of ${mutation} cannot be read` };
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
