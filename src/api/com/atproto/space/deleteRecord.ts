// com.atproto.space.deleteRecord: succeeds when the record is absent, without a new rev or a notification.
import { method } from '#src/api/method.js'
import { writeSpaceRecords } from '#src/space/repo-write.js'
import { spaceWriteTarget } from '#src/space/repo-handlers.js'

export default method('com.atproto.space.deleteRecord', (deps) => async ({ auth, input }) => {
  const b = input.body
  const { space, did, mayWrite } = spaceWriteTarget(auth, b)
  await writeSpaceRecords(deps, space, did, [{ action: 'delete', collection: b.collection, rkey: b.rkey, ignoreMissing: true }], mayWrite)
  return { encoding: 'application/json', body: {} }
})
