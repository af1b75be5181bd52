// com.atproto.repo.deleteRecord: deleting a record that does not exist succeeds without a commit.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { prepareDelete } from '../../../../repo/prepare.js'
import { ownRepo } from '../../../../repo/read.js'
import { writeRecords } from '../../../../repo/writer.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.deleteRecord<AuthFor<'com.atproto.repo.deleteRecord'>>(async ({ auth, input }) => {
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
