/**
 * What reads as SQL in a string or template literal (a template's `${…}` read as `?`):
 * - SQL as this codebase writes it: keywords in upper case, in the shape of a statement;
 * - a statement in any case with its full shape: `select … from t where|join|group by|order by|limit`,
 *   `insert into t (`, `update t set c =`, `delete from t where`, `create table t`, `pragma p =` …;
 * - and, whatever else it holds, the text handed to `.prepare(` or `.exec(` when it starts with a
 *   statement keyword in any case (`db.exec('pragma foreign_keys = on')`).
 * Prose ("select a file from the list", "delete from the queue") lacks the shape, and an HTTP method
 * name alone ('DELETE', 'UPDATE') is not a statement, so neither trips it.
 */
export const SQL =
  /\b(?:SELECT\b[\s\S]*?\bFROM|INSERT\s+(?:OR\s+[A-Z]+\s+)?INTO|REPLACE\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|(?:CREATE|DROP)\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)|ALTER\s+TABLE|PRAGMA\s+\w+|BEGIN\s+(?:IMMEDIATE|EXCLUSIVE|DEFERRED))\b/;

/** A table name: not an English determiner ("from the list where", "update your config set"). */
const T = String.raw`(?!(?:the|a|an|this|that|these|those|your|our|my|its|their|each|every|all|any|some|one)\b)[\w.]+`;

const STATEMENT_SHAPE = new RegExp(
  [
    String.raw`\bselect\s+(?:distinct\s+)?[\w*?.,()\s]+?\s+from\s+${T}(?:\s+(?:as\s+)?\w+)?\s+(?:where|join|inner|left|group\s+by|order\s+by|limit)\b`,
    String.raw`\binsert\s+(?:or\s+\w+\s+)?into\s+${T}\s*(?:\(|values\b|select\b|default\b)`,
    String.raw`\breplace\s+into\s+${T}\s*\(`,
    String.raw`\bupdate\s+${T}\s+set\s+\w+\s*=`,
    String.raw`\bdelete\s+from\s+${T}\s*(?:where\b|returning\b|;|$)`,
    String.raw`\b(?:create|drop)\s+(?:unique\s+|temp(?:orary)?\s+)?(?:table|index|view|trigger)\s+(?:if\s+(?:not\s+)?exists\s+)?${T}\s*(?:\(|on\b|as\b|;|$)`,
    String.raw`\balter\s+table\s+${T}\s+(?:add|drop|rename)\b`,
    String.raw`\bpragma\s+${T}\s*(?:=|\(|;|$)`,
    String.raw`\bbegin\s+(?:immediate|exclusive|deferred)\b`,
  ].join('|'),
  'i',
);

const STATEMENT_START =
  /^\s*(?:select|insert|replace|update|delete|create|drop|alter|pragma|begin|commit|rollback|savepoint|release|with|vacuum|analyze|attach|detach|reindex)\b/i;

export function readsAsSql(text: string): boolean {
  return SQL.test(text) || STATEMENT_SHAPE.test(text);
}

/** The argument of `.prepare(` / `.exec(`: SQL as soon as it starts with a statement keyword. */
export function startsAsSql(text: string): boolean {
  return STATEMENT_START.test(text);
}
