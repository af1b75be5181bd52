// com.atproto.repo.getRecord: a record from the index, its value read from the block store.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { xrpcError } from '../../../../errors.js'
import { readableRepo, recordJson } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.getRecord(async ({ params }) => {
    const account = await readableRepo(db, params.repo)
    const uri = `at://${account.did}/${params.collection}/${params.rkey}`
    const row = await db
      .selectFrom('record')
      .innerJoin('repo_block', (j) => j.onRef('repo_block.did', '=', 'record.did').onRef('repo_block.cid', '=', 'record.cid'))
      .select(['record.cid', 'repo_block.content'])
      .where('record.uri', '=', uri)
      .executeTakeFirst()
    if (!row || (params.cid && params.cid !== row.cid)) throw xrpcError('RecordNotFound', `Could not locate record: ${uri}`)
    return {
      encoding: 'application/json',
      body: { uri, cid: row.cid, value: recordJson(new Uint8Array(row.content)) },
    }
  })
