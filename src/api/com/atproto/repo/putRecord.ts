// com.atproto.repo.putRecord: create or replace one record; swapRecord null means "must not exist".
import { method } from '#src/api/method.js'
import { prepareRecordWrite, recordWriteOutput } from '#src/repo/prepare.js'
import { ownRepo } from '#src/repo/read.js'
import { writeRecords } from '#src/repo/writer.js'

export default method('com.atproto.repo.putRecord', ({ db }) => async ({ auth, input }) => {
  const { did } = auth.credentials
  const body = input.body
  await ownRepo(db, body.repo, did)
  const write = await prepareRecordWrite(did, {
    action: 'update',
    upsert: true,
    collection: body.collection,
    rkey: body.rkey,
    record: body.record,
    validate: body.validate,
    swapCid: body.swapRecord,
  })
  // identical content writes nothing: the answer names the commit the record already is in
  const { commit, current } = await writeRecords(db, did, [write], { swapCommit: body.swapCommit })
  return recordWriteOutput(write, commit ?? current)
})
