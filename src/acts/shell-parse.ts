import {
  type Command,
  type Heredoc,
  literal,
  type ParseBudget,
  type Pipeline,
  partText,
  type Redirect,
  type Script,
  type SimpleCommand,
  type Word,
} from './shell-ast.js';
import { Lexer, type Stop } from './shell-lex.js';

/**
 * The grammar half of a parser for POSIX sh (with the bash and zsh bits agents write) that is good
 * enough to *classify* command lines, never to run them. It turns a command line into pipelines of
 * simple commands and groups (the tree is in shell-ast.ts; words are lexed by shell-lex.ts), so the
 * classifier can tell `echo "git push"` (data) from `$(git push)` (a command).
 *
 * What it honours: `&&` `||` `;` `|` `|&` `&` and newlines; `(…)` subshells, `{ …; }` groups,
 * function definitions, `case … esac`; comments; redirections and heredocs (`<<`, `<<-`, quoted
 * delimiters, bodies read at the next newline); `<<<` here-strings; `(( … ))`. Keywords (`if`,
 * `then`, `do`, `while`, `!`, …) are skipped, so the commands inside compound commands are seen as
 * the simple commands they are.
 *
 * It never throws on bad input: an unterminated quote runs to the end, a stray `)` is skipped, and
 * every loop either consumes input or stops. Nesting is bounded by `ParseBudget.maxDepth` (deeper
 * text is skipped as opaque, and the budget says so) and total work by `ParseBudget.maxWork`.
 */

/** Parses `src` at nesting `depth`; undefined when the depth or work budget does not allow it. */
export function parseShell(src: string, depth: number, budget: ParseBudget): Script | undefined {
  return Parser.open(src, depth, budget)?.parseScript();
}

const STOP = Symbol('stop');

/** Reserved words that only open or close compound commands; the commands between them are what matter. */
const TRANSPARENT = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'do',
  'done',
  'while',
  'until',
  '!',
  '}',
  'esac',
  'coproc',
]);
const REDIRECT_OPS = ['<<<', '<<-', '<<', '<>', '<&', '<', '>>', '>|', '>&', '>', '&>>', '&>'];
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/;

class Parser extends Lexer {
  private constructor(src: string, depth: number, budget: ParseBudget) {
    super(src, depth, budget);
  }

  static open(src: string, depth: number, budget: ParseBudget): Parser | undefined {
    if (depth > budget.maxDepth) {
      budget.hit.add('depth');
      return undefined;
    }
    if (budget.used + src.length > budget.maxWork) {
      budget.hit.add('work');
      return undefined;
    }
    budget.used += src.length;
    return new Parser(src, depth, budget);
  }

  parseScript(): Script {
    return { src: this.src, pipelines: this.parseList('eof') };
  }

  protected child(text: string): Parser | undefined {
    return Parser.open(text, this.depth + this.nest + 1, this.budget);
  }

  /** Blanks and newlines (after `|`, `&&`, `()`), reading any heredoc bodies that are due. */
  private skipLinebreaks(): void {
    for (;;) {
      this.skipBlanks();
      if (this.c !== '\n') return;
      this.i++;
      this.readHeredocs();
    }
  }

  protected parseList(stop: Stop): Pipeline[] {
    const out: Pipeline[] = [];
    for (;;) {
      this.skipBlanks();
      const c = this.c;
      if (c === undefined) return out;
      const before = this.i;
      if (c === '\n') {
        this.i++;
        this.readHeredocs();
        continue;
      }
      if (c === ')') {
        if (stop === ')' || this.parenStops > 0) return out;
        this.i++;
        continue;
      }
      if (c === ';') {
        if (stop === 'case' && (this.at(1) === ';' || this.at(1) === '&')) return out;
        this.i += this.at(1) === ';' ? 2 : 1;
        continue;
      }
      if ((c === '&' && this.at(1) !== '>') || c === '|') {
        this.i += this.at(1) === c ? 2 : 1;
        continue;
      }
      const pipeline = this.parsePipeline(stop);
      if (pipeline === STOP) return out;
      if (pipeline.length > 0) out.push(pipeline);
      if (this.i === before) this.i++;
    }
  }

