// com.atproto.space.putRecord: creates the record or replaces it; the scope asked is update when it exists, else create.
import { method } from '#src/api/method.js'
import { writeSpaceRecords } from '#src/space/repo-write.js'
import { spaceWriteTarget, writeAnswer } from '#src/space/repo-handlers.js'

export default method('com.atproto.space.putRecord', (deps) => async ({ auth, input }) => {
  const b = input.body
  const { space, did, mayWrite } = spaceWriteTarget(auth, b)
  const { results } = await writeSpaceRecords(
    deps,
    space,
    did,
    [{ action: 'update', upsert: true, collection: b.collection, rkey: b.rkey, record: b.record, validate: b.validate }],
    mayWrite,
  )
  return writeAnswer(results[0])
})
