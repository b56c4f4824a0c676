/**
 * Folding of words for matching. A shell runs `gіt push` (Cyrillic і) as a program named `gіt`, which
 * normally does not exist; but an alias, a function, a symlink or a case-insensitive file system can
 * make it run git, and the intent is plain either way. So the classifier matches command names and
 * arguments on their folded form and, when folding changed a word, says so (`evasion: 'unicode'`).
 *
 * Folding only ever makes a command *more* suspicious: words that suppress an act (`--dry-run`, a
 * read-only git subcommand) are compared as written, so a look-alike `--dry‐run` never hides a push.
 */

/**
 * Latin look-alikes in Cyrillic, Greek and IPA that NFKC leaves alone (after NFKC, fullwidth letters
 * are already ASCII). A small table of the letters that spell command names; not Unicode's whole
 * confusables list, which maps far more than names need.
 */
const LOOK_ALIKES: Record<string, string> = {
  // Cyrillic lower case
  а: 'a',
  в: 'b',
  е: 'e',
  һ: 'h',
  і: 'i',
  ј: 'j',
  к: 'k',
  ӏ: 'l',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  ԛ: 'q',
  г: 'r',
  ѕ: 's',
  т: 't',
  у: 'y',
  ԝ: 'w',
  х: 'x',
  с: 'c',
  ԁ: 'd',
  ё: 'e',
  ї: 'i',
  // Cyrillic upper case
  А: 'A',
  В: 'B',
  Е: 'E',
  Һ: 'H',
  І: 'I',
  Ј: 'J',
  К: 'K',
  М: 'M',
  Н: 'H',
  О: 'O',
  Р: 'P',
  Ѕ: 'S',
  Т: 'T',
  Х: 'X',
  С: 'C',
  У: 'Y',
  // Greek
  α: 'a',
  β: 'b',
  γ: 'y',
  ε: 'e',
  η: 'n',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
  χ: 'x',
  ω: 'w',
  Α: 'A',
  Β: 'B',
  Ε: 'E',
  Η: 'H',
  Ι: 'I',
  Κ: 'K',
  Μ: 'M',
  Ν: 'N',
  Ο: 'O',
  Ρ: 'P',
  Τ: 'T',
  Υ: 'Y',
  Χ: 'X',
  Ζ: 'Z',
  // Dashes that read as '-' (NFKC leaves these alone)
  '\u2010': '-',
  '\u2012': '-',
  '\u2013': '-',
  '\u2014': '-',
  '\u2015': '-',
  '\u2212': '-',
  '\u2043': '-',
  // Latin letters outside ASCII that read as ASCII
  ı: 'i',
  ȷ: 'j',
  ɡ: 'g',
  ɑ: 'a',
  ɩ: 'i',
  ʜ: 'h',
  ᴜ: 'u',
  ꜱ: 's',
  ᴘ: 'p',
  ʀ: 'r',
  ɢ: 'g',
  ᴛ: 't',
};

/** Format characters (zero-width space/joiners, bidi controls, soft hyphen, BOM, tag characters) and variation selectors. */
const INVISIBLE = /\p{Cf}|[\u115F\u1160\u17B4\u17B5\u3164]|\u034F|[\uFE00-\uFE0F]|[\u{E0100}-\u{E01EF}]/gu;
/** Spaces that are not ASCII space: a shell keeps them inside a word; a reader sees two words. */
const ODD_SPACE = /[\p{Zs}\u2028\u2029\u0085]/gu;
const COMBINING = /\p{Mn}/gu;
const PLAIN = /^[\x20-\x7e]*$/;

/**
 * The folded form of a word: NFKC, invisible characters removed, non-ASCII spaces made ASCII spaces,
 * combining marks dropped, look-alike letters mapped to Latin. Printable ASCII is returned as it is.
 */
export function fold(word: string): string {
  if (PLAIN.test(word)) return word;
  const normal = word.normalize('NFKC').replace(INVISIBLE, '').replace(ODD_SPACE, ' ');
  const bare = normal.normalize('NFD').replace(COMBINING, '').normalize('NFC');
  let out = '';
  for (const ch of bare) out += LOOK_ALIKES[ch] ?? ch;
  return out;
}

/** The basename of a program path (`/usr/bin/git` → `git`), kept when it ends in `/`. */
export function programBase(name: string): string {
  const slash = name.lastIndexOf('/');
  return slash >= 0 && slash < name.length - 1 ? name.slice(slash + 1) : name;
}
