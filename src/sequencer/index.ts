// The durable event log the firehose is served from: one row per event, a global monotonic seq
// assigned by the store, payload the DAG-CBOR body of the subscribeRepos message without its
// `seq` and `time` (both are filled in from the row when served).
import * as dagCbor from '@ipld/dag-cbor'
import { prepared } from '../db/prepared.js'
import type { AccountStatus, EventTable } from '../db/index.js'
import { advisoryLockAndNotify } from '../db/dialect.js'
import { EVENT_CHANNEL } from './wakeup.js'
import type { Writer } from '../db/store.js'

const EVENT_LOCK = 7_340_001

/** `body` as an object, or already DAG-CBOR; handed to the local firehose once `db` commits */
export async function appendEvent(
  db: Writer,
  type: EventTable['type'],
  did: string,
  body: Record<string, unknown> | Uint8Array,
): Promise<number> {
  // PostgreSQL hands out sequence numbers before commit, so two transactions could commit their
  // events out of seq order and a reader could step past one not yet visible. One lock held from
  // here to commit makes seq order the commit order (SQLite writers are serialized already).
  // The notification (delivered at commit, not before) wakes the firehose of every process
  // sharing this schema (sequencer/wakeup.ts).
  await advisoryLockAndNotify(db, EVENT_LOCK, EVENT_CHANNEL)
  const payload = body instanceof Uint8Array ? body : dagCbor.encode(body)
  const at = new Date().toISOString()
  const [row] = await insertEvent(db, type, did, payload, at)
  const event = { seq: row.seq, type, payload, sequenced_at: at }
  const { firehose } = db
  db.onCommit(() => firehose([event]))
  return row.seq
}

const insertEvent = prepared((db, type: EventTable['type'], did: string, payload: Uint8Array, at: string) =>
  db.insertInto('event').values({ type, did, payload, sequenced_at: at }).returning('seq'),
)

export const identityEvent = (db: Writer, did: string, handle?: string) =>
  appendEvent(db, 'identity', did, handle ? { did, handle } : { did })

/** `#account`: active is true only for status active; inactive ones name their status */
export const accountEvent = (db: Writer, did: string, status: AccountStatus) =>
  appendEvent(db, 'account', did, status === 'active' ? { did, active: true } : { did, active: false, status })

export const tombstoneEvent = (db: Writer, did: string) => appendEvent(db, 'tombstone', did, { did })
