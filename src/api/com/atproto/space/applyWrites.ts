// com.atproto.space.applyWrites: every write in one rev, or none; results in input order.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { writeSpaceRecords, type SpaceWrite } from '#src/space/repo-write.js'
import { spaceWriteTarget } from '#src/space/repo-handlers.js'

const NS = 'com.atproto.space.applyWrites'

export default method('com.atproto.space.applyWrites', (deps) => async ({ auth, input }) => {
  const b = input.body
  const { space, did, mayWrite } = spaceWriteTarget(auth, b)
  const writes: SpaceWrite[] = b.writes.map((w) => {
    if (w.$type === `${NS}#create`)
      return { action: 'create', collection: w.collection, rkey: w.rkey, record: w.value, validate: b.validate }
    if (w.$type === `${NS}#update`)
      return { action: 'update', collection: w.collection, rkey: w.rkey, record: w.value, validate: b.validate }
    if (w.$type === `${NS}#delete`) return { action: 'delete', collection: w.collection, rkey: w.rkey }
    throw xrpcError('InvalidRequest', 'Unknown write type')
  })
  const { results } = await writeSpaceRecords(deps, space, did, writes, mayWrite)
  return {
    encoding: 'application/json',
    body: {
      results: results.map((r) =>
        r.action === 'delete'
          ? { $type: `${NS}#deleteResult` as const }
          : {
              $type: `${NS}#${r.action}Result` as `${typeof NS}#createResult`,
              uri: r.uri,
              cid: r.cid,
              ...(r.validationStatus ? { validationStatus: r.validationStatus } : {}),
            },
      ),
    },
  }
})
