// com.atproto.sync.getRepo: the repository as a CAR rooted at the current commit; since: only the
// blocks written after that revision. Streamed from one snapshot as the client reads it
// (repo/repo-car.ts).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { repoCarStream } from '../../../../repo/repo-car.js'
import type { AuthFor } from '../../../../auth/verifier.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.sync.getRepo<AuthFor<'com.atproto.sync.getRepo'>>(async ({ auth, params }) => {
    // the migration token of the account itself reads its repository even while deactivated
    const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
    return {
      encoding: 'application/vnd.ipld.car',
      body: await repoCarStream(db, params.did, { since: params.since, allowDeactivated }),
    }
  })