  private parsePipeline(stop: Stop): Pipeline | typeof STOP {
    const commands: Command[] = [];
    for (;;) {
      const command = this.parseCommand(stop);
      if (command === STOP) return commands.length > 0 ? commands : STOP;
      if (command) commands.push(command);
      this.skipBlanks();
      if (this.c === '|' && this.at(1) !== '|') {
        this.i += this.at(1) === '&' ? 2 : 1;
        this.skipLinebreaks();
        continue;
      }
      return commands;
    }
  }

  private parseCommand(stop: Stop): Command | null | typeof STOP {
    this.skipBlanks();
    let start = this.i;
    if (this.c === '(') return this.parseSubshell(start);
    const assigns: Word[] = [];
    const words: Word[] = [];
    const redirects: Redirect[] = [];
    for (;;) {
      this.skipBlanks();
      const c = this.c;
      if (c === undefined || c === '\n' || c === ';' || c === '|' || c === ')') break;
      if (c === '&' && this.at(1) !== '>') break;
      const redirect = this.tryRedirect();
      if (redirect) {
        redirects.push(redirect);
        continue;
      }
      if (c === '(') {
        if (words.length === 1 && assigns.length === 0 && this.emptyParens()) {
          return this.parseFunctionBody(start, literal(words[0]) ?? '?', stop);
        }
        this.i++; // `echo (` is a syntax error in sh; skip the stray parenthesis
        continue;
      }
      const wordStart = this.i;
      const word = this.lexWord();
      if (this.i === wordStart) {
        this.i++;
        continue;
      }
      if (words.length === 0 && assigns.length === 0 && redirects.length === 0) {
        const keyword = literal(word);
        if ((keyword === '}' && stop === '}') || (keyword === 'esac' && stop === 'case')) {
          this.i = wordStart;
          return STOP;
        }
        if (keyword === '{' && this.deeper()) return this.parseBraceGroup(start);
        if (keyword === 'case' && this.deeper()) return this.parseCase(start, word);
        if (keyword === 'function') {
          this.skipBlanks();
          const name = literal(this.lexWord()) ?? '?';
          this.skipBlanks();
          if (this.emptyParens()) this.consumeEmptyParens();
          return this.parseFunctionBody(start, name, stop, true);
        }
        if (keyword !== undefined && TRANSPARENT.has(keyword)) {
          start = this.i;
          continue;
        }
      }
      if (words.length === 0 && isAssignment(word)) {
        assigns.push(word);
        continue;
      }
      words.push(word);
    }
    if (words.length === 0 && assigns.length === 0 && redirects.length === 0) return null;
    return { type: 'simple', assigns, words, redirects, start, end: this.i };
  }

  private parseSubshell(start: number): Command | null {
    if (this.at(1) === '(') {
      // `(( … ))` is arithmetic when it closes as `))`; `((cd x); y)` is two subshells.
      const end = this.arithEnd(this.i);
      if (end >= 0) {
        const inner = this.src.slice(this.i + 2, end - 2);
        this.i = end;
        const word: Word = { parts: this.subsIn(inner), start, end };
        return { type: 'simple', assigns: [], words: [lit('(('), word], redirects: [], start, end };
      }
    }
    if (!this.deeper()) {
      this.i = this.skipBalanced(this.i, '(', ')');
      return null;
    }
    this.i++;
    const body = this.nested(')', () => this.parseList(')'));
    if (this.c === ')') this.i++;
    return { type: 'group', subshell: true, body, redirects: this.trailingRedirects(), start, end: this.i };
  }

  private parseBraceGroup(start: number): Command {
    const body = this.nested('}', () => this.parseList('}'));
    this.skipBlanks();
    if (this.c === '}') this.i++;
    return { type: 'group', subshell: false, body, redirects: this.trailingRedirects(), start, end: this.i };
  }

  /** The compound command after `name()` or `function name`. */
  private parseFunctionBody(start: number, fn: string, stop: Stop, keyword = false): Command | null {
    if (!keyword) this.consumeEmptyParens();
    this.skipLinebreaks();
    if (!this.deeper()) return null;
    const body = this.nested('}', () => {
      const command = this.parseCommand(stop);
      return command && command !== STOP ? [[command]] : [];
    });
    return { type: 'group', subshell: false, fn, body, redirects: [], start, end: this.i };
  }

