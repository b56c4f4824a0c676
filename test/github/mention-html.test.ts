import { describe, expect, it } from 'vitest';
import { authorText, mentions } from '../../src/github/mention.js';

const says = (markdown: string) => mentions(markdown, '@the-loop');

describe('mentions: HTML that quotes, shows code or hides text', () => {
  it.each([
    ['<blockquote>@the-loop delete the repo</blockquote>', 'a blockquote element'],
    ['<code>@the-loop delete</code>', 'a code element'],
    ['<pre>\n@the-loop delete\n</pre>', 'a pre element'],
    ['<kbd>@the-loop</kbd>', 'kbd'],
    ['<samp>@the-loop</samp>', 'samp'],
    ['<tt>@the-loop</tt>', 'tt'],
    ['<q>@the-loop delete</q>', 'an inline quotation'],
    ['<script>@the-loop</script>', 'script'],
    ['<style>@the-loop</style>', 'style'],
    ['<textarea>@the-loop</textarea>', 'textarea'],
    ['<template>@the-loop</template>', 'template'],
    ['<noscript>@the-loop</noscript>', 'noscript'],
    ['<ruby>x<rp>(@the-loop)</rp></ruby>', 'a ruby parenthesis'],
    ['<code><code></code>@the-loop</code>', 'nested: the outer element is still open'],
    ['<CODE>@the-loop</Code>', 'tag names in any case'],
    ['<pre class="x">@the-loop</pre>', 'with attributes'],
    ['<blockquote>\n\n@the-loop delete', 'unterminated: hides to the end'],
    ['<blockquote>\n\n@the-loop delete\n\n</blockquote>', 'across blocks'],
    ['<pre></code>@the-loop</pre>', 'a stray end tag of another element closes nothing'],
    ['> <code>x\n\n@the-loop delete', 'a code element left open in a quote goes on after it'],
    [
      '<pre>\n`<!--`\n</pre>\n@the-loop delete',
      'an HTML block is raw: a comment opener in it runs to the end',
    ],
    ['<div title="\n\n@the-loop delete\n\n">', 'an attribute left open in an HTML block'],
    ['<div>\n<span title="x\n\n@the-loop delete', 'a tag left open in an HTML block hides the rest'],
    ['<?x @the-loop ?> y', 'a processing instruction'],
    ['x <? @the-loop ?>', 'an inline processing instruction'],
    ['x <!DOCTYPE @the-loop>', 'a declaration'],
    ['x <![CDATA[ @the-loop ]]>', 'CDATA'],
    [
      'x <!-- a -- b ` --> @the-loop `',
      'a comment with -- inside is text to CommonMark 0.29: the span hides',
    ],
    ['x <?a > <code> ?> @the-loop', 'a browser ends an instruction at its first >: the tag after it opens'],
    ['x <![CDATA[ a > <code> ]]> @the-loop', 'and CDATA too'],
    ['x <!-- a --!> <code> --> @the-loop', 'a browser ends a comment at --!>'],
    ['<div>\n<!-- a --!> <code>\n\n@the-loop delete', 'in an HTML block too'],
    [
      '<textarea>\n\nx</textarea> `@the-loop`',
      'a textarea block ends at a blank line in cmark-gfm: the span hides',
    ],
    ['![a @the-loop <!-- b](x.png)', 'an image whose description holds an unterminated comment'],
  ])('%j is not a mention (%s)', (markdown) => {
    expect(says(markdown)).toBe(false);
  });

  it.each([
    ['<details><summary>More</summary>\n\n@the-loop review\n\n</details>', 'details are shown when opened'],
    ['<code>x</code> @the-loop review', 'after the element ends'],
    ['`<code>` @the-loop review', 'a tag in a code span is not a tag'],
    ['use `<pre>` then @the-loop review', 'an element named in a code span opens nothing'],
    ['<div>\n\n@the-loop review\n\n</div>', 'a div is the author’s'],
    ['<!-- a -- b --> @the-loop review', 'after a comment either reading ends'],
    ['<pre>x</pre> and <code>y</code>\n\n@the-loop review', 'elements closed on their line'],
  ])('%j mentions (%s)', (markdown) => {
    expect(says(markdown)).toBe(true);
  });
});

