// com.atproto.sync.getRecord: a CAR proving the record's presence (or absence) under the current
// commit: the commit, the MST path and the record block. A taken-down record is not served.
import { Readable } from 'node:stream'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { checkCollection, checkRkey } from '../../../../repo/prepare.js'
import { recordProofCar } from '../../../../repo/repo-car.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRecord<AuthFor<'com.atproto.sync.getRecord'>>(async ({ params }) => {
    const path = { collection: checkCollection(params.collection), rkey: checkRkey(params.rkey) }
    const car = await recordProofCar(db, params.did, path)
    return { encoding: 'application/vnd.ipld.car', body: Readable.from([car]) }
  })
