// Multi-row INSERTs of many rows (importRepo: tens of thousands) through raw.ts: no query tree
// per row, one SQL text per chunk size. Callers pass rows sorted by the table's primary key, so
// the B-tree only ever appends.
import type { Dialect } from './dialect.js'
import { exec, valuesList } from './raw.js'
import type { Store } from './schema.js'

// bound parameters per statement: under SQLite's 32766 and PostgreSQL's 65535. Rows per
// statement: SQLite's prepare time (and the cached statement's size) grows faster than the VALUES
// list (0.7 ms for 200 rows, 6.5 ms for 2000, 26 ms for 4000); running the rows costs about the
// same either way.
const MAX_PARAMS = 30_000
const MAX_ROWS = 256

/**
 * inserts rows given flat, `columns.length` values per row, in order; with `skipConflictOn` (a
 * unique key's columns) a row whose key is already stored is skipped. Returns the rows inserted.
 */
export async function bulkInsert(
  db: Store,
  dialect: Dialect,
  table: string,
  columns: readonly string[],
  values: readonly unknown[],
  opts: { skipConflictOn?: readonly string[] } = {},
): Promise<number> {
  const width = columns.length
  if (values.length % width !== 0) throw new Error(`bulkInsert: ${values.length} values do not make rows of ${width}`)
  const per = Math.max(1, Math.min(MAX_ROWS, Math.floor(MAX_PARAMS / width)))
  const into = `insert into "${table}" (${names(columns)}) values `
  const skip = opts.skipConflictOn ? ` on conflict (${names(opts.skipConflictOn)}) do nothing` : ''
  let inserted = 0
  for (let i = 0; i < values.length; i += per * width) {
    const chunk = values.slice(i, i + per * width)
    inserted += Number((await exec(db, dialect, into + valuesList(chunk.length / width, width) + skip, chunk)).numAffectedRows ?? 0)
    // pg's query promise leaves the values reachable from old-generation garbage after the
    // statement ran; emptied, the rows die young instead of being promoted (PostgreSQL imports)
    chunk.length = 0
  }
  return inserted
}

const names = (columns: readonly string[]) => columns.map((c) => `"${c}"`).join(', ')
