import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Records with identical values share one block (its CID is the value's hash): a block row counts
// the records whose value it is, and goes when the last of them does. The count lives on the block
// row, whose (did, cid) key every write touches anyway, in place of an index of records by CID:
// that index took a B-tree page of its own for every record written (CIDs are hashes), most of
// what a write cost more in a repository of a million records than in one of ten thousand.
// Tree nodes and commits keep 1.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('repo_block')
    .addColumn('refs', 'integer', (c) => c.notNull().defaultTo(1))
    .execute()
  // values shared by several records, counted while the index still finds them
  await sql`
    update repo_block set refs = shared.n
    from (select did, cid, count(*) as n from record group by did, cid having count(*) > 1) as shared
    where repo_block.did = shared.did and repo_block.cid = shared.cid`.execute(db)
  await db.schema.dropIndex('record_cid_idx').execute()
}
