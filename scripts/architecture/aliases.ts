/**
 * Root-only constructors and factories under another name (root.ts): `import { Dispatcher as D }`,
 * `import D from './dispatcher.js'` (its default export), `export { openDb as open }` imported
 * elsewhere, `export * from`, `const T = Tmux`, `const { openDb: open } = db`, `import * as ns` then
 * `ns.Renamed`. Each file's bindings are collected by the scan; a call of a name that is not itself
 * root-only is resolved through them, across files, once every file is read.
 */

/** What a local name or an export stands for. */
export type Ref =
  | { kind: 'local'; name: string }
  | { kind: 'member'; ns: string; prop: string }
  | { kind: 'import'; target: string | null; name: string };

/** A call whose callee is not root-only by its own name: `new D(`, `ns.open(`. */
export interface Candidate {
  callee: Ref & { kind: 'local' | 'member' };
  isNew: boolean;
  line: number;
}

export interface FileBindings {
  /** Imports (`default` for a default import) and `const` aliases, by local name. */
  locals: Map<string, Ref>;
  /** `import * as ns from 't'`: ns → t (null: a package). */
  namespaces: Map<string, string | null>;
  /** By exported name (`default` too). */
  exports: Map<string, Ref>;
  /** `export * from 't'`. */
  stars: Array<string | null>;
  candidates: Candidate[];
}

export const emptyBindings = (): FileBindings => ({
  locals: new Map(),
  namespaces: new Map(),
  exports: new Map(),
  stars: [],
  candidates: [],
});

/** Resolves names to the root-only name they stand for (`Dispatcher`, `openDb`), or null. */
export class AliasResolver {
  constructor(
    private readonly files: ReadonlyMap<string, FileBindings>,
    private readonly isRootOnlyName: (name: string) => boolean,
  ) {}

  origin(file: string, ref: Ref, seen = new Set<string>()): string | null {
    const key = `${file}|${ref.kind}|${ref.kind === 'member' ? `${ref.ns}.${ref.prop}` : ref.name}`;
    if (seen.has(key)) return null;
    seen.add(key);
    if (ref.kind === 'member') {
      if (this.isRootOnlyName(ref.prop)) return ref.prop;
      const target = this.files.get(file)?.namespaces.get(ref.ns);
      return target ? this.exportOrigin(target, ref.prop, seen) : null;
    }
    if (this.isRootOnlyName(ref.name)) return ref.name;
    if (ref.kind === 'import') return ref.target ? this.exportOrigin(ref.target, ref.name, seen) : null;
    const local = this.files.get(file)?.locals.get(ref.name);
    return local ? this.origin(file, local, seen) : null;
  }

  private exportOrigin(target: string, name: string, seen: Set<string>): string | null {
    const bindings = this.files.get(target);
    if (!bindings) return null;
    const ref = bindings.exports.get(name);
    if (ref) return this.origin(target, ref, seen);
    if (name === 'default') return null;
    for (const star of bindings.stars) {
      const found = star ? this.exportOrigin(star, name, seen) : null;
      if (found) return found;
    }
    return null;
  }
}
