import type { FieldNode, OperationDefinitionNode, SelectionNode } from 'graphql';
import { GRAPHQL_ACT_MUTATIONS } from './graphql-acts.js';
import {
  argValue,
  type GraphqlEntry,
  graphql,
  type Input,
  isObject,
  UNREADABLE,
  withDefaults,
} from './graphql-document.js';
import { searchRefusal } from './rest-access.js';
import { isSessionRepo, type SessionRepo } from './wire-act.js';

/**
 * Which GraphQL requests the gateway forwards at all, apart from the acts the policy judges. Default
 * deny, as for REST (`rest-access.ts`): mutations on an allow-list — what gh 2.23 sends for `pr
 * create/edit/comment/review/close/reopen/ready`, `issue create/edit/comment/close/reopen`, plus
 * reviews, reactions, labels and assignees — each naming a node that must be placed in the
 * session's repository before it runs (`targets`); queries bounded to the session's repository.
 * Pure.
 *
 * Every selection is walked, at every depth, through fragments and inline fragments: what a server
 * runs is the whole document, whatever `operationName`, `@skip` or `@include` say.
 */

/** The node an allowed mutation writes to (a repository, an issue, a pull request, a comment…). */
export interface Target {
  mutation: string;
  id: string;
}

export type GraphqlAccess =
  /** A query or input outside what is served: refused, not an act. */
  | { refused: string }
  /** Mutations that are not on the allow-list: refused and recorded. */
  | { notAllowed: string[] }
  | { targets: Target[] };

/** Allowed mutations that are not acts, and the input fields naming the node each writes to. */
const ALLOWED_MUTATIONS: Readonly<Record<string, readonly string[]>> = {
  createIssue: ['repositoryId'],
  updateIssue: ['id'],
  closeIssue: ['issueId'],
  reopenIssue: ['issueId'],
  addComment: ['subjectId'],
  updateIssueComment: ['id'],
  createPullRequest: ['repositoryId'],
  updatePullRequest: ['pullRequestId'],
  closePullRequest: ['pullRequestId'],
  reopenPullRequest: ['pullRequestId'],
  markPullRequestReadyForReview: ['pullRequestId'],
  convertPullRequestToDraft: ['pullRequestId'],
  requestReviews: ['pullRequestId'],
  updatePullRequestBranch: ['pullRequestId'],
  // Turning auto-merge off undoes an act; turning it on is one (`graphql-acts.ts`).
  disablePullRequestAutoMerge: ['pullRequestId'],
  addPullRequestReview: ['pullRequestId'],
  submitPullRequestReview: ['pullRequestId', 'pullRequestReviewId'],
  updatePullRequestReview: ['pullRequestReviewId'],
  addPullRequestReviewComment: ['pullRequestId', 'pullRequestReviewId', 'inReplyTo'],
  updatePullRequestReviewComment: ['pullRequestReviewCommentId'],
  addPullRequestReviewThread: ['pullRequestId', 'pullRequestReviewId'],
  addPullRequestReviewThreadReply: ['pullRequestReviewThreadId', 'pullRequestReviewId'],
  resolveReviewThread: ['threadId'],
  unresolveReviewThread: ['threadId'],
  addLabelsToLabelable: ['labelableId'],
  removeLabelsFromLabelable: ['labelableId'],
  addAssigneesToAssignable: ['assignableId'],
  removeAssigneesFromAssignable: ['assignableId'],
  addReaction: ['subjectId'],
  removeReaction: ['subjectId'],
};

/** The mutations that pass (acts are judged by the policy on top), for tests and documentation. */
export const GRAPHQL_ALLOWED_MUTATIONS: readonly string[] = Object.keys(ALLOWED_MUTATIONS);
const ACTS = new Set(GRAPHQL_ACT_MUTATIONS);

/**
 * Query root fields served, and the check each needs. `user(login:)` and `organization(login:)`
 * are what gh asks to turn reviewer and team names into ids; the fields below them that reach
 * repositories are refused at any depth (`ELSEWHERE`).
 */
type RootCheck = (field: FieldNode, vars: Input, session: SessionRepo) => string | undefined;
const pass: RootCheck = () => undefined;
const ROOT_QUERY: Readonly<Record<string, RootCheck>> = {
  repository: (f, v, s) => repositoryArgs(f, v, s),
  viewer: pass,
  rateLimit: pass,
  // Node ids are opaque: one of another repository passes (docs/gateway.md, residual risks).
  node: pass,
  nodes: pass,
  user: pass,
  organization: (f, v, s) => {
    const login = argValue(f, 'login', v);
    if (typeof login === 'string' && login.toLowerCase() === s.owner.toLowerCase()) return undefined;
    return `organization must be ${s.owner}, the owner of ${s.owner}/${s.repo}`;
  },
  search: (f, v, s) => {
    const q = argValue(f, 'query', v);
    return typeof q === 'string' ? searchRefusal(q, s) : 'search needs a query';
  },
  __typename: pass,
  __schema: pass,
  __type: pass,
};

