import { describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import { formatWorkItem, parseWorkItem, type WorkItem, workItemSlug } from '../../src/core/work-item.js';

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
    ['github:octo/widgets#15', 'github-octo-widgets-15'],
    ['github:Octo-Org/My_Repo.js#7', 'github-octo-org-my-repo-js-7'],
    ['github:a/b#999999999', 'github-a-b-999999999'],
    ['github:x1/.github#2', 'github-x1-github-2'],
  ])('%s round-trips and slugs to %s', (text, slug) => {
    const item = parseWorkItem(text);
    expect(formatWorkItem(item)).toBe(text);
    expect(workItemSlug(item)).toBe(slug);
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
          expect(slug.endsWith(`-${number}`)).toBe(true);
          expect(slug).not.toMatch(/^-|-$|--/);
          checked += 1;
        }
      }
    }
    expect(checked).toBe(owners.length * repos.length * numbers.length);
  });

  it('a repo name made only of punctuation contributes nothing to the slug', () => {
    expect(workItemSlug(parseWorkItem('github:octo/...#3'))).toBe('github-octo-3');
  });

  it('workItemSlug stays in [a-z0-9-] even for a hand-built item with hostile parts', () => {
    const items: WorkItem[] = [
      { owner: '../..', repo: '/etc/passwd', number: 1 },
      { owner: 'ÉVIL\n', repo: '$(id)`x`', number: 2 },
      { owner: '\u043ecto', repo: 'wid\u200bgets', number: 3 },
    ];
    for (const item of items) expect(workItemSlug(item)).toMatch(SLUG);
    expect(workItemSlug(items[0] as WorkItem)).toBe('github-etc-passwd-1');
  });
});
