// com.atproto.repo.putRecord: create or replace one record; swapRecord null means "must not exist".
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { prepareRecordWrite, recordWriteOutput } from '../../../../repo/prepare.js'
import { ownRepo } from '../../../../repo/read.js'
import { writeRecords } from '../../../../repo/writer.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.putRecord<AuthFor<'com.atproto.repo.putRecord'>>(async ({ auth, input }) => {
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
