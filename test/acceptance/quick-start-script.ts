/**
 * The README's Quick start as steps a test can run without a shell: the ```sh block under
 * "## Quick start", read line by line. Pure functions over the README's text.
 *
 * The reader knows the little shell the block uses — words, double and single quotes, a `# comment`
 * at the start of a word, `~/` at the start of a word, and `export NAME=value` — and refuses anything
 * else (expansions, pipes, redirections, `&&`, globs, line continuations…) with an error naming the
 * line: a README edit it does not understand fails the test, it is never skipped or half-run.
 */

export type QuickStartStep =
  | { kind: 'export'; line: number; source: string; name: string; value: string }
  | { kind: 'run'; line: number; source: string; argv: string[] };

export interface ReadOptions {
  /** What `~` stands for at the start of a word. */
  home: string;
  /** Values for `export NAME=…` lines whose value is the placeholder `…`, by name. */
  placeholders: Readonly<Record<string, string>>;
}

const PLACEHOLDER = '…';

/** The text of the first ```sh block under the "## Quick start" heading, and its first line's number. */
export function quickStartBlock(readme: string): { text: string; firstLine: number } {
  const lines = readme.split('\n').map((l) => l.replace(/\r$/, ''));
  const heading = lines.findIndex((l) => l.trim() === '## Quick start');
  if (heading === -1) throw new Error('README.md has no "## Quick start" heading');
  let open = -1;
  for (let i = heading + 1; i < lines.length; i += 1) {
    const line = lines[i] ?? '';
    if (open === -1) {
      // The section ends at the next heading of its level or above (a shell comment is no heading).
      if (/^#{1,2} /.test(line)) break;
      if (/^```sh\s*$/.test(line)) open = i;
    } else if (/^```\s*$/.test(line)) {
      return { text: lines.slice(open + 1, i).join('\n'), firstLine: open + 2 };
    }
  }
  throw new Error(
    open === -1
      ? 'the "## Quick start" section of README.md has no ```sh block'
      : `the Quick start's \`\`\`sh block (line ${open + 1}) is never closed`,
  );
}

/** Every step of the block, in order; throws on the first line the reader does not understand. */
export function readQuickStart(readme: string, options: ReadOptions): QuickStartStep[] {
  const { text, firstLine } = quickStartBlock(readme);
  const steps: QuickStartStep[] = [];
  for (const [i, source] of text.split('\n').entries()) {
    const line = firstLine + i;
    let words: string[];
    try {
      words = splitWords(source, options.home);
    } catch (error) {
      throw new Error(`README.md line ${line}: ${(error as Error).message}: ${source}`);
    }
    if (words.length === 0) continue;
    steps.push(toStep(words, { line, source: source.trim() }, options));
  }
  if (!steps.some((s) => s.kind === 'run')) throw new Error("the Quick start's ```sh block runs nothing");
  return steps;
}

function toStep(words: string[], at: { line: number; source: string }, options: ReadOptions): QuickStartStep {
  const fail = (why: string) => new Error(`README.md line ${at.line}: ${why}: ${at.source}`);
  const first = words[0] ?? '';
  if (first === 'export') {
    const match = words.length === 2 ? /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(words[1] ?? '') : null;
    if (!match) throw fail('only `export NAME=value` (one assignment) is understood');
    const name = match[1] ?? '';
    let value = match[2] ?? '';
    if (value === PLACEHOLDER) {
      if (!Object.hasOwn(options.placeholders, name))
        throw fail(`no test value for the placeholder of ${name}`);
      value = options.placeholders[name] ?? '';
    }
    return { kind: 'export', ...at, name, value };
  }
  if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(first))
    throw fail('a command prefixed with NAME=value is not understood');
  return { kind: 'run', ...at, argv: words };
}

/** Characters with a meaning to the shell the reader does not give them: refused outside quotes. */
const UNQUOTED_SPECIAL = new Set([
  '$',
  '`',
  '\\',
  '|',
  '&',
  ';',
  '<',
  '>',
  '(',
  ')',
  '*',
  '?',
  '[',
  '{',
  '}',
  '!',
]);
/** …and inside double quotes (where `$`, backquote and backslash still act). */
const DOUBLE_QUOTED_SPECIAL = new Set(['$', '`', '\\', '!']);

/** One line's words, as a POSIX shell would split them (within the subset above). */
export function splitWords(source: string, home: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let i = 0;
  while (i < source.length) {
    const c = source[i] ?? '';
    if (c === ' ' || c === '\t') {
      if (word !== null) words.push(word);
      word = null;
      i += 1;
    } else if (c === '#' && word === null) {
      break;
    } else if (c === '"' || c === "'") {
      const end = source.indexOf(c, i + 1);
      if (end === -1) throw new Error(`an unclosed ${c} quote`);
      const inner = source.slice(i + 1, end);
      const special = c === '"' ? [...inner].find((ch) => DOUBLE_QUOTED_SPECIAL.has(ch)) : undefined;
      if (special !== undefined) throw new Error(`"${special}" inside double quotes is not understood`);
      word = (word ?? '') + inner;
      i = end + 1;
    } else if (c === '~') {
      const next = source[i + 1];
      // The shell expands it after the = of an assignment too: refused rather than half-understood.
      if (word !== null) throw new Error('~ inside a word is not understood');
      if (next !== undefined && next !== '/' && next !== ' ' && next !== '\t') {
        throw new Error('only ~ or ~/ is understood at the start of a word (not ~user)');
      }
      word = home;
      i += 1;
    } else if (UNQUOTED_SPECIAL.has(c) || c.charCodeAt(0) < 0x20 || c === '\x7f') {
      throw new Error(`${JSON.stringify(c)} outside quotes is not understood`);
    } else {
      word = (word ?? '') + c;
      i += 1;
    }
  }
  if (word !== null) words.push(word);
  return words;
}
