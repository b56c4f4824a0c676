/**
 * A delivery's status as a GitHub comment and a check's fields (issue 18): a bold state and what it
 * hangs on first, then the agent's checklist, its acts, the cost with its basis (unknown is said so,
 * never "$0"), where to see the session, and last our hidden marker (a comment carrying it is never a
 * trigger). Every string from outside or from the engine is scrubbed, cleaned, bounded and escaped
 * (markdown-text.ts); the body stays within GitHub's limit whatever the input: the lists give way
 * first, the marker never. Pure.
 */
import {
  type ActLine,
  type RenderedStatus,
  STATUS_MARKER_PREFIX,
  type StatusFacts,
  type TodoItem,
} from '../core/status-facts.js';
import { formatCount, formatDuration, formatUsd } from './format.js';
import {
  bound,
  inlineText,
  inlineWithCode,
  plainText,
  type Scrub,
  safeId,
  safeUrl,
  shortSha,
} from './markdown-text.js';

export interface RenderOptions {
  /** Masks secret values (the daemon's scrubber): applied to every outside string before anything else. */
  scrub: Scrub;
  /** The check run's name (or the commit status's context). */
  checkName: string;
}

/** The body's ceiling: GitHub refuses a comment over 65,536 characters; a margin for the marker. */
export const BODY_LIMIT = 65_000;
/** Most todo items and acts shown; the rest are counted ("and N more"). */
export const LIST_LIMIT = 50;
/** Characters kept of each outside string, before escaping. */
export const TEXT_LIMITS = {
  todo: 300,
  error: 1000,
  target: 200,
  reason: 300,
  release: 400,
  basis: 120,
  rule: 120,
  word: 60,
} as const;
const TITLE_LIMIT = 100;
const DESCRIPTION_LIMIT = 140;

/** How one place writes text: Markdown for the comment, plain for a check's title and a status line. */
interface Writer {
  text(s: string, max: number): string;
  withCode(s: string, max: number): string;
  strong(word: string): string;
  code(id: string): string;
}

function writers(scrub: Scrub): { md: Writer; plain: Writer } {
  return {
    md: {
      text: (s, max) => inlineText(s, scrub, max),
      withCode: (s, max) => inlineWithCode(s, scrub, max),
      strong: (w) => `**${w}**`,
      code: (id) => `\`${id}\``,
    },
    plain: {
      text: (s, max) => plainText(s, scrub, max),
      withCode: (s, max) => plainText(s, scrub, max),
      strong: (w) => w,
      code: (id) => id,
    },
  };
}

type Finished = Extract<StatusFacts, { phase: 'finished' }>;

const OUTCOME_WORD: Record<Finished['outcome'], string> = {
  succeeded: 'Finished',
  failed: 'Failed',
  cancelled: 'Cancelled',
  interrupted: 'Interrupted',
  'not-run': 'Not run',
};

function turnLabel(seq: number | undefined): string {
  return seq === undefined || !Number.isFinite(seq) ? '' : ` turn ${Math.trunc(seq)}`;
}

function queuedLine(facts: Extract<StatusFacts, { phase: 'queued' }>, w: Writer): string {
  const behind = facts.behind;
  let where = '';
  if (behind?.turnSeq !== undefined) where = ` behind${turnLabel(behind.turnSeq)}`;
  else if (behind !== undefined) where = ` behind delivery ${w.code(safeId(behind.deliveryId, 12) || '?')}`;
  if (behind !== undefined && !behind.running) where += ' (not started yet)';
  const ahead = Math.max(0, Math.trunc(facts.position) || 0);
  // A run stopped by a shutdown or a crash: said, with that it runs again.
  const again = facts.interrupted ? ` · ${w.text(facts.interrupted, TEXT_LIMITS.reason)}` : '';
  if (ahead > 0) return `${w.strong('Queued')}${where} (${formatCount(ahead)} ahead)${again}`;
  return `${where === '' ? `${w.strong('Queued')}: next to run` : `${w.strong('Queued')}${where}`}${again}`;
}