/**
 * Fields refused at any depth: each lists or names repositories (or their issues, pull requests,
 * discussions, gists, projects) other than the one it hangs from — a user's or an organization's
 * repositories, forks, projects and their items (a project gathers issues from anywhere), the
 * search.
 */
const ELSEWHERE = new Set([
  'repositories',
  'repositoriesContributedTo',
  'starredRepositories',
  'topRepositories',
  'watching',
  'pinnedItems',
  'pinnableItems',
  'itemShowcase',
  'forks',
  'templateRepository',
  'commitRepository',
  'fromRepository',
  'organizations',
  'repositoryOwner',
  'resource',
  'search',
  'gist',
  'gists',
  'issueComments',
  'commitComments',
  'repositoryDiscussions',
  'repositoryDiscussionComments',
  'contributionsCollection',
  'enterprise',
  'enterprises',
  'projects',
  'projectV2',
  'projectsV2',
  'recentProjects',
  'items',
  'columns',
  'cards',
  'pendingCards',
  'lists',
  'packages',
]);

/** Fields served only on a repository: on a user they list that user's work everywhere. */
const REPOSITORY_ONLY = new Set(['issues', 'pullRequests']);

/**
 * The fields read of a project an issue or pull request is on (`projectCards`, `projectItems`, as
 * gh's `pr view` and `issue view` ask): its name, never its other items or its owner.
 */
const PROJECT_FIELDS = new Set([
  '__typename',
  'id',
  'name',
  'title',
  'number',
  'url',
  'resourcePath',
  'closed',
  'state',
]);

/** The type a field's selections are on, when its name says it. */
const FIELD_CONTEXT: Readonly<Record<string, string>> = {
  repository: 'Repository',
  headRepository: 'Repository',
  baseRepository: 'Repository',
  parent: 'Repository',
  project: 'Project',
};
/** A fragment's type condition as a context: both kinds of project are one. */
const typeContext = (type: string): string => (/^Project(V2|Next)?$/.test(type) ? 'Project' : type);
const fieldContext = (name: string): string | undefined =>
  Object.hasOwn(FIELD_CONTEXT, name) ? FIELD_CONTEXT[name] : undefined;

/** `repository(owner:, name:)` must name the session's repository, both arguments given. */
function repositoryArgs(field: FieldNode, vars: Input, session: SessionRepo): string | undefined {
  const owner = argValue(field, 'owner', vars);
  const name = argValue(field, 'name', vars);
  const mine = `${session.owner}/${session.repo}`;
  if (typeof owner !== 'string' || typeof name !== 'string') {
    return `repository needs owner and name, naming ${mine}`;
  }
  return isSessionRepo(`${owner}/${name}`, session)
    ? undefined
    : `this session serves ${mine} only, not ${owner}/${name}`;
}

interface Found {
  targets: Target[];
  notAllowed: string[];
}

/** A mutation at the root: an act (judged elsewhere), an allowed one (its targets), or not allowed. */
function mutationField(field: FieldNode, vars: Input, found: Found): string | undefined {
  const name = field.name.value;
  if (name === '__typename' || ACTS.has(name)) return undefined;
  const fields = Object.hasOwn(ALLOWED_MUTATIONS, name) ? ALLOWED_MUTATIONS[name] : undefined;
  if (!fields) {
    found.notAllowed.push(name);
    return undefined;
  }
  const input = argValue(field, 'input', vars);
  if (input === UNREADABLE || !isObject(input)) return `the input of ${name} cannot be read`;
  let named = 0;
  for (const key of fields) {
    const id = input[key];
    if (id === undefined || id === null) continue;
    if (typeof id !== 'string' || id === '') return `${name}: ${key} must be a node id`;
    found.targets.push({ mutation: name, id });
    named += 1;
  }
  return named > 0 ? undefined : `${name} names none of ${fields.join(', ')}`;
}