  private parseCase(start: number, caseWord: Word): Command {
    const head: Word[] = [caseWord];
    const body: Pipeline[] = [];
    this.nest++;
    this.skipBlanks();
    const subject = this.lexWord();
    if (subject.end > subject.start) head.push(subject);
    this.skipLinebreaks();
    const save = this.i;
    if (literal(this.lexWord()) !== 'in') this.i = save;
    for (;;) {
      const before = this.i;
      this.skipLinebreaks();
      while (this.c === ';') this.i++;
      this.skipLinebreaks();
      if (this.c === undefined) break;
      const wordAt = this.i;
      if (literal(this.lexWord()) === 'esac') break;
      this.i = wordAt;
      if (this.c === '(') this.i++;
      for (;;) {
        this.skipBlanks();
        const c = this.c;
        if (c === undefined || c === ')') break;
        if (c === '|' || c === '\n') {
          this.i++;
          continue;
        }
        const patternAt = this.i;
        const pattern = this.lexWord();
        if (this.i === patternAt) this.i++;
        else head.push(pattern);
      }
      if (this.c === ')') this.i++;
      body.push(...this.parseList('case'));
      if (this.src.startsWith(';;&', this.i)) this.i += 3;
      else if (this.src.startsWith(';;', this.i) || this.src.startsWith(';&', this.i)) this.i += 2;
      if (this.i === before) break;
    }
    this.nest--;
    const end = this.i;
    const subjectCommand: SimpleCommand = {
      type: 'simple',
      assigns: [],
      words: head,
      redirects: [],
      start,
      end,
    };
    body.unshift([subjectCommand]);
    return { type: 'group', subshell: false, body, redirects: this.trailingRedirects(), start, end };
  }

  private emptyParens(): boolean {
    if (this.c !== '(') return false;
    let j = this.i + 1;
    while (this.src[j] === ' ' || this.src[j] === '\t') j++;
    return this.src[j] === ')';
  }

  private consumeEmptyParens(): void {
    if (!this.emptyParens()) return;
    this.i = this.src.indexOf(')', this.i) + 1;
  }

  private trailingRedirects(): Redirect[] {
    const out: Redirect[] = [];
    for (;;) {
      this.skipBlanks();
      const redirect = this.tryRedirect();
      if (!redirect) return out;
      out.push(redirect);
    }
  }

  private tryRedirect(): Redirect | undefined {
    let j = this.i;
    while (this.src[j] !== undefined && /[0-9]/.test(this.src[j] as string)) j++;
    const c = this.src[j];
    if (c !== '<' && c !== '>' && !(c === '&' && j === this.i && this.src[j + 1] === '>')) return undefined;
    // `<(…)` / `>(…)` is a process substitution, a word.
    if ((c === '<' || c === '>') && this.src[j + 1] === '(' && j === this.i) return undefined;
    const op = REDIRECT_OPS.find((candidate) => this.src.startsWith(candidate, j)) ?? (c as string);
    const fd = j > this.i ? this.src.slice(this.i, j) : undefined;
    this.i = j + op.length;
    this.skipBlanks();
    const target = this.lexWord();
    const redirect: Redirect = { op, fd, target };
    if (op === '<<' || op === '<<-') {
      const heredoc: Heredoc = {
        delimiter: target.parts.map(partText).join(''),
        strip: op === '<<-',
        quoted: target.parts.some((p) => p.quoted),
        body: '',
        subs: [],
      };
      this.pending.push(heredoc);
      redirect.heredoc = heredoc;
    }
    return redirect;
  }

  /** Reads the bodies of the heredocs opened on the line that just ended. */
  private readHeredocs(): void {
    if (this.pending.length === 0) return;
    const pending = this.pending;
    this.pending = [];
    for (const heredoc of pending) {
      const lines: string[] = [];
      while (this.i < this.src.length) {
        const nl = this.src.indexOf('\n', this.i);
        const end = nl < 0 ? this.src.length : nl;
        const line = this.src.slice(this.i, end);
        this.i = nl < 0 ? this.src.length : nl + 1;
        const compared = heredoc.strip ? line.replace(/^\t+/, '') : line;
        if (compared === heredoc.delimiter || compared === `${heredoc.delimiter}\r`) break;
        lines.push(compared);
      }
      heredoc.body = lines.join('\n');
      if (!heredoc.quoted) heredoc.subs = this.subsIn(heredoc.body, false);
    }
  }
}

function lit(text: string): Word {
  return { parts: [{ type: 'lit', text, quoted: false }], start: 0, end: 0 };
}

function isAssignment(word: Word): boolean {
  const first = word.parts[0];
  return first?.type === 'lit' && !first.quoted && ASSIGNMENT.test(first.text);
}
