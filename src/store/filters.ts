/**
 * A list's WHERE clause from its filter, for either store: the conditions are the same, only how a
 * bound value is written differs (`?` in SQLite, `$n` in PostgreSQL). Column names and operators are
 * fixed strings chosen by the caller, never outside text; every value is bound.
 */

/** A column compared with a bound value, or a fixed clause that binds nothing. */
export type Condition = { column: string; op: '=' | '>=' | '<'; value: unknown } | { sql: string };

/**
 * `WHERE a AND b …` (empty when there is no condition) and its values in order; `placeholder(n)` writes
 * the n-th bound value (from 1).
 */
export function whereOf(
  conditions: readonly Condition[],
  placeholder: (n: number) => string,
): { where: string; values: unknown[] } {
  const values: unknown[] = [];
  const clauses = conditions.map((c) => {
    if ('sql' in c) return c.sql;
    values.push(c.value);
    return `${c.column} ${c.op} ${placeholder(values.length)}`;
  });
  return { where: clauses.length ? `WHERE ${clauses.join(' AND ')}` : '', values };
}
