// com.atproto.repo.listRecords: newest rkey first (reverse: oldest first), paged by rkey along the
// (did, collection, rkey) index.
import type { Server } from '../../../../generated/server/index.js'
import type { OutputSchema } from '../../../../generated/server/types/com/atproto/repo/listRecords.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { readableRepo, recordPageAsJson } from '../../../../repo/read.js'
import { jsonText } from '../../../json-text.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.listRecords<AuthFor<'com.atproto.repo.listRecords'>>(async ({ params }) => {
    const account = await readableRepo(db, params.repo)
    const { records, cursor } = await recordPageAsJson(db, account.did, params.collection, {
      limit: params.limit ?? 50,
      cursor: params.cursor,
      reverse: params.reverse === true,
    })
    const more = cursor === undefined ? '' : `,"cursor":${JSON.stringify(cursor)}`
    return jsonText<OutputSchema>(`{"records":[${records.join(',')}]${more}}`)
  })
