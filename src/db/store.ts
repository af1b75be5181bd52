// The store every module writes through: it holds the Kysely instance, runs every
// transaction of the app (`transact`), and carries what Kysely has no notion of: the dialect,
// durability, snapshots. Reads and single statements use the query builder methods it passes on
// to Kysely (`db.selectFrom(...)`), so a query helper takes the store or a transaction alike.
import type { Kysely, Transaction } from 'kysely'
import type pg from 'pg'
import type { Dialect } from './dialect.js'
import type { Schema } from './schema.js'
import type { Snapshot } from './snapshot.js'
import { STORE_RETRY } from '../limits.js'

/** a transaction of `Db.transact` */
export type Tx = Transaction<Schema> & {
  /**
   * runs `cb` once this transaction has committed and is durable, after the callbacks registered
   * before it; never when it rolls back (a retried attempt starts with none)
   */
  onCommit(cb: () => void): void
  /** the store's `firehose` */
  readonly firehose: EventSink
}

/** takes events this process appended, committed and durable, in seq order */
/** an event appended in a transaction, handed to this process's firehose once it commits */
export type LocalEvent = { seq: number; type: string; payload: Uint8Array; sequenced_at: string }
export type EventSink = (events: LocalEvent[]) => void

/** a store that can write: a statement on `Db` alone commits as it returns, a `Tx` at its end */
export type Writer = Db | Tx

export type DbParts = {
  kysely: Kysely<Schema>
  dialect: Dialect
  /** PostgreSQL only */
  pool?: pg.Pool
  durable: () => Promise<void>
  snapshot: () => Promise<Snapshot>
  /** a transaction that failed with an error this accepts, before COMMIT, runs again */
  retryable: (err: unknown) => boolean
}

type K = Kysely<Schema>

export class Db {
  /** the Kysely instance itself: for the migrator and the few places that need all of it */
  readonly kysely: Kysely<Schema>
  readonly dialect: Dialect
  /** PostgreSQL only: for pool metrics */
  readonly pool?: pg.Pool
  /**
   * resolves once every transaction committed so far is on disk: for readers that pass rows on
   * to others (the firehose). A writer's own call already waits for its commit to be durable.
   */
  durable(): Promise<void> {
    return this.parts.durable()
  }
  /** a consistent read-only view that does not hold writers up, until its `end` (db/snapshot.ts) */
  snapshot(): Promise<Snapshot> {
    return this.parts.snapshot()
  }
  /**
   * this process's firehose: the sequencer hands it each event it appends as soon as the event's
   * transaction has committed (`onCommit`), instead of the firehose waiting to read the log
   */
  firehose: EventSink = () => {}

  // the query builder, passed on to Kysely: reads and single statements need no transaction
  readonly selectFrom: K['selectFrom']
  readonly selectNoFrom: K['selectNoFrom']
  readonly insertInto: K['insertInto']
  readonly updateTable: K['updateTable']
  readonly deleteFrom: K['deleteFrom']
  readonly with: K['with']
  readonly fn: K['fn']
  readonly executeQuery: K['executeQuery']
  readonly getExecutor: K['getExecutor']

  constructor(private readonly parts: DbParts) {
    const k = (this.kysely = parts.kysely)
    this.selectFrom = k.selectFrom.bind(k)
    this.selectNoFrom = k.selectNoFrom.bind(k)
    this.insertInto = k.insertInto.bind(k)
    this.updateTable = k.updateTable.bind(k)
    this.deleteFrom = k.deleteFrom.bind(k)
    this.with = k.with.bind(k)
    this.fn = k.fn
    this.executeQuery = k.executeQuery.bind(k)
    this.getExecutor = k.getExecutor.bind(k)
    this.dialect = parts.dialect
    this.pool = parts.pool
  }

  /**
   * Runs `fn` in one transaction and returns what it returns, once the transaction is durable.
   *
   * A transaction whose connection was lost before COMMIT was sent rolled back in full, so it runs
   * again on a fresh connection (several processes share one PostgreSQL, and a connection can be
   * cut under any of them); one that failed while committing may have committed, and its error
   * goes to the caller. `fn` may therefore run more than once: it must not act outside the
   * transaction, but register that with `tx.onCommit`, which runs for the committed attempt only.
   */
  async transact<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const callbacks: (() => void)[] = []
      let committing = false
      let out: T
      try {
        // COMMIT returns once the transaction is durable: PostgreSQL's by itself; on SQLite the
        // driver lets the next writer in as soon as COMMIT is done and then waits for the group
        // fsync of the write-ahead log it shares with the commits around it (dialect-sqlite.ts)
        out = await this.kysely.transaction().execute(async (trx) => {
          // the transaction object is this attempt's alone, and so are the callbacks it collects
          const tx: Tx = Object.assign(trx, { onCommit: (cb: () => void) => void callbacks.push(cb), firehose: this.firehose })
          const result = await fn(tx)
          committing = true
          return result
        })
      } catch (err) {
        if (committing || attempt >= STORE_RETRY.transactAttempts || !this.parts.retryable(err)) throw err
        await new Promise((r) => setTimeout(r, STORE_RETRY.transactBackoffMs * attempt))
        continue
      }
      for (const cb of callbacks) cb()
      return out
    }
  }

  /** for a `Writer` outside a transaction: the statement before this call has committed already */
  onCommit(cb: () => void): void {
    cb()
  }

  destroy(): Promise<void> {
    return this.kysely.destroy()
  }
}