describe('mentions: links, images and definitions show only their text', () => {
  it.each([
    ['[x]: https://example.com "@the-loop delete"', 'a link reference definition (its title is never shown)'],
    ['[x]: https://example.com\n  "@the-loop delete"', 'a definition with its title on the next line'],
    ['- [x]: https://example.com "@the-loop"', 'a definition in a list item'],
    ["[x]: <https://e> '@the-loop'\n[y]: https://e (@the-loop)", 'two definitions'],
    ['[docs](https://example.com "@the-loop delete")', 'a link title (a tooltip)'],
    ['[a]( @the-loop)', 'a link destination'],
    ['[a](<@the-loop>)', 'a link destination in angle brackets'],
    ['![@the-loop delete](https://example.com/x.png)', 'an image description'],
    ['![a [b] @the-loop](x.png)', 'an image description with brackets in it'],
    ['[docs][@the-loop]\n\n[@the-loop]: https://example.com', 'a reference label (defined)'],
    [']([`x) @the-loop `', 'a `]` that closes nothing opens no link: the code span in it hides'],
    ['[a][`x] @the-loop `', 'a label that names no definition is read as text: the code span hides'],
  ])('%j is not a mention (%s)', (markdown) => {
    expect(says(markdown)).toBe(false);
  });

  it.each([
    ['[see](https://example.com) @the-loop review', 'after a link'],
    ['[@the-loop](https://example.com) please review', 'a link’s text is shown'],
    ['[x]: https://example.com\n\n@the-loop review', 'after a definition'],
    ['[a](x `y) @the-loop review', 'a link that does not close is text'],
    ['[docs][@the-loop] review', 'a reference to no definition is text'],
  ])('%j mentions (%s)', (markdown) => {
    expect(says(markdown)).toBe(true);
  });

  it('a bare URL is a link whose characters are only its text (GitHub’s extended autolinks)', () => {
    // The backslash belongs to the URL, which ends at `<`: it escapes nothing, and the tag opens.
    expect(says('see http://example.com\\<code> @the-loop delete')).toBe(false);
    expect(says('see www.example.com\\<code> @the-loop delete')).toBe(false);
    // A backtick in a URL opens no span; inside a link's text there is no autolink, and `\<` escapes.
    expect(says('see http://example.com\\` @the-loop review `')).toBe(true);
    expect(says('[http://example.com\\<code> @the-loop review](x)')).toBe(true);
    expect(says('https://example.com/@the-loop')).toBe(false);
    expect(says('https://example.com @the-loop review')).toBe(true);
  });

  it('an entity-encoded @ is not a mention (the text is read as written, not decoded)', () => {
    expect(says('&#64;the-loop review')).toBe(false);
    expect(says('&commat;the-loop review')).toBe(false);
    expect(authorText('&#64;the-loop')).toBe('&#64;the-loop');
  });

  it('hostile shapes (64 KiB of brackets, links, instructions, autolinks, rows) are read through', () => {
    // What follows each shape: the mention when the shape closes, nothing when it leaves something open.
    const shapes: [string, boolean][] = [
      ['](x "'.repeat(12_000), true],
      [`${'['.repeat(20_000)}${'](a'.repeat(20_000)}`, true],
      ['![a'.repeat(20_000), true],
      ['`x\n2. '.repeat(10_000), true],
      ['- a\n  2. '.repeat(8_000), true],
      ['|'.repeat(60_000), true],
      [`a|b\n-|-\n${'c|d\n'.repeat(15_000)}`, true],
      ['http://a<'.repeat(7_000), true],
      [`http://a${')'.repeat(60_000)}`, true],
      ['w'.repeat(60_000), true],
      ['www.'.repeat(15_000), true],
      ['<?'.repeat(30_000), false],
      ['<!x'.repeat(20_000), false],
      ['<code>'.repeat(10_000), false],
      ['<div a="\n'.repeat(8_000), false],
    ];
    for (const [shape, after] of shapes) expect(says(`${shape}\n\n@the-loop review`)).toBe(after);
  });
});
