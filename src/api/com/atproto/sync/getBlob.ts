// com.atproto.sync.getBlob: the bytes under their stored MIME type, sandboxed so a browser never
// runs them as this origin's content. A taken-down blob reads as absent.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { syncRepo } from '../../../../repo/read.js'
import { servableBlob } from '../../../../repo/blobs.js'

export default (api: Server, { db, blobstore }: Pick<Services, 'db' | 'blobstore'>) =>
  api.com.atproto.sync.getBlob<AuthFor<'com.atproto.sync.getBlob'>>(async ({ auth, params }) => {
    // the migration token of the account itself reads its blobs even while deactivated
    const allowDeactivated = auth.credentials.type === 'migration' && auth.credentials.did === params.did
    await syncRepo(db, params.did, { allowDeactivated })
    const row = await servableBlob(db, params.did, params.cid)
    const found = row && (await blobstore.read(params.cid))
    if (!row || !found) throw xrpcError('BlobNotFound', 'Blob not found')
    return {
      encoding: row.mime_type as '*/*',
      body: found.stream,
      headers: {
        'content-length': String(found.size),
        'x-content-type-options': 'nosniff',
        'content-security-policy': "default-src 'none'; sandbox",
      },
    }
  })
