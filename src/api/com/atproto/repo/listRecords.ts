// com.atproto.repo.listRecords: newest rkey first (reverse: oldest first), paged by rkey along the
// (did, collection, rkey) index.
import { method } from '#src/api/method.js'
import type { OutputSchema } from '#src/generated/server/types/com/atproto/repo/listRecords.js'
import { readableRepo, recordPageAsJson } from '#src/repo/read.js'
import { jsonText } from '#src/api/json-text.js'

export default method('com.atproto.repo.listRecords', ({ db }) => async ({ params }) => {
  const account = await readableRepo(db, params.repo)
  const { records, cursor } = await recordPageAsJson(db, account.did, params.collection, {
    limit: params.limit ?? 50,
    cursor: params.cursor,
    reverse: params.reverse === true,
  })
  const more = cursor === undefined ? '' : `,"cursor":${JSON.stringify(cursor)}`
  return jsonText<OutputSchema>(`{"records":[${records.join(',')}]${more}}`)
})
