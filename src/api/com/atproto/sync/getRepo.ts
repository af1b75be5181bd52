// com.atproto.sync.getRepo: the repository as a CAR rooted at the current commit; since: only the
// blocks written after that revision. Streamed from one snapshot as the client reads it
// (repo/repo-car.ts).
import { method } from '#src/api/method.js'
import { repoCarStream } from '#src/repo/repo-car.js'

export default method('com.atproto.sync.getRepo', ({ db }) => async ({ auth, params }) => {
  // the migration token of the account itself reads its repository even while deactivated
  const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
  return {
    encoding: 'application/vnd.ipld.car',
    body: await repoCarStream(db, params.did, { since: params.since, allowDeactivated }),
  }
})
