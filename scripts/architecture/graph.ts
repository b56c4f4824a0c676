/**
 * The folder graph of `src/`: a node per first path segment under `src/` (the root files —
 * `main.ts`, `main-*.ts`: every file directly under `src/` — are one node, `main`), an edge `a -> b` when a file of `a`
 * imports a file of `b` (type-only imports included: they tie the folders' words together just the
 * same). Cycles are the strongly connected components with more than one folder.
 */
import type { ImportRef } from './scan.js';

/** The node of the composition root: the files directly under `src/`. */
export const ROOT_NODE = 'main';

export interface FolderGraph {
  nodes: string[];
  /** `a -> b` → the imports that make the edge, in file order. */
  edges: Map<string, ImportRef[]>;
}

/** The folder of a file under `src/`, or null for a file elsewhere. */
export function folderOf(path: string): string | null {
  const parts = path.split('/');
  if (parts[0] !== 'src' || parts.length < 2) return null;
  return parts.length === 2 ? ROOT_NODE : (parts[1] ?? null);
}

export const edgeKey = (from: string, to: string): string => `${from} -> ${to}`;

export function folderGraph(files: readonly string[], imports: readonly ImportRef[]): FolderGraph {
  const nodes = new Set<string>();
  for (const file of files) {
    const folder = folderOf(file);
    if (folder) nodes.add(folder);
  }
  const edges = new Map<string, ImportRef[]>();
  for (const ref of imports) {
    const from = folderOf(ref.from);
    const to = ref.target ? folderOf(ref.target) : null;
    if (!from || !to || from === to) continue;
    const key = edgeKey(from, to);
    const list = edges.get(key) ?? [];
    list.push(ref);
    edges.set(key, list);
  }
  return { nodes: [...nodes].sort(), edges: new Map([...edges].sort(([a], [b]) => (a < b ? -1 : 1))) };
}

/** The edges, `a -> b`, sorted: what `--print` shows and the docs block lists. */
export function edgeLines(graph: FolderGraph): string[] {
  return [...graph.edges.keys()].sort();
}

/** Folders that import each other in a cycle: each group (sorted), with one cycle through them. */
export function folderCycles(graph: FolderGraph): Array<{ folders: string[]; cycle: string[] }> {
  const next = new Map<string, string[]>();
  for (const key of graph.edges.keys()) {
    const [from, to] = key.split(' -> ') as [string, string];
    next.set(from, [...(next.get(from) ?? []), to]);
  }
  return stronglyConnected(graph.nodes, next)
    .filter((group) => group.length > 1)
    .map((group) => {
      const folders = [...group].sort();
      return { folders, cycle: cycleThrough(folders[0] as string, new Set(folders), next) };
    })
    .sort((a, b) => (a.folders.join() < b.folders.join() ? -1 : 1));
}

/** Tarjan's algorithm (iterative depth is no concern: a few dozen folders). */
function stronglyConnected(nodes: readonly string[], next: ReadonlyMap<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string | undefined;
    do {
      w = stack.pop();
      if (w === undefined) break;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    groups.push(group);
  };
  for (const v of nodes) if (!index.has(v)) connect(v);
  return groups;
}

/** The shortest cycle from `start` back to itself inside its group (breadth first). */
function cycleThrough(
  start: string,
  group: ReadonlySet<string>,
  next: ReadonlyMap<string, string[]>,
): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift() as string;
    for (const w of (next.get(v) ?? []).filter((n) => group.has(n)).sort()) {
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0] as string) as string);
        return [...path, start];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}
