// com.atproto.space.createRecord: one new record in the caller's repo of a space; an existing path is RecordAlreadyExists.
import { method } from '#src/api/method.js'
import { writeSpaceRecords } from '#src/space/repo-write.js'
import { spaceWriteTarget, writeAnswer } from '#src/space/repo-handlers.js'

export default method('com.atproto.space.createRecord', (deps) => async ({ auth, input }) => {
  const b = input.body
  const { space, did, mayWrite } = spaceWriteTarget(auth, b)
  const { results } = await writeSpaceRecords(
    deps,
    space,
    did,
    [{ action: 'create', collection: b.collection, rkey: b.rkey, record: b.record, validate: b.validate }],
    mayWrite,
  )
  return writeAnswer(results[0])
})
