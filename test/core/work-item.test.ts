import { describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import {
  canonicalRepository,
  canonicalWorkItem,
  formatWorkItem,
  parseWorkItem,
  type WorkItem,
  workItemKey,
  workItemSlug,
} from '../../src/core/work-item.js';

const SLUG = /^[a-z0-9-]+$/;

function rejected(text: string): LoopError {
  try {
    parseWorkItem(text);
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
}

describe('parseWorkItem / formatWorkItem / workItemSlug', () => {
  it('parses the canonical form', () => {
    expect(parseWorkItem('github:octo/widgets#15')).toEqual({ owner: 'octo', repo: 'widgets', number: 15 });
  });

  it.each([
    ['github:octo/widgets#15', 'github:octo/widgets#15', 'github-octo-widgets-15-'],
    ['github:Octo-Org/My_Repo.js#7', 'github:octo-org/my_repo.js#7', 'github-octo-org-my-repo-js-7-'],
    ['github:a/b#999999999', 'github:a/b#999999999', 'github-a-b-999999999-'],
    ['github:x1/.github#2', 'github:x1/.github#2', 'github-x1-github-2-'],
  ])('%s formats canonically as %s and slugs to %s<digest>', (text, canonical, prefix) => {
    const item = parseWorkItem(text);
    expect(formatWorkItem(item)).toBe(canonical);
    expect(workItemKey(text)).toBe(canonical);
    const slug = workItemSlug(item);
    expect(slug.startsWith(prefix)).toBe(true);
    expect(slug.slice(prefix.length)).toMatch(/^[0-9a-f]{10}$/);
  });

  it('surrounding whitespace is trimmed and the formatted form is clean', () => {
    expect(formatWorkItem(parseWorkItem('  github:octo/widgets#15\n'))).toBe('github:octo/widgets#15');
  });

  it('leading zeros are accepted and canonicalised away', () => {
    expect(formatWorkItem(parseWorkItem('github:octo/widgets#007'))).toBe('github:octo/widgets#7');
  });

  it('owner and repo limits: 39-char owner, 100-char repo', () => {
    expect(parseWorkItem(`github:${'a'.repeat(39)}/r#1`).owner).toHaveLength(39);
    expect(parseWorkItem(`github:o/${'r'.repeat(100)}#1`).repo).toHaveLength(100);
    expect(rejected(`github:${'a'.repeat(40)}/r#1`).code).toBe('work-item-invalid');
    expect(rejected(`github:o/${'r'.repeat(101)}#1`).code).toBe('work-item-invalid');
  });

  const hostile: [string, string][] = [
    ['empty', ''],
    ['no scheme', 'octo/widgets#15'],
    ['other scheme', 'gitlab:octo/widgets#15'],
    ['upper-case scheme', 'GITHUB:octo/widgets#15'],
    ['no number', 'github:octo/widgets'],
    ['empty number', 'github:octo/widgets#'],
    ['zero', 'github:octo/widgets#0'],
    ['negative', 'github:octo/widgets#-1'],
    ['huge number', 'github:octo/widgets#99999999999999999999'],
    ['ten digits', 'github:octo/widgets#1000000000'],
    ['exponent', 'github:octo/widgets#1e3'],
    ['decimal', 'github:octo/widgets#1.5'],
    ['hex', 'github:octo/widgets#0x10'],
    ['double hash', 'github:o/r#1#2'],
    ['repo ..', 'github:octo/..#1'],
    ['repo .', 'github:octo/.#1'],
    ['owner ..', 'github:../widgets#1'],
    ['path in repo', 'github:octo/widgets/../../etc#1'],
    ['slash path', 'github:octo//widgets#1'],
    ['missing owner', 'github:/widgets#1'],
    ['absolute path', 'github:/etc/passwd#1'],
    ['backslash', 'github:octo\\..\\x/widgets#1'],
    ['owner leading hyphen', 'github:-octo/widgets#1'],
    ['owner trailing hyphen', 'github:octo-/widgets#1'],
    ['owner double hyphen', 'github:oc--to/widgets#1'],
    ['owner underscore', 'github:oc_to/widgets#1'],
    ['owner dot', 'github:oc.to/widgets#1'],
    ['repo with space', 'github:octo/wid gets#1'],
    ['inner newline', 'github:octo/widgets#1\nrm -rf /'],
    ['newline before number', 'github:octo/widgets\n#1'],
    ['CR injection', 'github:octo/widgets#1\r\ngithub:evil/x#2'],
    ['tab in owner', 'github:oc\tto/widgets#1'],
    ['NUL', 'github:octo/widgets#1\u0000'],
    ['NUL in repo', 'github:octo/wid\u0000gets#1'],
    ['escape sequence', 'github:octo/\u001b[31mwidgets#1'],
    ['shell substitution', 'github:$(id)/widgets#1'],
    ['semicolon', 'github:octo/widgets;id#1'],
    ['Cyrillic o in owner', 'github:\u043ecto/widgets#1'],
    ['Cyrillic a in repo', 'github:octo/wid\u0430ets#1'],
    ['full-width digit', 'github:octo/widgets#\uff11'],
    ['Arabic-Indic digit', 'github:octo/widgets#\u0661'],
    ['full-width solidus', 'github:octo\uff0fwidgets#1'],
    ['full-width number sign', 'github:octo/widgets\uff031'],
    ['zero-width space', 'github:octo/wid\u200bgets#1'],
    ['right-to-left override', 'github:octo/wid\u202egets#1'],
    ['combining accent', 'github:octo/widge\u0301ts#1'],
    ['query string', 'github:octo/widgets?x=1#1'],
  ];

  it.each(hostile)('%s → LoopError work-item-invalid with a hint', (_name, text) => {
    const error = rejected(text);
    expect(error.code).toBe('work-item-invalid');
    expect(error.hint).toContain('github:<owner>/<repo>#<number>');
    // The message quotes the input JSON-escaped, so control characters cannot reach a terminal raw.
    expect(error.message).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    expect(error.message).not.toContain('\n');
  });

  it('a slug is always [a-z0-9-]+ and never starts or ends with a hyphen, for many valid items', () => {
    const owners = ['a', 'A', 'octo', 'Octo-Org', 'x1-2-3', '9lives', 'a'.repeat(39)];
    const repos = [
      'r',
      'R',
      'my_repo',
      'my.repo',
      '.github',
      '_',
      '-',
      '...',
      '.-_',
      'A-B_C.D',
      'x'.repeat(100),
      '--lead',
    ];
    const numbers = [1, 2, 10, 123456789, 999999999];
    let checked = 0;
    for (const owner of owners) {
      for (const repo of repos) {
        for (const number of numbers) {
          const item = parseWorkItem(`github:${owner}/${repo}#${number}`);
          const slug = workItemSlug(item);
          expect(slug, `${owner}/${repo}#${number}`).toMatch(SLUG);
          expect(slug.startsWith('github-')).toBe(true);
          expect(slug).toMatch(new RegExp(`-${number}-[0-9a-f]{10}$`));
          expect(slug.length).toBeLessThanOrEqual(60);
          expect(slug).not.toMatch(/^-|-$|--/);
          checked += 1;
        }
      }
    }
    expect(checked).toBe(owners.length * repos.length * numbers.length);
  });

  it('a repo name made only of punctuation contributes nothing to the slug', () => {
    expect(workItemSlug(parseWorkItem('github:octo/...#3'))).toMatch(/^github-octo-3-[0-9a-f]{10}$/);
  });

  it('workItemSlug stays in [a-z0-9-] even for a hand-built item with hostile parts', () => {
    const items: WorkItem[] = [
      { owner: '../..', repo: '/etc/passwd', number: 1 },
      { owner: 'ÉVIL\n', repo: '$(id)`x`', number: 2 },
      { owner: '\u043ecto', repo: 'wid\u200bgets', number: 3 },
    ];
    for (const item of items) expect(workItemSlug(item)).toMatch(SLUG);
    expect(workItemSlug(items[0] as WorkItem)).toMatch(/^github-etc-passwd-1-[0-9a-f]{10}$/);
  });
});

describe('one identity per work item', () => {
  const slugOf = (text: string) => workItemSlug(parseWorkItem(text));

  it('work items whose readable parts coincide get different slugs', () => {
    const lookalikes = [
      'github:octo/a-b#1',
      'github:octo/a_b#1',
      'github:octo/a.b#1',
      'github:octo-a/b#1',
      'github:octo/a--b#1',
      'github:octo/a-b-#1',
      'github:octo/-a-b#1',
      'github:octo/a-b#11',
      'github:octo/a-b-1#1',
      'github:octo-a-b/x#1',
    ];
    const slugs = lookalikes.map(slugOf);
    // The readable part is shared (that was the bug); the slugs are not.
    expect(slugs.filter((s) => /^github-octo-a-b-1-[0-9a-f]{10}$/.test(s))).toHaveLength(7);
    expect(new Set(slugs).size).toBe(lookalikes.length);
  });

  it('letter case is one work item: one key, one slug', () => {
    const variants = ['github:octo/a-b#1', 'github:Octo/A-B#1', 'github:OCTO/a-B#1', ' github:octo/A-b#01 '];
    expect(new Set(variants.map(workItemKey))).toEqual(new Set(['github:octo/a-b#1']));
    expect(new Set(variants.map(slugOf)).size).toBe(1);
    expect(parseWorkItem('github:Octo/A-B#1')).toEqual({ owner: 'octo', repo: 'a-b', number: 1 });
    expect(canonicalWorkItem({ owner: 'Octo', repo: 'A.B_c', number: 3 })).toEqual({
      owner: 'octo',
      repo: 'a.b_c',
      number: 3,
    });
    // A hand-built item in other letter case formats and slugs like its canonical form.
    const upper: WorkItem = { owner: 'Octo', repo: 'A-B', number: 1 };
    expect(formatWorkItem(upper)).toBe('github:octo/a-b#1');
    expect(workItemSlug(upper)).toBe(slugOf('github:octo/a-b#1'));
    expect(canonicalRepository('Octo/A-B')).toBe(canonicalRepository('octo/a-b'));
  });

  it('the slug is stable: the same digest in every process (it names directories on disk)', () => {
    // sha256("github:octo/widgets#15"), first 10 hex digits: a changed scheme would orphan every
    // worktree, state directory and tmux session made under the old one.
    expect(slugOf('github:octo/widgets#15')).toBe('github-octo-widgets-15-49002e4541');
  });

  it('distinct over many generated work items, every slug [a-z0-9-] and at most 60 characters', () => {
    const owners = ['o', 'O', 'o-a', 'oa', 'x'.repeat(39)];
    const repos = ['a', 'a-b', 'a_b', 'a.b', 'A-B', '-', '_', '.a', 'y'.repeat(100), `${'y'.repeat(99)}z`];
    const keys = new Set<string>();
    const slugs = new Set<string>();
    for (const owner of owners)
      for (const repo of repos)
        for (const n of [1, 12, 999999999]) {
          const text = `github:${owner}/${repo}#${n}`;
          keys.add(workItemKey(text));
          const slug = slugOf(text);
          expect(slug, text).toMatch(SLUG);
          expect(slug.length, text).toBeLessThanOrEqual(60);
          expect(`loop-${slug}`, 'a valid tmux target').toMatch(/^[A-Za-z0-9_-]{1,100}$/);
          slugs.add(slug);
        }
    // One slug per canonical work item (letter-case variants are the same item).
    expect(slugs.size).toBe(keys.size);
    expect(keys.size).toBe((owners.length - 1) * (repos.length - 1) * 3);
  });
});
