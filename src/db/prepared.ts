// Hot queries compiled once per dialect. Kysely builds and compiles a query's SQL on every call,
// which costs more than SQLite takes to answer a primary-key lookup; a prepared query is built
// on first use with marker arguments, and later calls only put their values in the markers' places.
import type { CompiledQuery, Compilable } from 'kysely'
import { dialectOf } from './dialect.js'
import type { Store } from './schema.js'

type Compiled<R> = { query: CompiledQuery<R>; slots: number[] }

const marker = (i: number) => `\u0000prepared-arg-${i}`

/**
 * `build` must use each argument as a plain value (a comparison or an inserted value), never to
 * choose the query's shape: the shape is fixed by the first call.
 */
export function prepared<A extends unknown[], R>(build: (db: Store, ...args: A) => Compilable<R>) {
  const byDialect: { sqlite?: Compiled<R>; postgres?: Compiled<R> } = {}
  return async (db: Store, ...args: A): Promise<R[]> => {
    const dialect = dialectOf(db)
    const c = (byDialect[dialect] ??= compile(db, build, args.length))
    const parameters = c.query.parameters.map((p, i) => (c.slots[i] >= 0 ? args[c.slots[i]] : p))
    const { rows } = await db.executeQuery<R>({ ...c.query, parameters })
    return rows
  }
}

function compile<A extends unknown[], R>(db: Store, build: (db: Store, ...args: A) => Compilable<R>, n: number): Compiled<R> {
  const markers = Array.from({ length: n }, (_, i) => marker(i)) as A
  const query = build(db, ...markers).compile()
  const slots = query.parameters.map((p) => (typeof p === 'string' ? markers.indexOf(p) : -1))
  for (let i = 0; i < n; i++) if (!slots.includes(i)) throw new Error(`prepared query does not use argument ${i}`)
  return { query, slots }
}
