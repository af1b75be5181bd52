// com.atproto.sync.getRepo: the repository as a CAR rooted at the current commit, streamed;
// since: only the blocks written after that revision. Written by repo/car.ts in 64 KiB chunks.
import { Readable } from 'node:stream'
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { syncRepo } from '../../../../repo/read.js'
import { carChunks } from '../../../../repo/car.js'
import type { MigrationAuth } from '../../../../auth/verifier.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRepo<MigrationAuth>(async ({ auth, params }) => {
    // the migration token of the account itself reads its repository even while deactivated
    const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
    // one transaction: the root and its blocks are one consistent snapshot
    const { root, rows } = await db.transaction().execute(async (trx) => {
      const { root } = await syncRepo(trx, params.did, { allowDeactivated })
      let q = trx.selectFrom('repo_block').select(['cid', 'content']).where('did', '=', params.did)
      if (params.since) q = q.where('repo_rev', '>', params.since)
      return { root, rows: await q.execute() }
    })
    return {
      encoding: 'application/vnd.ipld.car',
      body: Readable.from(carChunks(root.cid, rows), { objectMode: false }),
    }
  })
