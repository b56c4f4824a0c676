import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { quickStartBlock, readQuickStart, splitWords } from './quick-start-script.js';

const HOME = '/home/tester';
const options = { home: HOME, placeholders: { API_KEY: 'test-key' } };
const readme = (block: string) =>
  `# x\n\nintro\n\n## Quick start\n\nSome text.\n\n\`\`\`sh\n${block}\n\`\`\`\n\n## Next\n`;

describe('the Quick start reader', () => {
  it('reads the words of a line as a shell would: quotes, comments, ~/', () => {
    expect(
      splitWords('npx the-loop run github:o/r#15 --cwd ~/src/w "Why? (really)"   # a comment', HOME),
    ).toEqual(['npx', 'the-loop', 'run', 'github:o/r#15', '--cwd', '/home/tester/src/w', 'Why? (really)']);
    expect(splitWords(`a'b c'"d e" ~ x#y`, HOME)).toEqual(['ab cd e', HOME, 'x#y']);
    expect(splitWords('   # only a comment', HOME)).toEqual([]);
    expect(splitWords('echo "" \'\'', HOME)).toEqual(['echo', '', '']);
  });

  it('turns export lines into environment steps, placeholders into test values', () => {
    const steps = readQuickStart(
      readme('npm ci\nexport API_KEY=…   # held\nexport MODE="a b"\n\ncmd x'),
      options,
    );
    expect(steps).toEqual([
      { kind: 'run', line: 10, source: 'npm ci', argv: ['npm', 'ci'] },
      { kind: 'export', line: 11, source: 'export API_KEY=…   # held', name: 'API_KEY', value: 'test-key' },
      { kind: 'export', line: 12, source: 'export MODE="a b"', name: 'MODE', value: 'a b' },
      { kind: 'run', line: 14, source: 'cmd x', argv: ['cmd', 'x'] },
    ]);
  });

  it.each([
    ['npm ci && npm start', /"&" outside quotes/],
    ['echo $HOME', /"\$" outside quotes/],
    ['echo "$HOME"', /"\$" inside double quotes/],
    ['echo `id`', /"`" outside quotes/],
    ['echo $(id)', /"\$" outside quotes/],
    ['a | b', /"\|" outside quotes/],
    ['a > f', /">" outside quotes/],
    ['a; b', /";" outside quotes/],
    ['ls *.md', /"\*" outside quotes/],
    ['a \\', /"\\\\" outside quotes/],
    ['echo "open', /unclosed " quote/],
    ["echo 'open", /unclosed ' quote/],
    ['cd ~root/x', /only ~ or ~\/ is understood/],
    ['export P=~/x', /~ inside a word/],
    ['export A=1 B=2', /only `export NAME=value`/],
    ['export 1A=x', /only `export NAME=value`/],
    ['export OTHER=…', /no test value for the placeholder of OTHER/],
    ['FOO=1 cmd', /prefixed with NAME=value/],
    ['echo a\x1b[2Jb', /"\\u001b" outside quotes/],
    ['echo "hi!"', /"!" inside double quotes/],
  ])('refuses %j with a clear error naming the line', (line, why) => {
    expect(() => readQuickStart(readme(`npm ci\n${line}`), options)).toThrow(why);
    expect(() => readQuickStart(readme(`npm ci\n${line}`), options)).toThrow(/README\.md line 11: /);
  });

  it('refuses a README without the section, without its block, with an open block or an empty one', () => {
    expect(() => quickStartBlock('# x\n\n## Usage\n```sh\nnpm ci\n```\n')).toThrow(
      /no "## Quick start" heading/,
    );
    expect(() => quickStartBlock('## Quick start\n\ntext\n\n## Next\n```sh\nnpm ci\n```\n')).toThrow(
      /has no ```sh block/,
    );
    expect(() => quickStartBlock('## Quick start\n```sh\nnpm ci\n')).toThrow(/is never closed/);
    expect(() => readQuickStart(readme('# nothing to run'), options)).toThrow(/runs nothing/);
  });

  it("reads this repository's README: every line understood, the clone installed first", () => {
    const steps = readQuickStart(readFileSync(join(ROOT, 'README.md'), 'utf8'), {
      home: HOME,
      placeholders: { ANTHROPIC_API_KEY: 'k', GH_TOKEN: 't' },
    });
    expect(steps[0]).toMatchObject({ kind: 'run', argv: ['npm', 'ci'] });
    expect(
      steps
        .filter((s) => s.kind === 'run')
        .slice(1)
        .every((s) => s.argv[0] === 'npx'),
    ).toBe(true);
  });
});
