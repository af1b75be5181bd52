// com.atproto.repo.createRecord: one create, one commit.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { prepareRecordWrite, recordWriteOutput } from '../../../../repo/prepare.js'
import { ownRepo } from '../../../../repo/read.js'
import { writeRecords } from '../../../../repo/writer.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.createRecord<AuthFor<'com.atproto.repo.createRecord'>>(async ({ auth, input }) => {
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
