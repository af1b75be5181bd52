// com.atproto.sync.getRecord: a CAR proving the record's presence (or absence) under the current
// commit: the commit, the MST path and the record block. A taken-down record is not served.
import { Readable } from 'node:stream'
import { method } from '#src/api/method.js'
import { checkCollection, checkRkey } from '#src/repo/prepare.js'
import { recordProofCar } from '#src/repo/repo-car.js'

export default method('com.atproto.sync.getRecord', ({ db }) => async ({ params }) => {
  const path = { collection: checkCollection(params.collection), rkey: checkRkey(params.rkey) }
  const car = await recordProofCar(db, params.did, path)
  return { encoding: 'application/vnd.ipld.car', body: Readable.from([car]) }
})