function finishedLine(f: Finished, w: Writer): string {
  const parts = [`${w.strong(OUTCOME_WORD[f.outcome])}${turnLabel(f.turnSeq)}`];
  const reason = f.endReason === undefined ? '' : ` (${w.text(f.endReason, TEXT_LIMITS.word)})`;
  if (f.outcome === 'succeeded') parts[0] += `: succeeded${reason}`;
  else parts[0] += reason;
  if (f.durationMs !== undefined && f.outcome !== 'not-run') {
    parts[0] += `${f.outcome === 'succeeded' ? ' in' : ' after'} ${formatDuration(f.durationMs)}`;
  }
  if (f.engine !== undefined) parts.push(w.text(f.engine, TEXT_LIMITS.word));
  if (f.next !== undefined) parts.push(w.text(f.next, TEXT_LIMITS.reason));
  return parts.join(' · ');
}

/** The first line: the state in bold and what it hangs on. */
function headline(facts: StatusFacts, w: Writer): string {
  switch (facts.phase) {
    case 'queued':
      return queuedLine(facts, w);
    case 'held': {
      const reason = w.text(facts.reason, TEXT_LIMITS.reason).replace(/\.$/, '');
      return `${w.strong('Held')}: ${reason}. Released by: ${w.withCode(facts.release, TEXT_LIMITS.release)}`;
    }
    case 'running': {
      const parts = [`${w.strong('Running')}${turnLabel(facts.turnSeq)}`, formatDuration(facts.elapsedMs)];
      if (facts.engine !== '') parts.push(w.text(facts.engine, TEXT_LIMITS.word));
      return parts.join(' · ');
    }
    case 'finished':
      return finishedLine(facts, w);
    case 'rejected':
      return `${w.strong('Rejected')}: ${w.text(facts.reason, TEXT_LIMITS.reason)}`;
  }
}

/** A titled list of lines; `hidden` items are counted at its end instead of shown. */
interface Section {
  title: string;
  items: string[];
  hidden: number;
}

function todoLine(todo: TodoItem, w: Writer): string {
  const text = w.text(todo.text, TEXT_LIMITS.todo) || '(empty)';
  if (todo.status === 'completed') return `- [x] ${text}`;
  return todo.status === 'in_progress' ? `- [ ] ${text} (in progress)` : `- [ ] ${text}`;
}

function actLine(act: ActLine, w: Writer): string {
  const kind = w.text(act.kind, TEXT_LIMITS.word) || 'act';
  const target = w.text(act.target, TEXT_LIMITS.target);
  let line = `- ${kind}${target === '' ? '' : ` of ${target}`}`;
  const sha = shortSha(act.sha);
  if (sha !== undefined) line += ` → ${w.code(sha)}`;
  if (act.outcome === 'failed') line += ': failed';
  if (act.outcome === 'unknown') line += ': outcome unknown';
  if (act.outcome === 'blocked') {
    line += ': blocked';
    if (act.rule !== undefined) line += ` by rule ${w.text(act.rule, TEXT_LIMITS.rule)}`;
  }
  return line;
}

function listSection<T>(title: string, list: readonly T[], line: (item: T) => string): Section[] {
  if (list.length === 0) return [];
  const shown = list.slice(0, LIST_LIMIT);
  return [{ title, items: shown.map(line), hidden: list.length - shown.length }];
}

function costLine(f: Finished, w: Writer): string {
  const { tokens, usd, basis, unpricedRows } = f.cost;
  const tokenText =
    tokens === null || !Number.isFinite(tokens) ? 'tokens not measured' : `${formatCount(tokens)} tokens`;
  const basisText = w.text(basis, TEXT_LIMITS.basis) || 'no basis given';
  const dollars = usd === null ? undefined : formatUsd(usd);
  let cost = dollars === undefined ? `cost unknown (${basisText})` : `estimated ${dollars} (${basisText})`;
  if (dollars !== undefined && unpricedRows > 0) {
    cost += `, leaving out ${formatCount(unpricedRows)} ${unpricedRows === 1 ? 'row' : 'rows'} without a price`;
  }
  return `Cost: ${tokenText} · ${cost}`;
}

/** The blocks after the first line: the error, the lists (which give way when too long), the cost. */
interface Details {
  error: string | undefined;
  sections: Section[];
  cost: string | undefined;
}

