// com.atproto.repo.deleteRecord: deleting a record that does not exist succeeds without a commit.
import { method } from '#src/api/method.js'
import { prepareDelete } from '#src/repo/prepare.js'
import { ownRepo } from '#src/repo/read.js'
import { writeRecords } from '#src/repo/writer.js'

export default method('com.atproto.repo.deleteRecord', ({ db }) => async ({ auth, input }) => {
  const { did } = auth.credentials
  const body = input.body
  await ownRepo(db, body.repo, did)
  const write = prepareDelete(did, {
    collection: body.collection,
    rkey: body.rkey,
    swapCid: body.swapRecord,
    ignoreMissing: body.swapRecord === undefined,
  })
  const { commit } = await writeRecords(db, did, [write], { swapCommit: body.swapCommit })
  return { encoding: 'application/json', body: commit ? { commit } : {} }
})
