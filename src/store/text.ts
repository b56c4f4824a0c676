/**
 * PostgreSQL's text cannot hold U+0000 (SQLite's can): a NUL would make the whole row fail to be kept,
 * so the PostgreSQL stores write it as U+FFFD instead, the same every time (a JSON text's NUL is
 * already escaped). Kept here, beside the other dialect-neutral row helpers, as one pure function.
 */
export function noNul<T extends string | null | undefined>(value: T): T {
  return (
    typeof value === 'string' && value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value
  ) as T;
}
