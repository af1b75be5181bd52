// com.atproto.repo.describeRepo: handle, DID document and the collections the repository holds.
import { method } from '#src/api/method.js'
import { didDocFor } from '#src/account/store.js'
import { readableRepo, repoCollections } from '#src/repo/read.js'

export default method('com.atproto.repo.describeRepo', ({ db }) => async ({ params }) => {
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
