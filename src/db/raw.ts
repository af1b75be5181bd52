// The hot statements of a repository write, as SQL text compiled once per shape and run as-is:
// Kysely builds and compiles a query anew on every call, which costs more than these statements
// themselves. Text is written with `?` placeholders and numbered ($1, $2, ...) for PostgreSQL.
import { CompiledQuery, type QueryResult } from 'kysely'
import { numberPlaceholders, type Dialect } from './dialect.js'
import type { Store } from './schema.js'

// distinct texts: a handful of statements times the row counts they are used with
const MAX_TEXTS = 2000
const texts = new Map<string, string>()

function cached(key: string, make: () => string): string {
  let t = texts.get(key)
  if (t === undefined) {
    if (texts.size >= MAX_TEXTS) texts.clear()
    texts.set(key, (t = make()))
  }
  return t
}

/** runs `sql` (with `?` placeholders, none inside literals) on `db` */
export function exec<R = unknown>(db: Store, dialect: Dialect, sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
  const text = dialect === 'sqlite' ? sql : cached(`pg:${sql}`, () => numberPlaceholders(dialect, sql))
  return db.executeQuery<R>(CompiledQuery.raw(text, params as unknown[]))
}

/** `(?, ?), (?, ?)` for `rows` rows of `width` values */
export const valuesList = (rows: number, width: number) =>
  cached(`values:${rows}:${width}`, () => {
    const row = `(${Array(width).fill('?').join(', ')})`
    return Array(rows).fill(row).join(', ')
  })

/** `(?, ?, ?)` for an IN list of `n` */
export const inList = (n: number) => cached(`in:${n}`, () => `(${Array(n).fill('?').join(', ')})`)

/** rows changed by an INSERT, UPDATE or DELETE */
export const changed = (res: QueryResult<unknown>) => Number(res.numAffectedRows ?? 0)