function details(facts: StatusFacts, w: Writer): Details {
  if (facts.phase !== 'running' && facts.phase !== 'finished') {
    return { error: undefined, sections: [], cost: undefined };
  }
  const error =
    facts.phase === 'finished' && facts.error !== undefined
      ? `Error: ${w.text(facts.error, TEXT_LIMITS.error) || '(no message)'}`
      : undefined;
  const sections = [
    ...listSection('Checklist', facts.todos, (t) => todoLine(t, w)),
    ...listSection('Acts', facts.acts, (a) => actLine(a, w)),
  ];
  const cost =
    facts.phase === 'finished' && (facts.outcome !== 'not-run' || facts.cost.tokens !== null)
      ? costLine(facts, w)
      : undefined;
  return { error, sections, cost };
}

function whereToSee(facts: StatusFacts): string | undefined {
  const url = safeUrl(facts.consoleUrl);
  if (url !== undefined) return `[session](${url})`;
  const id = facts.sessionId === undefined ? '' : safeId(facts.sessionId);
  return id === '' ? undefined : `Session \`${id}\`: \`the-loop sessions show ${id}\``;
}

function sectionText(s: Section): string {
  const more = s.hidden > 0 ? [`- and ${formatCount(s.hidden)} more`] : [];
  return [`**${s.title}**`, ...s.items, ...more].join('\n');
}

function assemble(head: string, d: Details, link: string | undefined): string {
  const lists = d.sections.filter((s) => s.items.length > 0 || s.hidden > 0).map(sectionText);
  const blocks = [head, d.error, ...lists, d.cost, link];
  return blocks.filter((b) => b !== undefined).join('\n\n');
}

/** The body without the marker, within `limit`: the longest list gives up items from its end first. */
function fitBody(head: string, d: Details, link: string | undefined, limit: number): string {
  let text = assemble(head, d, link);
  while (text.length > limit) {
    const longest = d.sections
      .filter((s) => s.items.length > 0)
      .sort((a, b) => b.items.join('\n').length - a.items.join('\n').length)[0];
    if (longest === undefined) break;
    // Drop enough items at once to fit (a 1 MB input would otherwise cost a pass per item).
    let over = text.length - limit;
    while (over > 0 && longest.items.length > 0) {
      over -= (longest.items.pop()?.length ?? 0) + 1;
      longest.hidden++;
    }
    text = assemble(head, d, link);
  }
  // Unreachable with the bounds above; a last guard so the marker always fits.
  return text.length > limit ? bound(text, limit) : text;
}

export function markerLine(deliveryId: string): string {
  const id = deliveryId.replace(/[^A-Za-z0-9-]/g, '').slice(0, 100) || 'unknown';
  return `${STATUS_MARKER_PREFIX} delivery=${id} -->`;
}

function checkState(facts: StatusFacts): Pick<RenderedStatus['check'], 'status' | 'conclusion'> {
  switch (facts.phase) {
    case 'queued':
      return { status: 'queued', conclusion: undefined };
    case 'running':
      return { status: 'in_progress', conclusion: undefined };
    case 'held':
      // Waiting for a person, the title says why. Not completed (action_required): a completed
      // check run is not opened again when the hold is released and the turn runs.
      return { status: 'queued', conclusion: undefined };
    case 'rejected':
      return { status: 'completed', conclusion: 'neutral' };
    case 'finished': {
      if (facts.endReason === 'backstop' && facts.outcome !== 'succeeded') {
        return { status: 'completed', conclusion: 'timed_out' };
      }
      const byOutcome = {
        succeeded: 'success',
        failed: 'failure',
        cancelled: 'cancelled',
        interrupted: 'cancelled',
        'not-run': 'failure',
      } as const;
      return { status: 'completed', conclusion: byOutcome[facts.outcome] };
    }
  }
}

export function renderStatus(facts: StatusFacts, options: RenderOptions): RenderedStatus {
  const { md, plain } = writers(options.scrub);
  const marker = markerLine(facts.deliveryId);
  const summary = fitBody(
    headline(facts, md),
    details(facts, md),
    whereToSee(facts),
    BODY_LIMIT - marker.length - 2,
  );
  const plainHead = headline(facts, plain);
  const title = facts.phase === 'held' ? `Held: ${plain.text(facts.reason, TEXT_LIMITS.reason)}` : plainHead;
  return {
    body: `${summary}\n\n${marker}`,
    check: {
      ...checkState(facts),
      title: bound(title, TITLE_LIMIT),
      summary,
      description: bound(plainHead, DESCRIPTION_LIMIT),
    },
  };
}
