// In-process delivery of this process's own events: each event appended inside a transaction is
// remembered with that transaction and handed to the firehose as soon as the transaction has
// committed (on SQLite, once its fsync is done: what the writer's answer waits for too), instead
// of waiting for the next read of the log. The log stays the source of truth: the firehose takes
// a handed event only when it directly follows the last one it sent, and reads the log otherwise.
import type { Db, Schema } from '../db/index.js'
import type { Store } from '../db/schema.js'
import { afterCommit } from '../patches/kysely.js'

export type LocalEvent = { seq: number; type: string; payload: Uint8Array; sequenced_at: string }
type Sink = (events: LocalEvent[]) => void

const pending = new WeakMap<object, LocalEvent[]>()
const sinks = new WeakMap<object, Sink>()

/** `db` has just appended `ev` (within a transaction, or alone: then it is committed already) */
export function noteEvent(db: Store, ev: LocalEvent) {
  if (db.isTransaction) {
    const list = pending.get(db)
    if (list) list.push(ev)
    else pending.set(db, [ev])
  } else sinks.get(db)?.([ev])
}

/** hands the events of every transaction committed through `db` to `sink` */
export function deliverCommittedEvents(db: Db, sink: Sink) {
  sinks.set(db, sink)
  // a retried transaction runs its work again on a new one: only the last, committed, counts
  afterCommit<Schema>(db, (trx) => {
    const events = pending.get(trx)
    if (!events) return
    pending.delete(trx)
    sink(events)
  })
}
