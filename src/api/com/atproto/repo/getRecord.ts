// com.atproto.repo.getRecord: a record from the index, its value read from the block store.
import { method } from '#src/api/method.js'
import type { OutputSchema } from '#src/generated/server/types/com/atproto/repo/getRecord.js'
import { xrpcError } from '#src/errors.js'
import { readableRepo, recordAsJson } from '#src/repo/read.js'
import { jsonText } from '#src/api/json-text.js'

export default method('com.atproto.repo.getRecord', ({ db }) => async ({ params }) => {
  const account = await readableRepo(db, params.repo)
  const uri = `at://${account.did}/${params.collection}/${params.rkey}`
  const rec = await recordAsJson(db, account.did, uri)
  if (!rec || (params.cid && params.cid !== rec.cid)) throw xrpcError('RecordNotFound', `Could not locate record: ${uri}`)
  // {uri, cid, value}: the output is the record's JSON text as it is
  return jsonText<OutputSchema>(rec.json)
})
