// Hot queries compiled once per dialect. Kysely builds and compiles a query's SQL on every call,
// which costs more than SQLite takes to answer a primary-key lookup; a prepared query is built
// on first use with marker arguments, and later calls only put their values in the markers' places.
import type { CompiledQuery, Compilable, QueryResult } from 'kysely'
import { dialectOf } from './dialect.js'
import type { Store } from './schema.js'

type Compiled<R> = { query: CompiledQuery<R>; slots: number[] }

const marker = (i: number) => `\u0000prepared-arg-${i}`

/**
 * `build` must use each argument as a plain value (a comparison or an inserted value), never to
 * choose the query's shape: the shape is fixed by the first call.
 */
export function prepared<A extends unknown[], R>(build: (db: Store, ...args: A) => Compilable<R>) {
  const run = preparedResult(build)
  return async (db: Store, ...args: A): Promise<R[]> => (await run(db, ...args)).rows
}

/** as prepared, for an INSERT, UPDATE or DELETE: gives the number of rows it changed */
export function preparedChange<A extends unknown[]>(build: (db: Store, ...args: A) => Compilable<unknown>) {
  const run = preparedResult(build)
  return async (db: Store, ...args: A): Promise<number> => changes(await run(db, ...args))
}

function preparedResult<A extends unknown[], R>(build: (db: Store, ...args: A) => Compilable<R>) {
  const byDialect: { sqlite?: Compiled<R>; postgres?: Compiled<R> } = {}
  return (db: Store, ...args: A): Promise<QueryResult<R>> => {
    const dialect = dialectOf(db)
    const c = (byDialect[dialect] ??= compile(args.length, (m) => build(db, ...(m as A))))
    return execute(db, c, args)
  }
}

// distinct list lengths kept compiled per query: callers cut their lists into chunks of a few
// hundred, so a query sees few lengths; past this many the cache starts over
const MAX_LENGTHS = 600

/**
 * A prepared query around an IN list: `build` gets `list` as an array of values (for `in`), and
 * the query is compiled once per dialect and list length. `list` must not be empty.
 */
export function preparedIn<T, A extends unknown[], R>(build: (db: Store, list: T[], ...args: A) => Compilable<R>) {
  const run = preparedInResult(build)
  return async (db: Store, list: readonly T[], ...args: A): Promise<R[]> => (await run(db, list, ...args)).rows
}

/** as preparedIn, for an UPDATE or DELETE: gives the number of rows it changed */
export function preparedInChange<T, A extends unknown[]>(build: (db: Store, list: T[], ...args: A) => Compilable<unknown>) {
  const run = preparedInResult(build)
  return async (db: Store, list: readonly T[], ...args: A): Promise<number> => changes(await run(db, list, ...args))
}

function preparedInResult<T, A extends unknown[], R>(build: (db: Store, list: T[], ...args: A) => Compilable<R>) {
  const compiled = new Map<string, Compiled<R>>()
  return (db: Store, list: readonly T[], ...args: A): Promise<QueryResult<R>> => {
    if (list.length === 0) throw new Error('preparedIn: an empty list')
    const key = `${dialectOf(db)}:${list.length}`
    let c = compiled.get(key)
    if (c === undefined) {
      if (compiled.size >= MAX_LENGTHS) compiled.clear()
      const n = list.length
      c = compile(n + args.length, (m) => build(db, m.slice(0, n) as T[], ...(m.slice(n) as A)))
      compiled.set(key, c)
    }
    return execute(db, c, [...list, ...args])
  }
}

function execute<R>(db: Store, c: Compiled<R>, args: readonly unknown[]): Promise<QueryResult<R>> {
  const parameters = c.query.parameters.map((p, i) => (c.slots[i] >= 0 ? args[c.slots[i]] : p))
  return db.executeQuery<R>({ ...c.query, parameters })
}

const changes = (res: QueryResult<unknown>) => Number(res.numAffectedRows ?? 0)

function compile<R>(n: number, build: (markers: unknown[]) => Compilable<R>): Compiled<R> {
  const markers = Array.from({ length: n }, (_, i) => marker(i))
  const query = build(markers).compile()
  const slots = query.parameters.map((p) => (typeof p === 'string' ? markers.indexOf(p) : -1))
  for (let i = 0; i < n; i++) if (!slots.includes(i)) throw new Error(`prepared query does not use argument ${i}`)
  return { query, slots }
}
