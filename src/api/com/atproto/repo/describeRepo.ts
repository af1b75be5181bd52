// com.atproto.repo.describeRepo: handle, DID document and the collections the repository holds.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { didDocFor } from '../../../../account/store.js'
import { readableRepo, repoCollections } from '../../../../repo/read.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.repo.describeRepo<AuthFor<'com.atproto.repo.describeRepo'>>(async ({ params }) => {
    const account = await readableRepo(db, params.repo)
    const didDoc = await didDocFor(db, account.did)
    const collections = await repoCollections(db, account.did)
    return {
      encoding: 'application/json',
      body: {
        handle: account.handle,
        did: account.did,
        didDoc: didDoc ?? {},
        collections,
        handleIsCorrect: !!didDoc?.alsoKnownAs.includes(`at://${account.handle}`),
      },
    }
  })
