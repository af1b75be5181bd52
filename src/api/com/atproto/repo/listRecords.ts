// com.atproto.repo.listRecords: newest rkey first (reverse: oldest first), paged by rkey along the
// (did, collection, rkey) index.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { readableRepo, recordJson } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.listRecords(async ({ params }) => {
    const account = await readableRepo(db, params.repo)
    const limit = params.limit ?? 50
    const asc = params.reverse === true
    let q = db
      .selectFrom('record')
      .innerJoin('repo_block', (j) => j.onRef('repo_block.did', '=', 'record.did').onRef('repo_block.cid', '=', 'record.cid'))
      .select(['record.uri', 'record.cid', 'record.rkey', 'repo_block.content'])
      .where('record.did', '=', account.did)
      .where('record.collection', '=', params.collection)
      .orderBy('record.rkey', asc ? 'asc' : 'desc')
      .limit(limit)
    if (params.cursor) q = q.where('record.rkey', asc ? '>' : '<', params.cursor)
    const rows = await q.execute()
    return {
      encoding: 'application/json',
      body: {
        records: rows.map((r) => ({ uri: r.uri, cid: r.cid, value: recordJson(new Uint8Array(r.content)) })),
        ...(rows.length === limit ? { cursor: rows[rows.length - 1].rkey } : {}),
      },
    }
  })
