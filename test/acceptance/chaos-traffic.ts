/**
 * The chaos test's deliveries: a plan (which delivery, to which work item, which ones resent) made
 * from a seed, and a sender that plays it through the load balancer the way GitHub does: signed,
 * one work item's deliveries one after another (each acknowledged before the next is sent, so
 * arrival order per work item is the plan's order), many work items at once, and a delivery answered
 * 5xx or not answered at all sent again with the same id until it is acknowledged.
 */
import { randomUUID } from 'node:crypto';
import { signBody } from '../../src/github/verify.js';
import { fixture } from '../helpers/daemon.js';
import { SECRET } from './chaos-hosts.js';

export const workItemOf = (issue: number) => `github:acme/widgets#${issue}`;

export interface PlannedDelivery {
  id: string;
  issue: number;
  /** A mention (runs a turn) or a plain comment (ignored). */
  runnable: boolean;
  body: Buffer;
}

/** One send: a delivery, or a resend of one already sent (`concurrent`: together with its first). */
export type Step =
  | { kind: 'send'; delivery: PlannedDelivery }
  | { kind: 'duplicate'; delivery: PlannedDelivery; concurrent: boolean };

export interface Plan {
  lanes: Step[][];
  unique: PlannedDelivery[];
  sends: number;
}

/** A small seeded PRNG (mulberry32): the same seed, the same plan. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TEMPLATE = fixture('issue_comment.created') as {
  issue: { number: number; url: string; html_url: string };
  comment: { id: number; body: string; html_url: string };
};

function payload(issue: number, n: number, runnable: boolean): Buffer {
  const p = structuredClone(TEMPLATE);
  p.issue.number = issue;
  p.issue.url = `https://api.github.com/repos/acme/widgets/issues/${issue}`;
  p.issue.html_url = `https://github.com/acme/widgets/issues/${issue}`;
  p.comment.id = 4_000_000_000 + n;
  p.comment.html_url = `https://github.com/acme/widgets/issues/${issue}#issuecomment-${p.comment.id}`;
  p.comment.body = runnable
    ? `@the-loop please fix this (chaos ${n})`
    : `Just a note, no mention (chaos ${n})`;
  return Buffer.from(JSON.stringify(p));
}

/**
 * `total` sends over `issues` work items, `duplicateShare` of them resends of an earlier id of the
 * same work item (a tenth of those sent together with their first); every `ignoredEvery`-th
 * delivery a comment without a mention (stored, ignored, no turn).
 */
export function makePlan(options: {
  seed: number;
  total: number;
  issues: number;
  duplicateShare: number;
  ignoredEvery: number;
}): Plan {
  const random = prng(options.seed);
  const duplicates = Math.round(options.total * options.duplicateShare);
  const uniqueCount = options.total - duplicates;
  const lanes: Step[][] = Array.from({ length: options.issues }, () => []);
  const unique: PlannedDelivery[] = [];
  for (let n = 0; n < uniqueCount; n++) {
    const issue = 1 + (n % options.issues);
    const runnable = n % options.ignoredEvery !== options.ignoredEvery - 1;
    const delivery = { id: randomUUID(), issue, runnable, body: payload(issue, n, runnable) };
    unique.push(delivery);
    lanes[issue - 1]?.push({ kind: 'send', delivery });
  }
  for (let d = 0; d < duplicates; d++) {
    const original = unique[Math.floor(random() * unique.length)] as PlannedDelivery;
    const lane = lanes[original.issue - 1] as Step[];
    const at = lane.findIndex((s) => s.kind === 'send' && s.delivery.id === original.id);
    if (random() < 0.1) {
      lane.splice(at + 1, 0, { kind: 'duplicate', delivery: original, concurrent: true });
    } else {
      // Anywhere after its first, up to the end of its lane.
      const where = at + 1 + Math.floor(random() * (lane.length - at));
      lane.splice(where, 0, { kind: 'duplicate', delivery: original, concurrent: false });
    }
  }
  return { lanes, unique, sends: options.total };
}

export interface Answer {
  status: number;
  text: string;
}

export interface TrafficResult {
  /** Every answer each delivery id got, in order (retries included). */
  answers: Map<string, Answer[]>;
  /** Ids in the order each work item's deliveries were first acknowledged. */
  acknowledged: Map<number, string[]>;
  sendsDone: number;
  retries: number;
  /** Ids sent only with a wrong signature (never to be stored), and their answers. */
  forged: string[];
  badSignatureAnswers: number[];
}

const acknowledgedAnswer = (a: Answer) => a.status === 202 || (a.status === 200 && a.text === 'duplicate');

/** POST one delivery (signed) through `url`; network errors become status 0. */
async function post(url: string, d: PlannedDelivery, badSignature = false): Promise<Answer> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issue_comment',
        'x-github-delivery': d.id,
        'x-hub-signature-256': signBody(badSignature ? `${SECRET}-wrong` : SECRET, d.body),
        'user-agent': 'GitHub-Hookshot/chaos',
      },
      body: d.body,
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, text: (await res.text()).trim() };
  } catch (error) {
    return { status: 0, text: String(error) };
  }
}

/** The sender: play the plan through `url`; `progress()` while it runs, `done` when all are acknowledged. */
export function playTraffic(
  url: string,
  plan: Plan,
  options: {
    paceMs: number;
    inFlight: number;
    /** Waited for before each new delivery (not a resend): keeps the backlog to what the hosts run. */
    gate?: () => Promise<void>;
  },
) {
  const result: TrafficResult = {
    answers: new Map(),
    acknowledged: new Map(),
    sendsDone: 0,
    retries: 0,
    forged: [],
    badSignatureAnswers: [],
  };
  let slots = options.inFlight;
  const waiting: Array<() => void> = [];
  const acquire = async () => {
    if (slots > 0) slots--;
    else await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else slots++;
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Send until acknowledged (GitHub redelivers what was not). */
  async function deliver(d: PlannedDelivery): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await acquire();
      const answer = await post(url, d).finally(release);
      const list = result.answers.get(d.id) ?? [];
      list.push(answer);
      result.answers.set(d.id, list);
      if (acknowledgedAnswer(answer)) break;
      if (answer.status > 0 && answer.status < 500)
        throw new Error(`delivery ${d.id}: ${answer.status} ${answer.text}`);
      result.retries++;
      if (attempt > 400)
        throw new Error(`delivery ${d.id} never acknowledged: ${answer.status} ${answer.text}`);
      await sleep(50);
    }
    result.sendsDone++;
  }
  async function lane(steps: Step[], issue: number): Promise<void> {
    const order: string[] = [];
    result.acknowledged.set(issue, order);
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i] as Step;
      const next = steps[i + 1];
      if (step.kind === 'send') await options.gate?.();
      if (
        step.kind === 'send' &&
        next?.kind === 'duplicate' &&
        next.concurrent &&
        next.delivery.id === step.delivery.id
      ) {
        await Promise.all([deliver(step.delivery), deliver(next.delivery)]);
        i++;
      } else {
        await deliver(step.delivery);
      }
      if (step.kind === 'send') order.push(step.delivery.id);
      if (options.paceMs > 0) await sleep(options.paceMs * (0.5 + Math.random()));
    }
  }
  const done = (async () => {
    // A few deliveries with a wrong signature: answered 401, never stored.
    for (const d of plan.unique.slice(0, 20)) {
      const forged = { ...d, id: randomUUID() };
      result.forged.push(forged.id);
      result.badSignatureAnswers.push((await post(url, forged, true)).status);
    }
    await Promise.all(plan.lanes.map((steps, i) => lane(steps, i + 1)));
    return result;
  })();
  return { result, done };
}
