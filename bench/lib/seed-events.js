#!/usr/bin/env node
// Seeding for the backfill point of `make bench-scale`: grows the event log of a server that is
// not running to at least N events by copying its own `#commit` rows (real frames written by
// createRecord earlier), in seq order, so a replay from cursor 0 has a large log of realistic
// frames to send. Not a product path: the bench only.
//
//   node bench/lib/seed-events.js <events>    (the server's PDS_* environment)
import { sql } from 'kysely'
import { loadConfig } from '../../dist/config.js'
import { openDb } from '../../dist/db/index.js'

const target = Number(process.argv[2])
const config = loadConfig(process.env)
const db = await openDb(config.db)
const count = async () => Number((await sql`select count(*) as n from event`.execute(db)).rows[0].n)
let n = await count()
const [{ seq: firstCommit } = { seq: undefined }] = await db
  .selectFrom('event')
  .select('seq')
  .where('type', '=', 'commit')
  .orderBy('seq')
  .limit(1)
  .execute()
if (firstCommit === undefined) throw new Error('no #commit event to copy')
while (n < target) {
  // at most 50,000 rows a transaction, so the WAL stays small
  const take = Math.min(n, target - n, 50_000)
  await sql`insert into event (type, did, payload, sequenced_at)
    select type, did, payload, sequenced_at from event where type = 'commit' order by seq limit ${take}`.execute(db)
  n = await count()
}
await db.destroy()