function nestedField(field: FieldNode, context: string | undefined, vars: Input, session: SessionRepo) {
  const name = field.name.value;
  const mine = `${session.owner}/${session.repo}`;
  if (ELSEWHERE.has(name)) return `the field ${name} reaches beyond ${mine}: not served through the gateway`;
  if (REPOSITORY_ONLY.has(name) && context !== 'Repository') {
    return `the field ${name} is served on a repository only (inside repository(owner:, name:))`;
  }
  if (context === 'Project' && !PROJECT_FIELDS.has(name)) {
    return `the field ${name} of a project is not served through the gateway (a project gathers issues from anywhere)`;
  }
  const args = field.arguments?.length ?? 0;
  if (name === 'repository' && args > 0) return repositoryArgs(field, vars, session);
  // A team's organization (`organization{login}`) is the team's own; `user.organization(login:)`
  // would open any organization the user is in.
  if (name === 'organization' && args > 0) return 'organization(login:) is served at the root only';
  return undefined;
}

interface Frame {
  selections: readonly SelectionNode[];
  root: boolean;
  /** The type the selections are on, when a fragment or the parent field says it. */
  context: string | undefined;
}

interface Walk {
  entry: GraphqlEntry;
  session: SessionRepo;
  found: Found;
  /** The first refusal; the walk goes on, so every mutation that is not allowed is found. */
  refused?: string;
}

function checkField(field: FieldNode, frame: Frame, op: OperationDefinitionNode, vars: Input, w: Walk) {
  const names = (field.arguments ?? []).map((a) => a.name.value);
  // Which of two arguments of one name a server reads is not ours to guess.
  if (new Set(names).size !== names.length) return `${field.name.value} has an argument given twice`;
  if (!frame.root) return nestedField(field, frame.context, vars, w.session);
  if (op.operation === 'mutation') return mutationField(field, vars, w.found);
  const name = field.name.value;
  const check = Object.hasOwn(ROOT_QUERY, name) ? ROOT_QUERY[name] : undefined;
  if (!check) return `the query field ${name} is not served through the gateway`;
  return check(field, vars, w.session);
}

/** Walks one operation (iteratively: depth costs no stack), noting refusals in `w`. */
function checkOperation(op: OperationDefinitionNode, w: Walk): void {
  const refuse = (why: string | undefined) => {
    if (why !== undefined)
      w.refused ??= w.entry.index === null ? why : `batch entry ${w.entry.index}: ${why}`;
  };
  if (op.operation === 'subscription') {
    refuse('subscriptions are not served through the gateway');
    return;
  }
  const vars = withDefaults(op, w.entry.variables);
  if (!vars) {
    refuse('a variable default cannot be read');
    return;
  }
  const opened = new Set<string>();
  const { Kind } = graphql();
  const stack: Frame[] = [{ selections: op.selectionSet.selections, root: true, context: undefined }];
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    for (const sel of frame.selections) {
      if (sel.kind === Kind.FIELD) {
        refuse(checkField(sel, frame, op, vars, w));
        const context = fieldContext(sel.name.value);
        if (sel.selectionSet) stack.push({ selections: sel.selectionSet.selections, root: false, context });
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const type = sel.typeCondition?.name.value;
        const context = type === undefined ? frame.context : typeContext(type);
        stack.push({ selections: sel.selectionSet.selections, root: frame.root, context });
      } else {
        const name = sel.name.value;
        const fragment = w.entry.fragments.get(name);
        // A fragment's checks depend only on whether it is spread at the root.
        const key = `${frame.root}:${name}`;
        if (!fragment) refuse(`the GraphQL document spreads an undefined fragment ${name}`);
        else if (!opened.has(key)) {
          opened.add(key);
          const context = typeContext(fragment.typeCondition.name.value);
          stack.push({ selections: fragment.selectionSet.selections, root: frame.root, context });
        }
      }
    }
  }
}

/** What may pass of a GraphQL body already read (`graphql-document.ts`). */
export function graphqlAccess(entries: readonly GraphqlEntry[], session: SessionRepo): GraphqlAccess {
  const found: Found = { targets: [], notAllowed: [] };
  let refused: string | undefined;
  for (const entry of entries) {
    for (const op of entry.operations) {
      const w: Walk = { entry, session, found };
      checkOperation(op, w);
      refused ??= w.refused;
    }
  }
  // A mutation that is not allowed is recorded as a refused act, even beside another refusal.
  if (found.notAllowed.length > 0) return { notAllowed: [...new Set(found.notAllowed)] };
  if (refused !== undefined) return { refused };
  const seen = new Set<string>();
  const targets = found.targets.filter((t) => {
    const key = `${t.mutation}\u0000${t.id}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return { targets };
}
