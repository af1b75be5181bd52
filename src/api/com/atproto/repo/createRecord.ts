// com.atproto.repo.createRecord: one create, one commit.
import { method } from '#src/api/method.js'
import { prepareRecordWrite, recordWriteOutput } from '#src/repo/prepare.js'
import { ownRepo } from '#src/repo/read.js'
import { writeRecords } from '#src/repo/writer.js'

export default method('com.atproto.repo.createRecord', ({ db }) => async ({ auth, input }) => {
  const { did } = auth.credentials
  const body = input.body
  await ownRepo(db, body.repo, did)
  const write = await prepareRecordWrite(did, {
    action: 'create',
    collection: body.collection,
    rkey: body.rkey,
    record: body.record,
    validate: body.validate,
  })
  const { commit } = await writeRecords(db, did, [write], { swapCommit: body.swapCommit })
  return recordWriteOutput(write, commit!)
})
