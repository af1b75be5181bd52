// com.atproto.sync.getRecord: a CAR proving the record's presence (or absence) under the current
// commit: the commit, the MST path and the record block. A taken-down record is not served.
import { Readable } from 'node:stream'
import { getRecords } from '@atproto/repo'
import { parseCid } from '@atproto/lex-data'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { checkCollection, checkRkey } from '../../../../repo/prepare.js'
import { syncRepo } from '../../../../repo/read.js'
import { SqlRepoStorage } from '../../../../repo/storage.js'
import { concat } from '../../../../repo/util.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRecord<AuthFor<'com.atproto.sync.getRecord'>>(async ({ params }) => {
    const path = { collection: checkCollection(params.collection), rkey: checkRkey(params.rkey) }
    const car = await db.transaction().execute(async (trx) => {
      const { root } = await syncRepo(trx, params.did)
      const uri = `at://${params.did}/${path.collection}/${path.rkey}`
      const row = await trx.selectFrom('record').select('takedown_ref').where('uri', '=', uri).executeTakeFirst()
      if (row && row.takedown_ref !== null) throw xrpcError('RecordNotFound', `Could not locate record: ${uri}`)
      const storage = new SqlRepoStorage(trx, params.did)
      return concat(getRecords(storage, parseCid(root.cid), [path as never]))
    })
    return { encoding: 'application/vnd.ipld.car', body: Readable.from([car]) }
  })
