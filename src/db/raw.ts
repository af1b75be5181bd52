// SQL text run as-is, for the two statements no query builder shape serves: multi-row INSERTs of
// hundreds of rows (bulk-insert.ts: building a Kysely tree per row costs more than running it) and
// PostgreSQL's cursor commands (ordered-pages.ts). Lint keeps it inside db/: every other query is a
// Kysely query, prepared (prepared.ts) where it is hot. Text is written with `?` placeholders and
// numbered ($1, $2, ...) for PostgreSQL.
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
  // the caller's array itself, not a frozen copy: bulkInsert empties its chunks once they ran
  return db.executeQuery<R>({ ...CompiledQuery.raw(text), parameters: params })
}

/** `(?, ?), (?, ?)` for `rows` rows of `width` values */
export const valuesList = (rows: number, width: number) =>
  cached(`values:${rows}:${width}`, () => {
    const row = `(${Array(width).fill('?').join(', ')})`
    return Array(rows).fill(row).join(', ')
  })
