// com.atproto.sync.getCheckout (deprecated, still called by older tools): the current commit, its
// tree and records as a CAR. Only the current tree's blocks are stored, so it is getRepo without
// `since`.
import { method } from '#src/api/method.js'
import { repoCarStream } from '#src/repo/repo-car.js'

export default method('com.atproto.sync.getCheckout', ({ db }) => async ({ params }) => ({
  encoding: 'application/vnd.ipld.car',
  body: await repoCarStream(db, params.did),
}))
