// The durable event log the firehose is served from: one row per event, a global monotonic seq
// assigned by the store, payload the DAG-CBOR body of the subscribeRepos message without its
// `seq` and `time` (both are filled in from the row when served).
import * as dagCbor from '@ipld/dag-cbor'
import type { Kysely, Transaction } from 'kysely'
import type { AccountStatus, EventTable, Schema } from '../db/index.js'

type Store = Kysely<Schema> | Transaction<Schema>

export async function appendEvent(
  db: Store,
  type: EventTable['type'],
  did: string,
  body: Record<string, unknown>,
): Promise<number> {
  const row = await db
    .insertInto('event')
    .values({ type, did, payload: dagCbor.encode(body), sequenced_at: new Date().toISOString() })
    .returning('seq')
    .executeTakeFirstOrThrow()
  return row.seq
}

export const identityEvent = (db: Store, did: string, handle?: string) =>
  appendEvent(db, 'identity', did, handle ? { did, handle } : { did })

/** `#account`: active is true only for status active; inactive ones name their status */
export const accountEvent = (db: Store, did: string, status: AccountStatus) =>
  appendEvent(db, 'account', did, status === 'active' ? { did, active: true } : { did, active: false, status })

export const tombstoneEvent = (db: Store, did: string) => appendEvent(db, 'tombstone', did, { did })
