// com.atproto.repo.getRecord: a record from the index, its value read from the block store.
import type { Server } from '../../../../generated/server/index.js'
import type { OutputSchema } from '../../../../generated/server/types/com/atproto/repo/getRecord.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { readableRepo, recordAsJson } from '../../../../repo/read.js'
import { jsonText } from '../../../json-text.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.getRecord<AuthFor<'com.atproto.repo.getRecord'>>(async ({ params }) => {
    const account = await readableRepo(db, params.repo)
    const uri = `at://${account.did}/${params.collection}/${params.rkey}`
    const rec = await recordAsJson(db, account.did, uri)
    if (!rec || (params.cid && params.cid !== rec.cid)) throw xrpcError('RecordNotFound', `Could not locate record: ${uri}`)
    // {uri, cid, value}: the output is the record's JSON text as it is
    return jsonText<OutputSchema>(rec.json)
  })
