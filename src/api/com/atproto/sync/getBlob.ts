// com.atproto.sync.getBlob: the bytes under their stored MIME type, sandboxed so a browser never
// runs them as this origin's content. A taken-down blob reads as absent.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { syncRepo } from '#src/repo/read.js'
import { blobAnswer, servableBlob } from '#src/blob/blobs.js'

export default method('com.atproto.sync.getBlob', ({ db, blobstore }) => async ({ auth, params }) => {
  // the migration token of the account itself reads its blobs even while deactivated
  const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
  await syncRepo(db, params.did, { allowDeactivated })
  const row = await servableBlob(db, params.did, params.cid)
  const found = row && (await blobstore.read(params.cid))
  if (!row || !found) throw xrpcError('BlobNotFound', 'Blob not found')
  return blobAnswer(row.mime_type, found)
})
